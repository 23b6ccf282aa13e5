package worker

import (
	"context"
	"time"
)

// heartbeats keeps this worker alive in the store, its held entries owned
// and their run markers held, every HeartbeatInterval, until ctx is done
// (after the last handler returned).
func (w *Worker) heartbeats(ctx context.Context) {
	t := w.clock.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		w.heartbeat(ctx)
	}
}

func (w *Worker) heartbeat(ctx context.Context) {
	var holds []Hold
	var hs []*held
	var gens []uint64
	waiters := false
	w.mu.Lock()
	for _, h := range w.held {
		holds = append(holds, Hold{D: h.d, Marker: h.marker})
		hs = append(hs, h)
		gens = append(gens, h.gen)
		waiters = waiters || h.state == waiting
	}
	w.mu.Unlock()
	if waiters {
		// Retry on a timer too: release notifications are best effort,
		// and a dead worker's marker frees without one.
		w.wakeWaiters()
	}
	// A slow heartbeat may still keep this worker alive when it commits;
	// meanwhile the trust timer acts on the delay.
	hctx, cancel := context.WithTimeout(ctx, max(w.cfg.LivenessTTL, w.cfg.TakeoverIdle/2))
	defer cancel()
	sent := w.clock.Now()
	lost, err := w.store.Heartbeat(hctx, w.cfg.Consumer, w.cfg.LivenessTTL, w.cfg.TakeoverIdle, holds)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		w.storeError("heartbeat", err)
		return
	}
	w.alive(sent)
	isLost := make(map[int]bool, len(lost))
	for _, i := range lost {
		isLost[i] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, h := range hs {
		if !isLost[i] || !w.holdsLocked(h) || h.gen != gens[i] {
			continue // kept, or settled or changed meanwhile: the answer is about the past
		}
		w.loseLocked(h, "a heartbeat found the tick no longer owned by this consumer (taken over after its liveness lapsed, or given up)")
	}
}

// alive records that a heartbeat (or the registration) sent at sent
// reached the store, which keeps this worker alive until at least sent +
// LivenessTTL by its own clock: the worker trusts what it holds until one
// heartbeat interval before that, and distrusts it then unless a later
// heartbeat got through.
func (w *Worker) alive(sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sent.Before(w.aliveSent) {
		return
	}
	w.aliveSent = sent
	d := w.clock.Until(w.trustDeadlineLocked())
	if w.trust == nil {
		w.trust = w.clock.AfterFunc(d, w.distrust)
		return
	}
	w.trust.Reset(d)
}

func (w *Worker) trustDeadlineLocked() time.Time {
	return w.aliveSent.Add(w.cfg.LivenessTTL - w.cfg.HeartbeatInterval)
}

// distrust cancels the handlers of this worker when its heartbeats have
// not reached the store for so long that its liveness may lapse (and its
// ticks be taken over) before the next one does: the safety margin is one
// heartbeat interval. Waiting ticks stay: they run only after a Begin,
// which the store fences.
func (w *Worker) distrust() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.clock.Now().Before(w.trustDeadlineLocked()) {
		return // a heartbeat got through meanwhile
	}
	for _, h := range w.held {
		if h.state == running {
			w.loseLocked(h, "heartbeats have not reached the store for nearly the liveness TTL: another consumer may take the tick over")
		}
	}
}

// loseLocked acts on a held tick this consumer no longer owns.
func (w *Worker) loseLocked(h *held, why string) {
	if h.settling {
		return
	}
	switch h.state {
	case running:
		if h.cancel != nil {
			h.cancel(ErrOwnershipLost)
		}
		w.log.Warn("cancelling the handler: "+why, "job", h.d.Job, "tick", h.d.Tick, "entry", h.d.ID)
	case waiting:
		w.log.Warn("dropping a waiting tick: "+why, "job", h.d.Job, "tick", h.d.Tick, "entry", h.d.ID)
		w.forgetLocked(h)
	}
}

// promoter moves due retries back into their streams: as soon as this
// worker scheduled one, when the store says the next is due, and every
// HeartbeatInterval in case another worker scheduled one and died.
func (w *Worker) promoter(ctx context.Context) {
	const batch = 100
	failures := 0
	for {
		wait := w.cfg.HeartbeatInterval
		p, err := w.store.PromoteDue(ctx, batch)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			w.storeError("promote", err)
			failures++
			wait = retryDelay(failures)
		default:
			failures = 0
			w.m.promoted.Add(float64(p.N))
			if p.N == batch {
				wait = 0
			} else if p.Next >= 0 {
				wait = min(wait, p.Next)
			}
		}
		if wait <= 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		t := w.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.wakePromoter:
			t.Stop()
		case <-t.Chan():
		}
	}
}
