package onetick

import (
	"context"
	"time"
)

// Leaser is the election half of a backend: a lease with a fencing epoch,
// held by at most one holder at a time as judged by the store's clock.
type Leaser interface {
	// Acquire takes the lease for holder with the given ttl if nobody holds
	// it, incrementing the epoch in the same atomic step. When someone holds
	// it, Acquire returns a *HeldError (errors.Is ErrLeaseHeld) describing
	// the holder and how long the lease has left.
	Acquire(ctx context.Context, holder string, ttl time.Duration) (Grant, error)
	// Renew extends the lease to ttl from now, only if the store still holds
	// exactly this lease (compare-and-extend). Otherwise ErrLeaseLost.
	Renew(ctx context.Context, lease Lease, ttl time.Duration) (Grant, error)
	// Release deletes the lease only if the store still holds exactly this
	// lease (compare-and-delete), records the end of the term and notifies
	// watchers. Releasing a lease that is no longer held returns ErrLeaseLost.
	Release(ctx context.Context, lease Lease) error
	// Leader reports the current lease.
	Leader(ctx context.Context) (LeaderInfo, error)
	// Watch returns a channel that receives a value whenever the lease may
	// have become free (released, or expired where the store reports expiry).
	// Notifications are coalesced and best effort: callers must still retry
	// on a timer. The channel is closed after ctx is done.
	Watch(ctx context.Context) <-chan struct{}
}

// Claimer is the tick half of a backend.
type Claimer interface {
	// Claim claims a batch of ticks in one atomic step: it checks that the
	// store still holds lease (otherwise ErrFenced and nothing is written),
	// and for each tick that its slot is not in the future by the store's
	// clock beyond the backend's tolerance (Early), that it was not claimed
	// before and, unless OutOfOrder, that its slot is after the job's
	// last-fired slot (Duplicate); a claimed tick moves the job's last-fired
	// slot, leaves a per-tick record for Tick.Retention and is appended to
	// Tick.Stream.
	//
	// All or nothing per tick, isolation per job: a tick whose own state
	// is damaged (its stream, its job's last-fired slot, its record) is
	// Broken and nothing is written for it, while the other ticks are
	// claimed normally; a claim that fails as a whole (an error) has
	// written nothing, so a retry can never append a tick twice. When the
	// last-fired state as a whole is unusable, Claim returns a
	// *DamageError and writes nothing.
	Claim(ctx context.Context, lease Lease, ticks []Tick) (ClaimResult, error)
	// LastFired returns the persisted last-fired slot of each named job that
	// has one. A job whose slot is damaged is left out of the map and
	// named in a DamageErrors returned with it (errors.Is ErrDamaged); when
	// the last-fired state as a whole is unusable the map is nil and the
	// error a *DamageError.
	LastFired(ctx context.Context, jobs []string) (map[string]Slot, error)
	// Time returns the store's clock.
	Time(ctx context.Context) (time.Time, error)
}

// Backend is what a store implements: the in-process memory store
// (package memory), the file store (package sqlite), Redis standalone,
// Sentinel or Cluster (package redis) and PostgreSQL (package postgres).
// The conformance suite in package backendtest checks every method's
// contract.
type Backend interface {
	Leaser
	Claimer
	// History returns up to n leadership terms, newest first. History is
	// auxiliary: damaged entries are skipped, and returned as a
	// DamageErrors together with the terms that could be read.
	History(ctx context.Context, n int) ([]Term, error)
	Doctor
	Controller
	// Close releases the backend's connections.
	Close() error
}

// Sharder is a store that spreads the fleet's jobs over shards
// (docs/shards.md), each with its own lease, epoch, history, last-fired
// state, records, controls, ledger and default streams. Shard returns
// shard n of shards as a full Backend that obeys the Backend contract on
// its own: a lease of one shard neither blocks nor fences another. Shard
// 0 of 1 is the store itself, under its own keys. The views share the
// store's connections: a view's Close does nothing, the store's closes.
// A store that cannot shard returns ErrShardsUnsupported for shards > 1.
type Sharder interface {
	Shard(n, shards int) (Backend, error)
}

// SchedulerBackend is the part of a Backend that a Scheduler calls: the
// lease (through its Elector), claims and last-fired slots, and the
// controls, read to know which jobs are paused. Every Backend is one.
type SchedulerBackend interface {
	Leaser
	Claimer
	ControlReader
}

// Doctor finds and moves aside damaged store state. `onetick status` and
// `onetick repair` use it; the engine never repairs by itself.
type Doctor interface {
	// Inspect checks the state the backend keeps for onetick (lease,
	// epoch, history, last-fired slots of jobs, tick records) and the
	// streams of jobs (job name -> stream key), and returns every damage
	// it finds. It writes nothing.
	Inspect(ctx context.Context, streams map[string]string) ([]*DamageError, error)
	// Repair moves one damage that Inspect reported aside, where the
	// operator can look at it, if it is still there exactly as reported
	// (compare-and-move); it returns where it was moved. It refuses state
	// that onetick does not own (streams: ErrNotRepairable) and a lease
	// that parses and merely lacks an expiry (the caller must first wait a
	// TTL to confirm no live leader renews it, then call Repair with
	// Confirmed set).
	Repair(ctx context.Context, d *DamageError, confirmed bool) (string, error)
}

// Sink receives ticks after the store claimed them, for destinations
// outside the store (standard output, later webhooks or NATS). The store's
// own stream already holds every claimed tick; a Sink is optional.
type Sink interface {
	Deliver(ctx context.Context, ticks []TickRecord) error
}

// claimWindowKey carries the claim's times to a Sink.
type claimWindowKey struct{}

type claimWindow struct{ sent, recv time.Time }

// ClaimWindow reports, from the context a Sink's Deliver gets from the
// scheduler, when the claim call that enqueued the ticks was sent to the
// store and when its answer came (the replica's clock): a tracer's claim
// span.
func ClaimWindow(ctx context.Context) (sent, recv time.Time, ok bool) {
	w, ok := ctx.Value(claimWindowKey{}).(claimWindow)
	return w.sent, w.recv, ok
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, ticks []TickRecord) error

// Deliver calls f.
func (f SinkFunc) Deliver(ctx context.Context, ticks []TickRecord) error { return f(ctx, ticks) }
