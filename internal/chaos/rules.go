// # The checker
//
// Check judges a history by the rules below and returns a Report: the
// violations, each with the window of history around it, the documented
// cases (allowed by a row of the README's guarantees, counted apart) and
// the totals. The command `go run ./internal/chaos/cmd/check FILE` prints
// it (exit 0: no violation, 1: violations, 2: a bad file). docs/chaos.md
// says the same for a reader of the repository.
//
// Events are judged in time order (T; equal times keep the file's order).
// A scheduled or backfilled tick is identified by job and slot (a run's
// or enqueue's Job and Slot, or read from a tick id "job:slot"), a
// trigger's by its tick id (TickKind "trigger", or any id not of the form
// "job:slot"). A slot counts as fired by the scheduler only through an
// enqueue without TickKind, or a backfill's enqueue made within
// Bounds.Settle of the slot's due time (it took the slot's claim before
// the leader, which then finds the slot claimed and skips it); a later
// backfill fills no gap for the checks below. A job's expected slots are
// From, From+Every, ... up to the end event's T minus Bounds.Settle. A store failover fault is a fault named
// failover, store-kill or store-restart; a fault is active from its start
// to its end event (an instantaneous one, or one never ended other than
// stop, partition, latency, skew and failover, only at its start).
//
// enqueued_twice: two enqueue events of the same tick with different
// entries (or without an Entry: two events without one are two
// observations). The same entry seen again is one observation. A
// backfill that enqueues a slot the scheduler fired is one too (since
// da80d72 a backfill skips the slots the run ledger records; histories
// made before show such re-enqueues of slots older than the tick
// records' retention). Under
// Bounds.AsyncLoss, a second enqueue when a store failover fault was
// active between the two is documented (an acknowledged claim lost with
// the old primary), not a violation.
//
// run_twice: each run_start of a tick after its first is judged against
// the earlier ones. A run after a failed end of the same worker (a
// run_end with OK false or absent, of the same worker, and the same PID
// and attempt where both give them) is a retry. Any other second start is
// documented (the README's "a handler can still run twice": a worker
// killed, stalled or cut off from the store between its side effect and
// its done record, whose liveness lapses so that another worker takes its
// tick over; counted in Totals.Reruns) when, between the earlier run's
// start less StartSlack (1s) and the second start, a fault could have
// lapsed the earlier worker's liveness: a kill9, worker-kill, term, stop,
// partition or latency whose Target is that run's Worker (or its PID, as
// "N" or "pid:N"), a store failover fault (any target), or a lapse event
// of that worker naming this tick (its own word that it cancelled the
// run or did not record its result; a lapse naming no tick, a failed
// heartbeat, excuses nothing). The earlier run
// is the one that ended OK when the tick completed before, and then the
// fault must also start before that end plus DoneSlack (5s: after it the
// done record was written and no fault can undo it; under AsyncLoss a
// store failover fault up to the second start still counts, the
// acknowledged record lost with the old primary; and a lapse naming this
// tick, its result not recorded, up to the second start); else each run still
// open. StartSlack allows for a run started just before its replica
// was killed being logged a few milliseconds after the kill event. Under
// AsyncLoss, a tick enqueued twice across a failover (documented) and run
// again across a store failover fault is documented too. Anything else is
// a violation.
//
// never_run: each expected slot of a prefer: duplicate job must have a
// run_start (a job with Run; and, when the slot was enqueued at all, a
// scheduled enqueue) or a scheduled enqueue (a job without). Consecutive
// missing slots are one finding. Under AsyncLoss, missing slots with a
// store failover fault active between the first one's due time minus
// MaxSkew and the last one's plus Settle are documented.
//
// A job with no history (never_run and missed_uncounted): the expected
// slots before the job's first slot with a scheduled enqueue or a missed
// event, due before (plus MaxSkew) a leader "acquired" event that came
// after the first expected slot was due and before that first slot, are
// documented, not judged: the first leader fired nothing of the job, so
// the next one started after its own start (README: "a job with no
// history starts with the first slot after the leader starts";
// docs/design.md: the slots in between are not counted as missed).
//
// missed_uncounted: for a prefer: missed job, the uncovered slots are its
// expected slots without an enqueue and without a missed event of that
// job and slot. The job's counted total comes from the counter events
// with that Job and Name scheduler_job_missed_ticks_total or
// scheduler_missed_ticks_total: each is a replica's cumulative value, so
// per (name, replica, job) the checker adds each increase over the
// previous value; a value below the previous one, or a kill9, worker-kill
// or term fault targeting the replica between the two, starts a new
// process life counted from zero. The job's total is the larger of the
// two names' sums over all replicas. The rule: uncovered ≤ counted. The counters may count more (a replica can
// count a slot another leader fired), never less. Under AsyncLoss, when
// uncovered minus the uncovered slots due near a store failover (as for
// never_run) ≤ counted, the shortfall is documented.
//
// trust_overlap: a replica trusts its lease from a leader "acquired"
// event's T until its TrustUntil, moved by each "renewed" event's
// TrustUntil; its trust ends at its "lost" event, a kill9 or worker-kill
// fault targeting it (the process is gone), its next "acquired", or its
// TrustUntil, whichever is first (a
// renewal after the TrustUntil had passed starts a new term; a term
// without TrustUntil lasts until one of the others, or the end). Two terms
// of different replicas that overlap by more than Bounds.MaxSkew are a
// violation: the slack allows for TrustUntil being read on a replica's
// clock, which the run skews by at most MaxSkew, while T is the runner's.
// Under AsyncLoss an overlap during a store failover fault is documented
// (the README: two replicas can both believe they lead across a failover;
// the stale one's claims are fenced).
//
// epoch_backwards: the leader "acquired" events that carry an epoch, in
// time order: each epoch must exceed every earlier one, or equal the
// highest so far when the same replica acquired it (leadership kept). An
// acquired event without an epoch is not compared.
//
// history: no run event, no end event, a second run event, a job without
// a name, period (at least 1ms) or first slot, a prefer other than missed
// or duplicate, an enqueue without job and slot or tick id. A history
// the checker cannot judge fails.
package chaos
