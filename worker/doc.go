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
//	   │      (done record           (marker held by    limit passed)   (queue: owns  (owns the
//	   │       exists; ack)           another; ack)     ack             waiter slot)  run marker)
//	   │                                                                 │ marker     │ handler
//	   │                                                                 └─ free ────▶│ returns
//	   │                              ┌──────────────────┬──────────────────┬─────────┤
//	   │                              ▼                  ▼                  ▼         ▼
//	   │                          succeeded          retry scheduled      dead     given back
//	   │                          (done record,      (ack; the tick is    (ack;    (shutdown past
//	   │                           ack)               kept aside until    dead      the bound: no
//	   │                                              due)                letter)   ack, any
//	   │                                                 │ promoted                 consumer takes
//	   └─────────────────────────────────────────────────┘ (new entry,              it over at once)
//	                                                        attempt+1)
//
// Every arrow out of "pending" is one atomic store step that first checks
// ownership; a worker whose entry was taken over meanwhile writes nothing
// and counts the run as lost. A waiting or running entry stays pending and
// owned while its worker heartbeats it.
//
// # Ownership, heartbeats and takeover
//
// An entry is owned by the consumer it was last delivered to. A worker
// heartbeats every entry it holds each HeartbeatInterval: the heartbeat
// resets the entry's idle time in the store without counting a delivery
// (Redis: XCLAIM to itself with JUSTID) and extends the overlap marker the
// entry holds. Another consumer may take an entry over only once it has
// been idle for TakeoverIdle (Redis: XAUTOCLAIM with that minimum idle
// time), which counts a delivery. HeartbeatInterval is at most a third of
// TakeoverIdle, so a live worker's entries survive two failed heartbeats,
// and a handler running ten times TakeoverIdle is never started twice
// while its worker lives. A crashed worker's entries are taken over
// within about TakeoverIdle + HeartbeatInterval.
//
// A worker stops trusting an entry when a heartbeat finds it owned by
// someone else, or its marker gone, or when its heartbeats have failed for
// TakeoverIdle − HeartbeatInterval since the last one that reached the
// store: it cancels the handler's context with cause ErrOwnershipLost.
// Handlers must honour their context.
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
//     TakeoverIdle while its handler runs. Another worker takes the entry
//     over and runs it; the paused one, on waking, has its context
//     cancelled at its next heartbeat and its result is refused (lost),
//     but what its handler did before that stands.
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
// # Overlap
//
// Per job, across the whole fleet: OverlapSkip (default) acknowledges a
// tick whose job has a run in flight anywhere and counts it as
// skipped_overlap; OverlapQueue lets one tick per job wait (pending, owned
// and heartbeated) and skips any further one; OverlapAllow has no marker.
// The "run in flight" marker is a lease in the store: it names the stream
// entry that holds it and expires TakeoverIdle after its last heartbeat,
// so a crashed worker blocks its job for at most that long. A marker
// passes with its entry: the consumer that takes an entry over takes its
// marker too. A waiting tick is admitted when the marker is released
// (the store notifies the fleet) or, at the latest, at its next heartbeat.
// Note that with OverlapSkip a tick taken over from a crashed worker is
// itself skipped if another tick of its job started meanwhile.
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
// shutdown cut it off: then it is given back); ticks dead-lettered without
// a run (delivery limit, no handler) count as dead; skipped_overlap and
// skipped_done count ticks that did not run. Also
// worker_run_duration_seconds{job_name}, worker_reclaimed_total{job_name},
// worker_runs_in_flight, worker_runs_waiting, worker_tick_delay_seconds
// (store time at the start of a first attempt minus the slot),
// worker_retries_promoted_total and worker_store_errors_total{op}.
package worker
