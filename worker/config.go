package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
)

// Config configures a Worker. The zero value of each optional field means
// its default.
type Config struct {
	// Store is the backend's worker store, bound to the fleet's consumer
	// group. Required.
	Store Store
	// Consumer is this worker's name in the group; default
	// onetick.DefaultHolder() (host:pid:random). Two live workers must
	// never share one.
	Consumer   string
	Logger     *slog.Logger          // default slog.Default()
	Registerer prometheus.Registerer // nil: metrics are not registered
	Clock      clockwork.Clock       // default the real clock
	// Concurrency is the most handlers running at once. Default 10.
	Concurrency int
	// ShutdownTimeout bounds how long Run, once its ctx is done, lets
	// handlers in flight finish before it cancels their contexts (cause
	// ErrShutdown). Default 5s.
	ShutdownTimeout time.Duration
	// HeartbeatInterval is how often a worker marks itself alive in the
	// store, resets the idle time of the entries it holds and extends
	// their run markers; it is also how often it looks for entries to take
	// over and retries ticks waiting for a marker. Default 1s, or
	// TakeoverIdle/3 when that is shorter.
	HeartbeatInterval time.Duration
	// LivenessTTL is how long the store keeps a worker alive after its
	// last heartbeat. Once it lapses, the worker's ticks (running or
	// waiting) and its run markers are taken over at once by the others:
	// a worker that dies has its ticks run elsewhere within about
	// LivenessTTL + HeartbeatInterval. A worker whose heartbeats have not
	// reached the store for LivenessTTL − HeartbeatInterval cancels its
	// handlers (ErrOwnershipLost), so it never runs a tick it may have
	// lost. Default 3×HeartbeatInterval; at least 2×HeartbeatInterval, at
	// most TakeoverIdle.
	LivenessTTL time.Duration
	// Dynamic lets jobs be registered (Handle, Set) and removed (Remove)
	// while Run runs, and Run start with none: for jobs defined at run
	// time.
	Dynamic bool
	// TakeoverIdle is the backstop: an entry that goes this long without
	// a heartbeat is taken over even though its owner is alive (a worker
	// that lost track of it). Default 30s; at least 3×HeartbeatInterval.
	// A run marker expires this long after its last heartbeat.
	TakeoverIdle time.Duration
	// DoneRetention is how long a tick's done record is kept. Default 1h.
	// Acknowledgement and done record are written in one step, so an entry
	// that succeeded is never redelivered; the record guards against the
	// same tick entering a stream again (a duplicate append after a store
	// failover, a backfill of an old slot) for this long.
	DoneRetention time.Duration
	// MaxDeliveries dead-letters an entry the store has delivered more
	// often than this without a result (a tick that crashes its workers,
	// which no handler error ever reports). Default 10.
	MaxDeliveries int
	// OnAttempt, if set, is called as each attempt starts, with the
	// handler's context and task: the handler runs with the context it
	// returns (a tracer puts the attempt's span there), and end, if not
	// nil, is called once the attempt's result is settled. Both run on
	// the attempt's goroutine and must not block.
	OnAttempt func(ctx context.Context, t *Task) (_ context.Context, end func(AttemptEnd))
}

// Defaults.
const (
	DefaultConcurrency     = 10
	DefaultShutdownTimeout = 5 * time.Second
	DefaultTakeoverIdle    = 30 * time.Second
	DefaultHeartbeat       = time.Second
	DefaultDoneRetention   = time.Hour
	DefaultMaxDeliveries   = 10
	DefaultMaxAttempts     = 3
)

// withDefaults returns c with every zero field set.
func (c Config) withDefaults() Config {
	if c.Consumer == "" {
		c.Consumer = onetick.DefaultHolder()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.TakeoverIdle == 0 {
		c.TakeoverIdle = DefaultTakeoverIdle
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(DefaultHeartbeat, c.TakeoverIdle/3)
	}
	if c.LivenessTTL == 0 {
		c.LivenessTTL = min(3*c.HeartbeatInterval, c.TakeoverIdle)
	}
	if c.DoneRetention == 0 {
		c.DoneRetention = DefaultDoneRetention
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	return c
}

// Validate checks c and the relations between its (defaulted) fields,
// naming the field that is wrong. It does not modify c.
func (c Config) Validate() error {
	if c.Store == nil {
		return cfgErr("worker.store", "is required")
	}
	d := c.withDefaults()
	switch {
	case c.Concurrency < 0:
		return cfgErr("worker.concurrency", "must not be negative, got %d", c.Concurrency)
	case c.ShutdownTimeout < 0:
		return cfgErr("worker.shutdown_timeout", "must not be negative, got %s", c.ShutdownTimeout)
	case d.TakeoverIdle < 10*time.Millisecond:
		return cfgErr("worker.takeover_idle", "must be at least 10ms, got %s", c.TakeoverIdle)
	case d.HeartbeatInterval <= 0:
		return cfgErr("worker.heartbeat_interval", "must be positive, got %s", c.HeartbeatInterval)
	case d.HeartbeatInterval > d.TakeoverIdle/3:
		return cfgErr("worker.heartbeat_interval", "%s must be at most a third of takeover_idle (%s): a live worker's ticks must survive two failed heartbeats without being taken over", d.HeartbeatInterval, d.TakeoverIdle)
	case d.LivenessTTL < 2*d.HeartbeatInterval:
		return cfgErr("worker.liveness_ttl", "%s must be at least twice heartbeat_interval (%s): a live worker must survive a failed heartbeat", d.LivenessTTL, d.HeartbeatInterval)
	case d.LivenessTTL > d.TakeoverIdle:
		return cfgErr("worker.liveness_ttl", "%s must be at most takeover_idle (%s)", d.LivenessTTL, d.TakeoverIdle)
	case c.DoneRetention < 0:
		return cfgErr("worker.done_retention", "must not be negative, got %s", c.DoneRetention)
	case d.DoneRetention < d.TakeoverIdle:
		return cfgErr("worker.done_retention", "%s must be at least takeover_idle (%s)", d.DoneRetention, d.TakeoverIdle)
	case c.MaxDeliveries < 0:
		return cfgErr("worker.max_deliveries", "must not be negative, got %d", c.MaxDeliveries)
	}
	return nil
}

func cfgErr(field, format string, args ...any) error {
	return &onetick.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
