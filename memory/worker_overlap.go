package memory

import (
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// The overlap state of a job: its run marker (storekit.RunMarker in
// markers, a lease of hold) and its waiter places (waiters[job]), each
// belonging to a stream entry by its token. A place counts while its
// entry is pending in the group; a marker while it is unexpired and its
// entry is pending and owned by a live consumer (storekit decides).

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
	stream, id := storekit.SplitToken(tok)
	st := g.streams[stream]
	if st == nil {
		return nil
	}
	return st.pel[id]
}

// PendingAlive implements storekit.WorkTx.
func (t *workTx) PendingAlive(tok string) (bool, error) {
	p := t.g.pendingOf(tok)
	return p != nil && t.g.isAlive(p.consumer, t.now), nil
}

// Places implements storekit.WorkTx.
func (t *workTx) Places(d *worker.Delivery) (worker.OverlapState, error) {
	g, tok := t.g, storekit.Token(d)
	var st worker.OverlapState
	mine := wplace{slot: d.Slot, seq: seqOf(d.ID)}
	for p, w := range g.waiters[d.Job] {
		switch {
		case g.pendingOf(p) == nil:
			delete(g.waiters[d.Job], p)
		case p == tok:
			st.HasPlace = true
		default:
			st.Waiting++
			st.LowerWaiting = st.LowerWaiting || w.less(mine)
		}
	}
	return st, nil
}

// LowerPending implements storekit.WorkTx.
func (t *workTx) LowerPending(d *worker.Delivery) (bool, error) {
	g := t.g
	st := g.streams[d.Stream]
	if st == nil {
		return false, nil
	}
	seq := seqOf(d.ID)
	for id, p := range st.pel {
		if p.d.Job != d.Job || seqOf(id) >= seq || p.d.Slot > d.Slot {
			continue
		}
		if _, waits := g.waiters[d.Job][storekit.Token(&p.d)]; !waits {
			return true, nil
		}
	}
	return false, nil
}

// AddPlace implements storekit.WorkTx.
func (t *workTx) AddPlace(d *worker.Delivery) error {
	g := t.g
	if g.waiters[d.Job] == nil {
		g.waiters[d.Job] = map[string]wplace{}
	}
	g.waiters[d.Job][storekit.Token(d)] = wplace{slot: d.Slot, seq: seqOf(d.ID)}
	return nil
}

// HasPlace implements storekit.WorkTx.
func (t *workTx) HasPlace(d *worker.Delivery) (bool, error) {
	_, ok := t.g.waiters[d.Job][storekit.Token(d)]
	return ok, nil
}

// DropPlace implements storekit.WorkTx.
func (t *workTx) DropPlace(d *worker.Delivery) (bool, error) {
	g, tok := t.g, storekit.Token(d)
	if _, ok := g.waiters[d.Job][tok]; !ok {
		return false, nil
	}
	delete(g.waiters[d.Job], tok)
	if len(g.waiters[d.Job]) == 0 {
		delete(g.waiters, d.Job)
	}
	return true, nil
}

// Marker implements storekit.WorkTx.
func (t *workTx) Marker(name string) (string, bool, error) {
	m, ok := t.g.marker(name, t.now)
	return m.token, ok, nil
}

// SetMarker implements storekit.WorkTx.
func (t *workTx) SetMarker(name, tok string, hold time.Duration) error {
	t.g.markers[name] = wmarker{token: tok, expires: t.now.Add(hold)}
	return nil
}

// DropMarker implements storekit.WorkTx.
func (t *workTx) DropMarker(name, tok string) (bool, error) {
	if m, ok := t.g.marker(name, t.now); !ok || m.token != tok {
		return false, nil
	}
	delete(t.g.markers, name)
	return true, nil
}

// Notify implements storekit.WorkTx: the Released channels are told at
// once, under the lock.
func (t *workTx) Notify() { t.g.released.Notify() }
