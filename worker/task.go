package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/onetick/onetick"
)

// Task is one run of a tick, as a handler sees it.
type Task struct {
	Job  string
	Slot onetick.Slot
	// Tick is the tick's identity, "job:slot". It is the same for every
	// attempt and every redelivery: use it as the idempotency key of side
	// effects downstream.
	Tick string
	// Epoch is the fencing token of the leader that enqueued the tick.
	Epoch onetick.Epoch
	// Attempt is 1-based; a retry carries the next number.
	Attempt int
	// Payload is the job's JSON payload.
	Payload json.RawMessage
	// Replica is the scheduler replica that enqueued the tick.
	Replica string
	// Stream and EntryID locate the stream entry being run.
	Stream  string
	EntryID string
	// Deliveries is the store's delivery count of this entry: above 1 it
	// was taken over from a consumer that died, stalled or shut down, which
	// may have run it already (see the package documentation).
	Deliveries int
	// Enqueued is when the entry entered the stream (store clock).
	Enqueued time.Time
	// Version is the definition version of a job defined at run time
	// that the tick was claimed under (empty for other jobs, and for a
	// replayed dead letter).
	Version string
}

// Handler runs ticks. Work must return when ctx is done: ctx is cancelled
// on the job's timeout, on shutdown past the worker's bound, and when this
// consumer loses ownership of the tick (context.Cause tells which:
// ErrTimeout, ErrShutdown, ErrOwnershipLost).
type Handler interface {
	Work(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, t *Task) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, t *Task) error { return f(ctx, t) }

// HandleJSON registers a handler that receives the payload decoded into T.
// A payload that does not decode is a permanent failure: the tick goes to
// the dead letters with the decode error, without retries.
func HandleJSON[T any](w *Worker, job string, fn func(ctx context.Context, t *Task, args T) error, opts ...JobOption) error {
	if fn == nil {
		return w.Handle(job, nil, opts...)
	}
	return w.Handle(job, HandlerFunc(func(ctx context.Context, t *Task) error {
		var args T
		if err := json.Unmarshal(t.Payload, &args); err != nil {
			return fmt.Errorf("decoding the payload of %s: %w: %w", t.Tick, err, ErrSkipRetry)
		}
		return fn(ctx, t, args)
	}), opts...)
}

var (
	// ErrSkipRetry, wrapped in a handler's error, sends the tick to the
	// dead letters at once instead of retrying it.
	ErrSkipRetry = errors.New("worker: do not retry")
	// ErrOwnershipLost is the cause of a handler's context when another
	// consumer took the tick over, or when heartbeats failed for so long
	// that one may have.
	ErrOwnershipLost = errors.New("worker: ownership of the tick lost")
	// ErrShutdown is the cause of a handler's context when the worker
	// stops and the handler outlived the shutdown bound.
	ErrShutdown = errors.New("worker: shutting down")
	// ErrTimeout is the cause of a handler's context when the job's
	// timeout passed.
	ErrTimeout = errors.New("worker: handler timed out")
	// ErrNoHandler is the error of a tick dead-lettered because no handler
	// is registered for its job.
	ErrNoHandler = errors.New("worker: no handler registered for the job")
)

// retryAfter is implemented by errors that ask for a minimum delay before
// the next attempt (the HTTP executor's 429 and 503 with Retry-After).
type retryAfter interface{ RetryAfter() time.Duration }

// RetryAfterError returns an error that wraps err and asks for at least d
// before the next attempt.
func RetryAfterError(err error, d time.Duration) error { return &afterError{err: err, d: d} }

type afterError struct {
	err error
	d   time.Duration
}

func (e *afterError) Error() string             { return e.err.Error() }
func (e *afterError) Unwrap() error             { return e.err }
func (e *afterError) RetryAfter() time.Duration { return e.d }

// PanicError is the error of an attempt whose handler panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }
