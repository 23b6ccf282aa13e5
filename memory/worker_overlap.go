package memory

import (
	"strings"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// The overlap state of a job: its run marker ("run:"+job in markers, a
// lease of hold) and its waiter places (waiters[job]), each belonging to a
// stream entry by its token. A place counts while its entry is pending in
// the group; a marker while it is unexpired and its entry is pending and
// owned by a live consumer.

// wplace is a waiter place: the waiting entry's slot and sequence, its
// order among the job's waiters.
type wplace struct {
	slot onetick.Slot
	seq  int64
}

func (a wplace) less(b wplace) bool { return a.slot < b.slot || (a.slot == b.slot && a.seq < b.seq) }

func (g *wgroup) isAlive(consumer string, now time.Time) bool {
	e, ok := g.alive[consumer]
	return ok && now.Before(e)
}

// pendingOf returns the pending entry a token names, or nil.
func (g *wgroup) pendingOf(tok string) *pending {
	stream, id, _ := strings.Cut(tok, "\n")
	st := g.streams[stream]
	if st == nil {
		return nil
	}
	return st.pel[id]
}

// overlapState reads the job's marker and waiter places for d, dropping
// places whose entry is no longer pending.
func (g *wgroup) overlapState(d *worker.Delivery, now time.Time) worker.OverlapState {
	tok := token(d)
	var st worker.OverlapState
	m, held := g.marker("run:"+d.Job, now)
	if !held || m.token == tok {
		st.MarkerFree = true
	} else if p := g.pendingOf(m.token); p == nil || !g.isAlive(p.consumer, now) {
		st.MarkerFree = true
	}
	mine := wplace{slot: d.Slot, seq: seqOf(d.ID)}
	for t, w := range g.waiters[d.Job] {
		switch {
		case g.pendingOf(t) == nil:
			delete(g.waiters[d.Job], t)
		case t == tok:
			st.HasPlace = true
		default:
			st.Waiting++
			st.LowerWaiting = st.LowerWaiting || w.less(mine)
		}
	}
	return st
}

// lowerPending reports whether an entry of d's job with a lower id and a
// slot no higher is pending in d's stream without a waiter place.
func (g *wgroup) lowerPending(d *worker.Delivery) bool {
	st := g.streams[d.Stream]
	if st == nil {
		return false
	}
	seq := seqOf(d.ID)
	for id, p := range st.pel {
		if p.d.Job != d.Job || seqOf(id) >= seq || p.d.Slot > d.Slot {
			continue
		}
		if _, waits := g.waiters[d.Job][token(&p.d)]; !waits {
			return true
		}
	}
	return false
}

// dropWaiter removes d's waiter place, if it has one.
func (g *wgroup) dropWaiter(d *worker.Delivery) bool {
	tok := token(d)
	if _, ok := g.waiters[d.Job][tok]; !ok {
		return false
	}
	delete(g.waiters[d.Job], tok)
	if len(g.waiters[d.Job]) == 0 {
		delete(g.waiters, d.Job)
	}
	return true
}

// release drops d's run marker and waiter place, as the entry is settled
// or given back, and tells the waiters.
func (g *wgroup) release(d *worker.Delivery, now time.Time) {
	released := g.dropWaiter(d)
	key := "run:" + d.Job
	if m, ok := g.marker(key, now); ok && m.token == token(d) {
		delete(g.markers, key)
		released = true
	}
	if released {
		g.notifyReleased()
	}
}
