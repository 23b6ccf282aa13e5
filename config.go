package onetick

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jonboulle/clockwork"
)

// LeaseConfig sets the timing of the election. The zero value of each field
// means its default.
type LeaseConfig struct {
	// TTL is how long the store keeps a lease that is not renewed.
	// Default 15s. A crashed leader is replaced within one TTL.
	TTL time.Duration
	// Renew is the renewal period. Default TTL/3, so that one failed renewal
	// still leaves a second chance. Must be below TTL/2.
	Renew time.Duration
	// SafetyMargin is subtracted from the TTL when the leader computes how
	// long it may trust its lease: it stops firing at (instant it sent the
	// last successful acquire or renew) + TTL - SafetyMargin, on its
	// monotonic clock, whether or not it has seen a renewal fail. It covers
	// clock-rate differences between replica and store. Default TTL/10.
	SafetyMargin time.Duration
	// Retry is how often a standby retries when it has no better signal
	// (errors from the store). Default Renew. While a lease is held a
	// standby instead waits for the release notification or the lease's
	// own expiry instant, whichever is first.
	Retry time.Duration
	// ReleaseTimeout bounds the release on shutdown. Default 2s.
	ReleaseTimeout time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c LeaseConfig) WithDefaults() LeaseConfig {
	if c.TTL == 0 {
		c.TTL = 15 * time.Second
	}
	if c.Renew == 0 {
		c.Renew = c.TTL / 3
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = c.TTL / 10
	}
	if c.Retry == 0 {
		c.Retry = c.Renew
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = 2 * time.Second
	}
	return c
}

// Validate checks the relations between the (defaulted) fields.
func (c LeaseConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.TTL < 10*time.Millisecond:
		return configErr("lease.ttl", "must be at least 10ms, got %s", c.TTL)
	case c.Renew <= 0:
		return configErr("lease.renew", "must be positive, got %s", c.Renew)
	case c.Renew >= c.TTL/2:
		return configErr("lease.renew", "%s must be below half the ttl (%s): a renewal must be able to fail once and be retried before the lease runs out", c.Renew, c.TTL/2)
	case c.SafetyMargin < 0:
		return configErr("lease.safety_margin", "must not be negative, got %s", c.SafetyMargin)
	case c.TTL-c.SafetyMargin <= c.Renew:
		return configErr("lease.safety_margin", "%s leaves no usable lease: ttl (%s) - margin must exceed the renew period (%s)", c.SafetyMargin, c.TTL, c.Renew)
	case c.Retry <= 0:
		return configErr("lease.retry", "must be positive, got %s", c.Retry)
	case c.ReleaseTimeout <= 0:
		return configErr("lease.release_timeout", "must be positive, got %s", c.ReleaseTimeout)
	}
	return nil
}

// replicaDefaults fills what every part of the engine defaults alike: the
// replica's holder identity (DefaultHolder; holder nil for a part without
// one), the real clock and slog's default logger.
func replicaDefaults(holder *string, clock *clockwork.Clock, logger **slog.Logger) {
	if holder != nil && *holder == "" {
		*holder = DefaultHolder()
	}
	if *clock == nil {
		*clock = clockwork.NewRealClock()
	}
	if *logger == nil {
		*logger = slog.Default()
	}
}

// DefaultHolder returns a holder identity unique to this process:
// hostname, pid and a random suffix.
func DefaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
