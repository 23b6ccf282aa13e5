package worker

import (
	"context"
	"time"

	"github.com/onetick/onetick"
)

// AttemptEnd is what Config.OnAttempt's end function learns of an
// attempt once its result is settled.
type AttemptEnd struct {
	// Kind is what the attempt's result asked of the store.
	Kind FinishKind
	// Recorded: the store took the result while this consumer still owned
	// the tick. When false the tick may run again elsewhere.
	Recorded bool
	// Err is the handler's error (nil: success).
	Err error
	// Result is what the attempt reported (exit code, HTTP status).
	Result onetick.Result
	// Duration is the handler's run time by the worker's clock.
	Duration time.Duration
}

// Outcome names the attempt's end: succeeded, retried, dead, released
// (cut off by shutdown or a lost heartbeat, handed back without spending
// the attempt) or lost (the result was not recorded).
func (e AttemptEnd) Outcome() string {
	if !e.Recorded {
		return string(OutcomeLost)
	}
	switch e.Kind {
	case FinishDone:
		return string(OutcomeSucceeded)
	case FinishRetry:
		return string(OutcomeRetried)
	case FinishDead:
		return string(OutcomeDead)
	default:
		return "released"
	}
}

// attemptStart calls Config.OnAttempt, if set: the handler runs with the
// context it returns; end (maybe nil) is called once the result is
// settled.
func (w *Worker) attemptStart(ctx context.Context, t *Task) (context.Context, func(AttemptEnd)) {
	if w.cfg.OnAttempt == nil {
		return ctx, nil
	}
	hctx, end := w.cfg.OnAttempt(ctx, t)
	if hctx == nil {
		hctx = ctx
	}
	return hctx, end
}
