package chaos

import (
	"fmt"
	"sort"
	"time"
)

const docTrustFailover = "README guarantees, Redis failover: two replicas can both believe they lead across a failover; the stale one's claims are fenced (Bounds.AsyncLoss)"

// term is an interval during which one replica trusted its lease.
type term struct {
	replica     string
	epoch       int64
	from, until time.Time
	start, stop int // the events that opened and closed it
}

// checkLeases finds epochs that went backwards and two replicas trusting
// the lease at once.
func (h *history) checkLeases() {
	t := &h.rep.Totals
	open := map[string]*term{}
	var terms []term
	closeAt := func(r string, at time.Time, i int) {
		tr := open[r]
		if tr == nil {
			return
		}
		if !tr.until.IsZero() && tr.until.Before(at) {
			at = tr.until
		}
		tr.until, tr.stop = at, i
		terms = append(terms, *tr)
		delete(open, r)
	}
	var maxEpoch int64
	maxAt := -1
	for i, e := range h.ev {
		switch {
		case e.Kind == KindFault && (e.Fault == "kill9" || e.Fault == "worker-kill") && e.Phase != "end":
			closeAt(e.Target, e.T, i)
		case e.Kind != KindLeader:
		case e.Phase == "acquired":
			t.Acquired++
			closeAt(e.Replica, e.T, i)
			open[e.Replica] = &term{replica: e.Replica, epoch: e.Epoch, from: e.T, until: e.TrustUntil, start: i, stop: i}
			if e.Epoch == 0 {
				break // no epoch given: nothing to compare
			}
			if maxAt >= 0 && (e.Epoch < maxEpoch || e.Epoch == maxEpoch && e.Replica != h.ev[maxAt].Replica) {
				prev := h.ev[maxAt]
				h.violation(Finding{Kind: VEpochBackwards, Replica: e.Replica, T: e.T, Events: []int{maxAt, i},
					Desc: fmt.Sprintf("%s acquired the lease with epoch %d at %s, after %s had acquired epoch %d at %s",
						e.Replica, e.Epoch, clock(e.T), prev.Replica, prev.Epoch, clock(prev.T))})
			}
			if e.Epoch > maxEpoch || maxAt < 0 {
				maxEpoch, maxAt = e.Epoch, i
			}
			t.MaxEpoch = maxEpoch
		case e.Phase == "renewed":
			tr := open[e.Replica]
			if tr != nil && !tr.until.IsZero() && e.T.After(tr.until) {
				// Its trust had lapsed: that term ended, a new one starts.
				closeAt(e.Replica, tr.until, tr.stop)
				tr = nil
			}
			if tr == nil {
				open[e.Replica] = &term{replica: e.Replica, epoch: e.Epoch, from: e.T, until: e.TrustUntil, start: i, stop: i}
				break
			}
			tr.until, tr.stop = e.TrustUntil, i
		case e.Phase == "lost":
			closeAt(e.Replica, e.T, i)
		}
	}
	last := h.end
	if !h.hasEnd && len(h.ev) > 0 {
		last = h.ev[len(h.ev)-1].T
	}
	for r := range open {
		closeAt(r, last, open[r].stop)
	}
	h.overlaps(terms)
}

// overlaps reports terms of two replicas that overlap by more than
// Bounds.MaxSkew.
func (h *history) overlaps(terms []term) {
	sort.SliceStable(terms, func(a, b int) bool { return terms[a].from.Before(terms[b].from) })
	slack := h.bounds.MaxSkew
	for b := range terms {
		for a := 0; a < b; a++ {
			x, y := terms[a], terms[b]
			if x.replica == y.replica {
				continue
			}
			from, until := y.from, x.until
			if y.until.Before(until) {
				until = y.until
			}
			if until.Sub(from) <= slack {
				continue
			}
			f := Finding{Kind: VTrustOverlap, Replica: y.replica, T: from, Events: []int{x.start, x.stop, y.start, y.stop},
				Desc: fmt.Sprintf("%s (epoch %d, trusting %s-%s) and %s (epoch %d, trusting %s-%s) trusted the lease at once for %v (slack %v)",
					x.replica, x.epoch, clock(x.from), clock(x.until), y.replica, y.epoch, clock(y.from), clock(y.until), until.Sub(from), slack)}
			if h.bounds.AsyncLoss {
				if fi := h.faultIn(failoverFaults, nil, from, until); fi >= 0 {
					f.Documented = docTrustFailover
					f.Desc += fmt.Sprintf(", across %s at %s", h.faults[fi].name, clock(h.faults[fi].start))
					f.Events = append(f.Events, h.faults[fi].i)
					h.documented(f)
					continue
				}
			}
			h.violation(f)
		}
	}
}
