package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/onetick/onetick"
)

// execute runs one admitted tick's handler in its own goroutine and
// settles the result. It owns one handler slot.
func (w *Worker) execute(h *held, storeNow time.Time) {
	defer w.handlers.Done()
	defer func() { w.slots <- struct{}{} }()
	d, j := h.d, h.job
	series := w.m.job(j.name)
	// Built only when something is logged: most runs log nothing.
	logger := sync.OnceValue(func() *slog.Logger {
		return w.log.With("job", d.Job, "tick", d.Tick, "slot", d.Slot.String(), "epoch", int64(d.Epoch),
			"attempt", d.Attempt, "entry", d.ID)
	})

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if j.timeout > 0 {
		t := w.clock.AfterFunc(j.timeout, func() { cancel(ErrTimeout) })
		defer t.Stop()
	}
	w.mu.Lock()
	h.cancel = cancel
	if w.cutoff {
		cancel(ErrShutdown)
	}
	w.mu.Unlock()

	if d.Attempt == 1 {
		w.m.delay.Observe(storeNow.Sub(d.Slot.Time()).Seconds())
	}
	if d.Deliveries > 1 {
		logger().Warn("running a tick taken over from another consumer: it may have run there already",
			"deliveries", d.Deliveries)
	}
	w.m.inFlight.Inc()
	task := taskOf(d)
	actx, attemptEnd := w.attemptStart(ctx, task)
	hctx, rep := withReporter(actx)
	hctx = context.WithValue(hctx, missedKey{}, func(reason string) { w.m.missedTicks(j.prefer, reason).Inc() })
	start := w.clock.Now()
	err := call(hctx, j.h, task)
	elapsed := w.clock.Since(start)
	result := rep.close(elapsed)
	w.m.inFlight.Dec()
	series.duration.Observe(elapsed.Seconds())
	cause := context.Cause(ctx)

	f := Finish{D: d, Result: result}
	var outcome Outcome // what follows a failed run
	switch {
	case err == nil:
		f.Kind, f.Retention = FinishDone, w.cfg.DoneRetention
	case errors.Is(cause, ErrShutdown) || errors.Is(cause, ErrOwnershipLost):
		// Cut off by shutdown, or because heartbeats stopped reaching the
		// store: no attempt is spent; if the entry is still this
		// consumer's, another worker takes it over at once.
		f.Kind, f.Result = FinishRelease, onetick.Result{}
	case errors.Is(err, ErrSkipRetry) || d.Attempt >= j.maxAttempts:
		f.Kind, f.Err, outcome = FinishDead, err.Error(), OutcomeDead
	default:
		delay := j.backoff(d.Attempt)
		var ra retryAfter
		if errors.As(err, &ra) {
			delay = max(delay, ra.RetryAfter())
		}
		f.Kind, f.Err, f.Delay, outcome = FinishRetry, err.Error(), max(delay, 0), OutcomeRetried
	}
	log := logger
	if err != nil && cause != nil {
		log = func() *slog.Logger { return logger().With("cause", cause.Error()) }
	}
	w.mu.Lock()
	h.settling = true
	w.mu.Unlock()
	owned, settled := w.settle(h, f, log)
	if attemptEnd != nil {
		attemptEnd(AttemptEnd{Kind: f.Kind, Recorded: owned && settled, Err: err, Result: f.Result, Duration: elapsed})
	}
	w.mu.Lock()
	w.forgetLocked(h)
	w.mu.Unlock()
	w.wakeWaiters()
	if f.Kind == FinishRetry && settled && owned {
		select {
		case w.wakePromoter <- struct{}{}:
		default:
		}
	}

	switch {
	case !settled || !owned:
		series.count(OutcomeLost)
		log().Warn("tick result not recorded: this consumer no longer owns the tick (taken over, or the store was unreachable); another run may follow or have happened",
			"err", errString(err), "duration", elapsed)
	case err == nil:
		series.count(OutcomeSucceeded)
		if w.log.Enabled(context.Background(), slog.LevelDebug) {
			log().Debug("tick succeeded", "duration", elapsed)
		}
	default:
		series.count(OutcomeFailed)
		var pe *PanicError
		if errors.As(err, &pe) {
			log().Error("handler panicked", "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		}
		switch f.Kind {
		case FinishRelease:
			log().Warn("tick cut off and given back", "err", err, "duration", elapsed)
		case FinishDead:
			series.count(outcome)
			log().Error("tick failed and went to the dead letters", "err", err, "duration", elapsed,
				"max_attempts", j.maxAttempts)
		default:
			series.count(outcome)
			log().Warn("tick failed; retry scheduled", "err", err, "duration", elapsed, "retry_in", f.Delay)
		}
	}
}

// call runs the handler, turning a panic into a *PanicError.
func call(ctx context.Context, h Handler, t *Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h.Work(ctx, t)
}

func taskOf(d *Delivery) *Task {
	var p json.RawMessage
	if d.Payload != "" {
		p = json.RawMessage(d.Payload)
	}
	return &Task{Job: d.Job, Slot: d.Slot, Tick: d.Tick, Epoch: d.Epoch, Attempt: d.Attempt, Payload: p,
		Replica: d.Replica, Stream: d.Stream, EntryID: d.ID, Deliveries: d.Deliveries, Enqueued: d.Enqueued, Version: d.Version}
}

// settle records f, retrying a failing store until no other consumer can
// have taken the entry over yet (or the shutdown bound passed). It reports
// whether the store answered and whether this consumer still owned the
// entry.
func (w *Worker) settle(h *held, f Finish, log func() *slog.Logger) (owned, settled bool) {
	for attempt := 1; ; attempt++ {
		reply := make(chan settleRes, 1)
		w.settles <- settleReq{f: f, reply: reply}
		res := <-reply
		if res.err == nil {
			return res.owned, true
		}
		err := res.err
		w.mu.Lock()
		deadline := w.trustDeadlineLocked()
		w.mu.Unlock()
		if !w.clock.Now().Before(deadline) {
			log().Error("giving up recording the tick's result: the store did not answer before the entry could be taken over", "err", err)
			return false, false
		}
		t := w.clock.NewTimer(retryDelay(attempt))
		select {
		case <-t.Chan():
		case <-w.boundPassed:
			t.Stop()
			log().Error("giving up recording the tick's result: shutdown bound passed", "err", err)
			return false, false
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type settleReq struct {
	f     Finish
	reply chan settleRes
}

type settleRes struct {
	owned bool
	err   error
}

// settler records the results of handlers in batches: whatever queued up
// while the previous call was in flight goes in the next one, so that a
// busy worker needs far fewer round trips than ticks, and an idle one
// waits for nothing. It runs until ctx is done, after the last handler
// returned.
func (w *Worker) settler(ctx context.Context) {
	const maxBatch = 256
	batch := make([]settleReq, 0, maxBatch)
	fs := make([]Finish, 0, maxBatch)
	for {
		batch, fs = batch[:0], fs[:0]
		select {
		case <-ctx.Done():
			return
		case r := <-w.settles:
			batch = append(batch, r)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-w.settles:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		for _, r := range batch {
			fs = append(fs, r.f)
		}
		sctx, cancel := w.storeCtx()
		owned, err := w.store.Finish(sctx, w.cfg.Consumer, fs)
		cancel()
		if err == nil && len(owned) != len(fs) {
			err = fmt.Errorf("worker: store answered %d results for %d", len(owned), len(fs))
		}
		if err != nil {
			w.storeError("finish", err)
		}
		for i, r := range batch {
			res := settleRes{err: err}
			if err == nil {
				res.owned = owned[i]
			}
			r.reply <- res
		}
	}
}
