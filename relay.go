package onetick

import (
	"context"
	"fmt"
	"time"
)

// A Relay hands a job's ticks to a queue a team already runs, instead of
// the job's stream (issue 21). Where the queue lives in onetick's own
// store the hand-off is written in the claim's own atomic step, so a tick
// is in the other queue if and only if it is claimed: asynq on the same
// Redis (the claim's script writes the task), River on the same
// PostgreSQL (the claim's transaction inserts the job). NATS JetStream
// is another system, so its hand-off cannot be atomic with the claim: a
// RelayNATS job's ticks are claimed into its stream as any tick, and the
// worker's relay consumer publishes them (package relay/natsrelay).
type Relay struct {
	// Kind is RelayAsynq, RelayRiver or RelayNATS.
	Kind string
	// Queue is the queue's name in the other system; default
	// DefaultRelayQueue.
	Queue string
	// Type is asynq's task type, River's job kind; default the job's name.
	Type string
	// MaxAttempts bounds the other system's tries of the task (asynq's
	// MaxRetry + 1, River's max_attempts); 0: the system's default.
	MaxAttempts int
	// Retention is how long the other system keeps a finished task's
	// identity, so a late duplicate is refused (asynq's Retention); 0:
	// the tick record's retention.
	Retention time.Duration
}

// Relay kinds.
const (
	RelayAsynq = "asynq"
	RelayRiver = "river"
	// RelayNATS publishes ticks to NATS JetStream from the job's stream
	// (a worker's relay consumer), not in the claim.
	RelayNATS = "nats"
)

// InClaim reports whether r's hand-off is written in the claim by the
// store (asynq, River); false for nil and for RelayNATS, whose ticks go
// to the job's stream as any tick.
func (r *Relay) InClaim() bool {
	return r != nil && (r.Kind == RelayAsynq || r.Kind == RelayRiver)
}

// claimed is the Tick.Relay of a job with relay r: r when the store hands
// it in the claim, else nil (the tick goes to the stream).
func (r *Relay) claimed() *Relay {
	if !r.InClaim() {
		return nil
	}
	return r
}

// DefaultRelayQueue is a relay's queue when none is named.
const DefaultRelayQueue = "default"

// Validate checks r, naming the field that is wrong.
func (r *Relay) Validate() error {
	switch r.Kind {
	case RelayAsynq, RelayRiver, RelayNATS:
	default:
		return fmt.Errorf("kind %q: must be %s, %s or %s", r.Kind, RelayAsynq, RelayRiver, RelayNATS)
	}
	if r.MaxAttempts < 0 {
		return fmt.Errorf("max_attempts: must not be negative")
	}
	if r.Retention < 0 {
		return fmt.Errorf("retention: must not be negative")
	}
	return nil
}

// Relayer is implemented by a store that can write a relay's hand-off in
// its claim (and its Enqueue, for triggers and backfills).
type Relayer interface {
	// CanRelay returns nil when the store hands ticks of r in its claim,
	// or an error that says why it cannot (the wrong store, the other
	// system's data in a layout this build does not know).
	CanRelay(ctx context.Context, r Relay) error
}

// RelayBacklogger is implemented by a store that can tell how many of a
// relay's tasks wait in the other system, not yet taken by its workers
// (asynq: the queue's pending list; River: the queue's jobs available,
// scheduled or retryable). `onetick status` shows it per relay; a store
// that is no RelayBacklogger shows "n/a", and so does a NATS relay (with
// a note: JetStream's consumers are not onetick's).
type RelayBacklogger interface {
	RelayBacklog(ctx context.Context, r Relay) (int64, error)
}
