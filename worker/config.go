package worker

import (
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
	// TakeoverIdle is how long an entry must go without a heartbeat before
	// another consumer may take it over. Default 30s. A consumer that dies
	// has its ticks run elsewhere within about TakeoverIdle +
	// HeartbeatInterval.
	TakeoverIdle time.Duration
	// HeartbeatInterval is how often a worker resets the idle time of the
	// entries it holds and extends their overlap markers; it is also how
	// often it looks for entries to take over. Default TakeoverIdle/6; at
	// most TakeoverIdle/3, so that two heartbeats can fail before a live
	// worker's entries become eligible for takeover.
	HeartbeatInterval time.Duration
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
}

// Defaults.
const (
	DefaultConcurrency     = 10
	DefaultShutdownTimeout = 5 * time.Second
	DefaultTakeoverIdle    = 30 * time.Second
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
		c.HeartbeatInterval = c.TakeoverIdle / 6
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
