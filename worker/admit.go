package worker

import (
	"context"
	"fmt"
	"sort"
)

// Admission: the ticks a worker takes are begun in the store, which
// decides (Begin) whether each runs, waits for its job's run marker, or
// is skipped; waiting ticks are asked again when a marker may be free.

// startOf is what Begin is asked for h: the job's overlap policy as its
// preference makes it.
func (w *Worker) startOf(h *held) Start {
	o, waiting, ordered := policyOf(h.job.prefer, h.job.overlap, h.job.maxWaiting)
	return Start{D: h.d, Overlap: o, MaxWaiting: waiting, Ordered: ordered, MaxDeliveries: w.cfg.MaxDeliveries}
}

// admit begins deliveries just taken (fetched, or taken over when
// reclaimed), starting a handler, with one of the n free slots, for each
// the store admits. It returns the slots left.
func (w *Worker) admit(ds []*Delivery, n int, reclaimed bool) int {
	var starts []Start
	var hs []*held
	w.mu.Lock()
	for _, d := range ds {
		k := heldKey{d.Stream, d.ID}
		if _, dup := w.held[k]; dup {
			// Our own entry, idle because heartbeats failed: still ours.
			continue
		}
		j := w.jobs[d.Job]
		if reclaimed {
			name := d.Job
			if j == nil {
				name = unregisteredJob
			}
			w.m.job(name).reclaimed.Inc()
		}
		if j == nil {
			w.mu.Unlock()
			w.noHandler(d)
			w.mu.Lock()
			continue
		}
		h := &held{d: d, job: j}
		w.held[k] = h
		hs = append(hs, h)
		starts = append(starts, w.startOf(h))
	}
	w.mu.Unlock()
	if len(starts) == 0 {
		return n
	}
	return w.begin(hs, starts, n)
}

// begin asks the store to admit hs and acts on the answers.
func (w *Worker) begin(hs []*held, starts []Start, n int) int {
	ctx, cancel := w.storeCtx()
	defer cancel()
	res, err := w.store.Begin(ctx, w.cfg.Consumer, w.cfg.TakeoverIdle, starts)
	if err != nil {
		w.storeError("begin", err)
		// Their fate in the store is unknown: give them back, so that a
		// takeover does not wait for them to go idle.
		fs := make([]Finish, len(hs))
		for i, h := range hs {
			fs[i] = Finish{D: h.d, Kind: FinishRelease}
		}
		w.forget(hs)
		w.finishQuietly(fs)
		return n
	}
	var release []Finish
	for i, h := range hs {
		d, j := h.d, h.job
		log := w.log.With("job", d.Job, "tick", d.Tick, "attempt", d.Attempt, "entry", d.ID)
		switch a := res.Admissions[i]; a {
		case Run:
			w.mu.Lock()
			h.gen++
			if starts[i].Overlap != OverlapAllow {
				h.marker = MarkerRun
			}
			if !w.holdsLocked(h) || w.stopping || n == 0 {
				// Given up meanwhile (a heartbeat found its waiter place
				// gone), stopping, or no slot: give it back.
				w.forgetLocked(h)
				w.mu.Unlock()
				release = append(release, Finish{D: d, Kind: FinishRelease})
				continue
			}
			if h.state == waiting {
				w.m.waiting.Dec()
			}
			h.state = running
			n--
			w.handlers.Add(1)
			w.mu.Unlock()
			go w.execute(h, res.StoreTime)
		case Wait:
			w.mu.Lock()
			if !w.holdsLocked(h) {
				w.mu.Unlock()
				release = append(release, Finish{D: d, Kind: FinishRelease})
				continue
			}
			if h.state != waiting {
				w.m.waiting.Inc()
				log.Info("tick waits for the previous run of its job (overlap)", "prefer", string(j.prefer),
					"overlap", string(j.overlap))
			}
			h.gen++
			h.state, h.marker = waiting, MarkerWait
			w.mu.Unlock()
		default:
			w.forget([]*held{h})
			switch a {
			case SkipDone:
				w.m.job(j.name).count(OutcomeSkippedDone)
				log.Info("tick skipped: it has a done record already")
			case SkipOverlap:
				w.m.job(j.name).count(OutcomeSkippedOverlap)
				w.m.missedTicks(j.prefer, ReasonOverlap).Inc()
				why := "tick skipped: a previous run of its job is in flight (overlap); the slot is missed"
				if starts[i].MaxWaiting > 1 {
					why = "tick skipped: a previous run of its job is in flight and max_waiting ticks wait already (overlap); the slot is missed"
				}
				log.Warn(why, "prefer", string(j.prefer), "overlap", string(j.overlap), "reason", ReasonOverlap,
					"slot", d.Slot.String())
			case DeadDeliveries:
				w.m.job(j.name).count(OutcomeDead)
				log.Error("tick dead-lettered: delivered too often without a result (crash loop?)",
					"deliveries", d.Deliveries, "max_deliveries", w.cfg.MaxDeliveries)
			case NotOwned:
				log.Debug("tick no longer ours before it started")
			}
		}
	}
	if len(release) > 0 {
		w.finishQuietly(release)
	}
	return n
}

// readmitWaiters asks the store again about ticks waiting for their job's
// marker, up to n of them, lowest slots first (in slot order only the
// lowest of a job can run).
func (w *Worker) readmitWaiters(n int) int {
	var hs []*held
	w.mu.Lock()
	for _, h := range w.held {
		if h.state == waiting {
			hs = append(hs, h)
		}
	}
	w.mu.Unlock()
	if len(hs) == 0 {
		return n
	}
	sort.Slice(hs, func(i, k int) bool {
		if hs[i].d.Slot != hs[k].d.Slot {
			return hs[i].d.Slot < hs[k].d.Slot
		}
		return hs[i].d.ID < hs[k].d.ID
	})
	hs = hs[:min(len(hs), n)]
	starts := make([]Start, len(hs))
	for i, h := range hs {
		starts[i] = w.startOf(h)
	}
	return w.begin(hs, starts, n)
}

// releaseWaiters gives back the ticks waiting for a marker, at shutdown.
func (w *Worker) releaseWaiters() {
	var fs []Finish
	w.mu.Lock()
	for _, h := range w.held {
		if h.state == waiting {
			fs = append(fs, Finish{D: h.d, Kind: FinishRelease})
			w.forgetLocked(h)
		}
	}
	w.mu.Unlock()
	if len(fs) > 0 {
		w.finishQuietly(fs)
	}
}

// noHandler dead-letters a tick of a job nobody registered here.
func (w *Worker) noHandler(d *Delivery) {
	err := fmt.Sprintf("%v: %q", ErrNoHandler, d.Job)
	owned := w.finishQuietly([]Finish{{D: d, Kind: FinishDead, Err: err}})
	if len(owned) == 1 && owned[0] {
		w.m.job(unregisteredJob).count(OutcomeDead)
		w.log.Error("tick dead-lettered: no handler registered for its job", "job", d.Job, "tick", d.Tick)
	}
}

// wakeWaiters makes the intake loop re-admit waiting ticks now.
func (w *Worker) wakeWaiters() {
	w.mu.Lock()
	defer w.mu.Unlock()
	has := false
	for _, h := range w.held {
		if h.state == waiting {
			has = true
			break
		}
	}
	if !has {
		return
	}
	w.waitersDue = true
	if w.interrupt != nil {
		w.interrupt()
	}
}

func (w *Worker) listenReleased(ctx context.Context) {
	for range w.store.Released(ctx) {
		w.wakeWaiters()
	}
}
