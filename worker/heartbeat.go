package worker

import "context"

// heartbeats keeps the held entries owned and their markers held, every
// HeartbeatInterval, until ctx is done (after the last handler returned).
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
		// Retry on a timer too: release notifications are best effort.
		w.wakeWaiters()
	}
	if len(holds) == 0 {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, w.cfg.TakeoverIdle/2)
	defer cancel()
	sent := w.clock.Now()
	lost, err := w.store.Heartbeat(hctx, w.cfg.Consumer, w.cfg.TakeoverIdle, holds)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		w.storeError("heartbeat", err)
		w.distrust()
		return
	}
	isLost := make(map[int]bool, len(lost))
	for _, i := range lost {
		isLost[i] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, h := range hs {
		if !w.holdsLocked(h) || h.gen != gens[i] {
			continue // settled or changed meanwhile: the answer is about the past
		}
		if !isLost[i] {
			h.refreshed = sent
			continue
		}
		w.loseLocked(h, "a heartbeat found the tick no longer owned by this consumer (taken over after it went idle)")
	}
}

// distrust cancels the handlers whose entries may have been taken over by
// now because heartbeats have not reached the store for too long: the
// safety margin is one heartbeat interval.
func (w *Worker) distrust() {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.held {
		if now.Sub(h.refreshed) >= w.cfg.TakeoverIdle-w.cfg.HeartbeatInterval {
			w.loseLocked(h, "heartbeats failed for nearly the takeover idle time: another consumer may take the tick over")
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
