package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/onetick/onetick"
)

// Run is one attempt at running one tick.
type Run struct {
	Job     string
	Slot    onetick.Slot
	Tick    string // tick id "job:slot"; derived from Job and Slot when empty
	Epoch   onetick.Epoch
	Attempt int // 1-based
	Payload json.RawMessage
	// Report, when set, receives what the attempt produced, once, before
	// Execute returns: a command's exit code and the end of its output,
	// an HTTP response's status and the end of its body (see the package
	// documentation, Results). The worker's adapter passes it on to
	// worker.Report.
	Report func(onetick.Result)
}

// report passes res to r.Report, if set.
func (r Run) report(res onetick.Result) {
	if r.Report != nil {
		r.Report(res)
	}
}

// tickID is the run's tick id, so a Run built by hand still logs and signs
// with the same identity the scheduler gave the tick.
func (r Run) tickID() string {
	if r.Tick != "" {
		return r.Tick
	}
	return onetick.TickID(r.Job, r.Slot)
}

// Executor runs one attempt of a tick. The returned error classifies the
// attempt: nil is success; an error that matches ErrPermanent must not be
// retried; an error with a RetryAfter() time.Duration method asks for a
// minimum delay before the next attempt; any other error is an ordinary
// failed attempt.
type Executor interface {
	Execute(ctx context.Context, r Run) error
}

// ErrPermanent marks a failure that retrying cannot fix: the worker
// dead-letters the tick at once instead of spending its remaining attempts.
var ErrPermanent = errors.New("permanent failure")

// permanent wraps err so that errors.Is(err, ErrPermanent) holds while the
// message stays err's own.
func permanent(err error) error { return &permanentError{err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

// retryAfterError asks for a minimum delay before the next attempt.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.err, e.delay)
}
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.delay }

// ctxErr is why ctx ended, wrapping both ctx.Err() and a distinct cause,
// so errors.Is finds context.Canceled as well as the caller's own cause.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// RetryAfter reports the minimum delay err asks for before the next
// attempt, if any error in its chain has a RetryAfter() time.Duration method.
func RetryAfter(err error) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) {
		return 0, false
	}
	return ra.RetryAfter(), true
}
