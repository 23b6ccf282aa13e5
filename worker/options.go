package worker

import (
	"math/rand/v2"
	"time"

	"github.com/onetick/onetick"
)

// JobOption configures one registered job.
type JobOption func(*jobOptions)

type jobOptions struct {
	timeout     time.Duration
	maxAttempts int
	backoff     func(attempt int) time.Duration
	overlap     Overlap
	prefer      onetick.Prefer
	maxWaiting  int
	stream      string
}

// WithTimeout bounds each attempt; its context is cancelled with cause
// ErrTimeout when d passes. Zero (the default) means no timeout.
func WithTimeout(d time.Duration) JobOption { return func(o *jobOptions) { o.timeout = d } }

// WithMaxAttempts sets how many attempts a tick gets before it goes to the
// dead letters. Default 3.
func WithMaxAttempts(n int) JobOption { return func(o *jobOptions) { o.maxAttempts = n } }

// WithBackoff sets the delay before attempt+1 after attempt failed.
// Default DefaultBackoff. An error with a RetryAfter() time.Duration method
// raises the delay to at least what it asks.
func WithBackoff(f func(attempt int) time.Duration) JobOption {
	return func(o *jobOptions) { o.backoff = f }
}

// WithOverlap sets the overlap policy. Default OverlapSkip.
func WithOverlap(p Overlap) JobOption { return func(o *jobOptions) { o.overlap = p } }

// WithPrefer sets the job's preference, as the scheduler's Job.Prefer
// (the daemon passes the configuration's prefer:). It decides what the
// overlap policy does with a tick that comes due while a run of the job
// is in flight: onetick.PreferMissed (the default) skips it (OverlapSkip,
// or OverlapQueue once a tick waits) and counts it as a missed slot;
// onetick.PreferDuplicate never skips it for overlap: with OverlapSkip or
// OverlapQueue it waits, and the job's ticks run one at a time in slot
// order, up to WithMaxWaiting ticks waiting.
func WithPrefer(p onetick.Prefer) JobOption { return func(o *jobOptions) { o.prefer = p } }

// WithMaxWaiting bounds how many ticks of a job that prefers duplicate may
// wait for its run in flight, fleet-wide; a tick beyond is skipped and
// counted as missed. Default DefaultMaxWaiting (the scheduler's default
// max_catchup; the daemon passes the job's max_catchup).
func WithMaxWaiting(n int) JobOption { return func(o *jobOptions) { o.maxWaiting = n } }

// DefaultMaxWaiting is the default of WithMaxWaiting.
const DefaultMaxWaiting = 100

// WithStream sets the job's stream key; it must match the scheduler's
// (default "onetick:stream:<job>", the scheduler's default too).
func WithStream(key string) JobOption { return func(o *jobOptions) { o.stream = key } }

// DefaultBackoff is exponential with jitter: attempt n waits between half
// and all of min(1s·2^(n-1), 10m).
func DefaultBackoff(attempt int) time.Duration {
	return ExponentialBackoff(time.Second, 10*time.Minute)(attempt)
}

// ExponentialBackoff returns a backoff of base·2^(attempt-1), capped at
// max, of which a random half is subtracted ("equal jitter"), so a fleet
// whose ticks failed together does not retry in lockstep.
func ExponentialBackoff(base, max time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration { return jittered(base, max, attempt, rand.Float64()) }
}

// jittered is the deterministic core of ExponentialBackoff; r is in [0,1).
func jittered(base, max time.Duration, attempt int, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + time.Duration(r*float64(d/2))
}

// ConstantBackoff waits d before every retry.
func ConstantBackoff(d time.Duration) func(attempt int) time.Duration {
	return func(int) time.Duration { return d }
}
