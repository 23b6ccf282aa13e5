// Package onetick is a highly available periodic-job scheduler: run any
// number of replicas, one leads, and every scheduled slot of every job is
// enqueued once, with the store itself refusing ticks that were already
// claimed or that come from a superseded leader.
//
// The root package holds the domain: Slot, Tick, Lease, Epoch, Term, the
// Backend interface (Leaser + Claimer + Controller + Doctor) and the
// JobStore contract, the Elector, the Scheduler, Ops, the metrics and the
// errors. The stores live in their own packages: memory (in-process),
// sqlite (the file store), redis (standalone, Sentinel or Cluster) and
// postgres. Schedule math lives in package cron; every store runs the
// conformance suite in package backendtest.
//
// # Election
//
// Each replica runs an Elector:
//
//	          acquire ok                       ctx done / StepDown / fenced /
//	standby ───────────────▶ leader ─────────▶ renew refused / trust deadline
//	   ▲  ▲                    │  ▲             │
//	   │  └─ held: wait for    │  └─ renew ok   ▼
//	   │     release notice    │     (every    stepping down: stop firing,
//	   │     or lease expiry   │      Renew)   wait for the in-flight claim,
//	   │                       │               release (compare-and-delete)
//	   └───────────────────────┴────────────── unless the store refused us
//
// A standby tries to acquire only while ElectorConfig.MayAcquire allows
// (nil: always); Poke makes it ask again at once. StepDown ends a term the
// way shutdown does, release included, and returns to standby: a balancer
// of shards uses the two to move a shard's lease between replicas.
//
// Acquire is one atomic store operation that takes a free lease and
// increments the epoch, storing "holder|epoch", so holder and fencing
// token can never disagree. Renew is compare-and-extend; Release is
// compare-and-delete followed by a notification that wakes standbys at
// once. A standby that finds the lease held waits for that notification or
// for the lease's remaining TTL as reported by the store, whichever comes
// first, so a crashed leader is replaced within one TTL.
//
// The trust rule: a leader trusts its lease only until the instant it SENT
// the last successful acquire or renew, plus TTL, minus SafetyMargin, on
// its monotonic clock. At that deadline it stops firing, whether or not it
// has seen a renewal fail. Since the store started counting the TTL no
// earlier than that send, the leader stops before the store can grant the
// lease to anyone else, provided the two clocks advance at rates that
// differ by less than SafetyMargin over one TTL.
//
// # Fencing happens in the store
//
// The rule above cannot stop a replica that is paused (GC, SIGSTOP, a
// stalled disk) between checking its deadline and reaching the store.
// Therefore every claim carries the lease and the store checks, in the same
// atomic step that records and enqueues the ticks, that it still holds
// exactly that "holder|epoch". A superseded leader's claim fails with
// ErrFenced, writes nothing, is counted in scheduler_fenced_ticks_total,
// and makes the replica step down. The store also refuses a tick whose
// slot is not after the job's persisted last-fired slot, or whose per-tick
// record exists (Duplicate, scheduler_duplicate_ticks_total), and a tick
// whose slot lies in the future by the store's own clock beyond a small
// tolerance (Early), so a replica with a fast clock cannot fire early.
//
// # What is guaranteed, and what is not
//
//   - At most one replica's claims are accepted at any instant, and no
//     (job, slot) is enqueued twice, as long as the store keeps its
//     acknowledged writes. This holds across deploy overlaps, crashes,
//     pauses of any length and clock skew.
//   - It does not hold across a store failure that loses acknowledged
//     writes: a Redis failover to a replica that had not received the lease
//     or a claim, or a restart without persistence. Then a second leader
//     can be elected and a slot already claimed can be claimed again; the
//     README's guarantees table says what is measured there.
//   - Two replicas may both believe they lead for a moment (a paused
//     leader that has not yet noticed); only one of them can enqueue.
//   - A slot that came due while no leader fired is fired late or skipped
//     according to the job's Prefer; both are counted.
//   - Delivery to a Sink outside the store happens after the claim and is
//     not part of its atomic step: a failed delivery is counted, not
//     retried.
//   - Damaged store state (a key of another type, a value that does not
//     parse) never causes a duplicate: a claim does everything that can
//     fail before its first write, and a tick whose own state is damaged
//     is refused as Broken while the others are claimed. Damaged shared
//     state (lease, epoch, last-fired slots as a whole) stops the work that
//     depends on it and is reported (Elector.Problems, /readyz); it is
//     never guessed around. The history is auxiliary and never blocks.
//   - Epochs never repeat or go backwards: a new epoch is at least the
//     stored one plus one, the history's newest plus one, and the store's
//     clock in milliseconds.
package onetick
