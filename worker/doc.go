// Package worker runs each tick that the scheduler enqueues, once, on a
// fleet of workers: register a handler per job, call Run, and every tick
// of those jobs is run by one worker of the fleet, retried on failure,
// dead-lettered when it keeps failing, and never run twice while the
// worker running it lives.
//
//	w, _ := worker.New(worker.Config{Store: backend.WorkerStore("onetick")})
//	w.HandleFunc("nightly-billing", bill, worker.WithTimeout(time.Minute))
//	worker.HandleJSON(w, "report", func(ctx context.Context, t *worker.Task, args Report) error { ... })
//	err := w.Run(ctx) // until ctx is done; then a bounded graceful stop
//
// The store decides, not the process. A worker fleet is a consumer group
// on the jobs' streams; all judgments of time (idle, expiry, due) use the
// store's clock, and every write that settles a tick is fenced: it happens
// only if the store still shows the entry as owned by the writing
// consumer, in the same atomic step as the check. The Store interface
// states each operation's contract; package workertest checks them on
// every backend.
//
// # Life of a stream entry
//
//	                 fetch / takeover (delivery count +1)
//	appended ───────────────────────▶ pending, owned by a consumer
//	   ▲                                   │ Begin (atomic)
//	   │           ┌───────────────────────┼───────────────┬──────────────┬─────────────┐
//	   │           ▼                       ▼               ▼              ▼             ▼
//	   │      skipped_done           skipped_overlap    dead (delivery  waiting       running
//	   │      (done record           (marker held by    limit passed)   (owns a       (owns the
//	   │       exists; ack)           another; ack)     ack             waiter place) run marker)
//	   │                                                                 │ marker free│ handler
//	   │                                                                 └─ its turn ▶│ returns
//	   │                              ┌──────────────────┬──────────────────┬─────────┤
//	   │                              ▼                  ▼                  ▼         ▼
//	   │                          succeeded          retry scheduled      dead     given back
//	   │                          (done record,      (ack; the tick is    (ack;    (shutdown past
//	   │                           ack)               kept aside until    dead      the bound, or
//	   │                                              due)                letter)   lost contact:
//	   │                                                 │ promoted                 no ack, any
//	   └─────────────────────────────────────────────────┘ (new entry,              consumer takes
//	                                                        attempt+1)              it over at once)
//
// Every arrow out of "pending" is one atomic store step that first checks
// ownership; a worker whose entry was taken over meanwhile writes nothing
// and counts the run as lost. A waiting or running entry stays pending and
// owned while its worker is alive; once the worker's liveness lapses, any
// other worker takes the entry over (delivery count +1).
//
// # Liveness, heartbeats and takeover
//
// A worker is alive while its liveness record in the store is: Run
// registers it before taking anything (which also gives back whatever an
// earlier process of the same consumer name left pending: two live
// workers never share a name), and every HeartbeatInterval (default 1s) a
// heartbeat moves the record's expiry to LivenessTTL (default 3×the
// interval) past the store's clock, whether the worker holds anything or
// not. The same heartbeat resets the idle time of every entry the worker
// holds without counting a delivery (Redis: XCLAIM to itself with JUSTID)
// and extends the run markers they hold.
//
// Reclaim, which every worker calls each HeartbeatInterval, takes over at
// once every entry whose owner is not alive by the store's clock (its
// record lapsed, or it never had one, or the entry was given back), and
// counts a delivery. A run marker whose entry is owned by no live worker
// holds nothing. So a worker killed with SIGKILL has its ticks, running
// or waiting, run elsewhere within about LivenessTTL + HeartbeatInterval
// of its last heartbeat (make verify measures it; see the README), and
// its job is not blocked meanwhile. TakeoverIdle (default 30s) remains as
// a backstop: an entry of a live worker that has gone that long without a
// heartbeat (the worker lost track of it) is taken over too.
//
// A live worker's ticks are never taken over, however long its handler
// runs: its heartbeats keep it alive and its entries fresh (the suite
// runs a handler for ten times the liveness TTL on a fleet of three
// processes and sees it start once). A worker stops trusting what it
// holds when a heartbeat finds an entry owned by someone else or its
// marker or waiter place gone, and when its heartbeats have not reached
// the store for LivenessTTL − HeartbeatInterval since the last one sent
// that did (a timer, not the next heartbeat, decides): it cancels its
// handlers' contexts with cause ErrOwnershipLost, one heartbeat interval
// before the store could see it dead, and gives their ticks back if the
// store still has them as its own. Handlers must honour their context.
//
// # When a handler can still run twice
//
// Success is recorded in one atomic step that checks ownership, writes the
// tick's done record and acknowledges the entry; an entry with a done
// record is never run again (skipped_done). Two cases remain where one
// tick's handler runs twice:
//
//  1. The worker is killed (or loses the store) after the handler's side
//     effect and before the done record is written. The entry is taken
//     over and run again; Task.Deliveries is then above 1.
//  2. The worker is paused (GC, SIGSTOP, a stalled disk) for longer than
//     LivenessTTL while its handler runs. Another worker takes the entry
//     over and runs it; the paused one, on waking, has its context
//     cancelled (its trust deadline passed) and its result is refused
//     (lost), but what its handler did before that stands. A longer
//     LivenessTTL makes this rarer and a dead worker's takeover slower.
//
// Make both harmless downstream: use Task.Tick (the same on every attempt
// and delivery) as the idempotency key of side effects, and Task.Epoch,
// the fencing token of the leader that enqueued the tick, to refuse writes
// from a superseded schedule. A worker cut off by shutdown gives its entry
// back instead, so the next one starts at once (Deliveries > 1 again).
//
// # Retries and dead letters
//
// A failed attempt (an error, a panic, which is recovered and logged with
// the tick, or the job's timeout) is retried with the same tick id and
// the next attempt number: in one atomic step the entry is acknowledged
// and the next attempt is scheduled in the store after the job's backoff
// (exponential with jitter by default; an error with a RetryAfter()
// time.Duration method asks for a minimum delay). When it is due, any
// worker moves it back into the job's stream as a new entry, atomically
// with removing it from the schedule. After MaxAttempts, or at once for an
// error wrapping ErrSkipRetry (a payload HandleJSON cannot decode, say),
// the tick goes to the group's dead letters with its last error, and the
// entry is acknowledged, again in one step. An entry the store delivered
// more than MaxDeliveries times without any result (a tick that crashes
// its workers) is dead-lettered when next taken. Replay puts a dead letter
// back on its stream with the same tick id and attempt 1; a dead tick
// never got a done record, so the replay runs (unless the same tick
// succeeded through another entry meanwhile, which its done record shows).
//
// A handler may say what its attempt produced with Report (an exit code,
// an HTTP status, the end of its output); the worker settles it with the
// outcome, and a store that keeps the run ledger writes it on the
// outcome's event in the same step, with the attempt's duration.
//
// # Done records
//
// Acknowledgement and done record are written together, so a tick that
// succeeded is never redelivered by the store; its done record, kept for
// DoneRetention, guards against the same tick entering a stream again (a
// duplicate append after a store failover, a backfill of an old slot) and
// lets a settlement retried after a lost reply be recognised. Ticks
// skipped for overlap are acknowledged in the same step as the decision,
// so they are never redelivered either; they get no done record.
//
// # Overlap, and the job's preference
//
// Per job, across the whole fleet, a run holds the job's run marker (a
// lease in the store that names the stream entry holding it, extended by
// heartbeats, passing with the entry to a worker that takes it over); a
// tick that comes due while another run holds it is decided by the job's
// preference first (WithPrefer, the configuration's prefer:) and its
// overlap policy second, by the rule DecideOverlap states:
//
//	prefer \ overlap  skip (default)            queue                      allow
//	missed            skipped, a missed slot     one waits; others skipped  runs at once
//	duplicate         waits; slot order          the same                   runs at once
//
// A job that prefers missed loses the tick: it is acknowledged, counted as
// skipped_overlap and in worker_missed_ticks_total{prefer="missed",
// reason="overlap"} (which the missed-ticks alert reads) and logged with
// its reason. A job that prefers duplicate never loses a tick for
// overlap: every tick waits (pending, owned and heartbeated, holding a
// waiter place ordered by slot), and the job's ticks run one at a time in
// slot order, catch-up batches included. The store decides the order in
// Begin: a tick runs only when the marker is free, no tick of the job
// with a lower slot holds a waiter place, and none with a lower entry id
// is pending without one (delivered to a worker that has not begun it
// yet, or taken over from a dead one). At most WithMaxWaiting ticks wait
// (the daemon passes max_catchup); one beyond is skipped and counted as
// missed{prefer="duplicate"}, as the scheduler counts slots beyond
// max_catchup. A retry enters the order by its slot when it is promoted.
// A waiting tick is admitted when the marker is released (the store
// notifies the fleet) or, at the latest, at its next heartbeat; a dead
// worker's marker frees without a notification, at the next heartbeat of
// the waiters. With OverlapAllow there is no marker and no order.
//
// # Groups
//
// One Store serves one consumer group (one fleet); several fleets may
// consume the same streams with different groups, and each runs every
// tick. Retries and replays carry their group, and other groups
// acknowledge them without running. All workers of a group should
// register every job whose stream they read: a tick of a job with no
// handler is dead-lettered (ErrNoHandler).
//
// # Metrics
//
// worker_runs_total{job_name,outcome}: a handler run ends succeeded,
// failed or lost; a failed run is also counted as retried or dead (unless
// shutdown or lost contact cut it off: then it is given back); ticks
// dead-lettered without a run (delivery limit, no handler) count as dead;
// skipped_overlap and skipped_done count ticks that did not run.
// worker_missed_ticks_total{prefer,reason} counts the slots skipped for
// overlap, per preference (a fleet total, summed with the scheduler's
// missed slots by the alert). Also
// worker_run_duration_seconds{job_name}, worker_reclaimed_total{job_name},
// worker_runs_in_flight, worker_runs_waiting, worker_tick_delay_seconds
// (store time at the start of a first attempt minus the slot),
// worker_retries_promoted_total and worker_store_errors_total{op}.
package worker
