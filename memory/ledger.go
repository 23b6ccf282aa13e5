package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// The run ledger of the memory backend: per job, its records in page
// order reversed (oldest slot first), so that a claim's new records are
// appended and retention trims from the front. Every write is under the
// backend's lock, in the same critical section as the change it records.

var _ onetick.Ledger = (*Backend)(nil)

// jobRuns is one job's ledger records.
type jobRuns struct {
	byTick map[string]*onetick.Run
	asc    []*onetick.Run // storekit.Before reversed: oldest slot first
}

// runsOf returns job's records, creating them when create is set.
func (b *Backend) runsOf(job string, create bool) *jobRuns {
	jr := b.runs[job]
	if jr == nil && create {
		jr = &jobRuns{byTick: map[string]*onetick.Run{}}
		b.runs[job] = jr
	}
	return jr
}

// noteLocked applies ev, at the store's now, to the record of id: the
// existing one, or fresh when there is none.
func (b *Backend) noteLocked(now time.Time, fresh onetick.Run, ev onetick.RunEvent) {
	if b.opts.Ledger.Off {
		return
	}
	jr := b.runsOf(fresh.Job, true)
	r := jr.byTick[fresh.Tick]
	if r == nil {
		r = &fresh
		jr.insert(r)
	}
	ev.At = now
	storekit.Note(r, ev)
}

// putNewLocked stores r unless its tick has a record.
func (b *Backend) putNewLocked(r onetick.Run) {
	if b.opts.Ledger.Off {
		return
	}
	jr := b.runsOf(r.Job, true)
	if jr.byTick[r.Tick] == nil {
		jr.insert(&r)
	}
}

// insert adds r, which has no record yet, in order.
func (jr *jobRuns) insert(r *onetick.Run) {
	jr.byTick[r.Tick] = r
	if n := len(jr.asc); n == 0 || storekit.Before(*r, *jr.asc[n-1]) {
		jr.asc = append(jr.asc, r) // the newest: a claim's usual record
		return
	}
	i := sort.Search(len(jr.asc), func(i int) bool { return storekit.Before(*jr.asc[i], *r) })
	jr.asc = slices.Insert(jr.asc, i, r)
}

// claimLedgerLocked records decision d of tick t (identity id) of a claim
// by lease l (storekit.ClaimNotes).
func (b *Backend) claimLedgerLocked(now time.Time, l onetick.Lease, t onetick.Tick, id string, d storekit.Decision) {
	n, ok := storekit.ClaimNotes(t, id, d, l, now)
	if !ok {
		return
	}
	b.noteLocked(now, n.Fresh, n.Event)
	for _, r := range n.Skipped {
		b.putNewLocked(r)
	}
}

// trimLocked, by a claim or an enqueue, drops at most storekit.TrimPerClaim
// records of job: the oldest beyond the newest MaxPerJob, then those
// past the age limit.
func (b *Backend) trimLocked(now time.Time, job string) {
	if b.opts.Ledger.Off {
		return
	}
	jr := b.runsOf(job, false)
	if jr == nil {
		return
	}
	ret := b.opts.Ledger
	n := min(max(len(jr.asc)-ret.MaxPerJob, 0), storekit.TrimPerClaim)
	for i := 0; i < n; i++ {
		jr.drop(i)
	}
	// A record can be expired only if its slot is: the expired ones are
	// among the oldest slots.
	cutoff := onetick.SlotOf(now.Add(-ret.MaxAge))
	for i := n; i < len(jr.asc) && n < storekit.TrimPerClaim && jr.asc[i].Slot < cutoff; i++ {
		if storekit.Expired(storekit.Newest(*jr.asc[i]), now, ret) {
			jr.drop(i)
			n++
		}
	}
	// The dropped records are mostly a prefix: cut it off without moving
	// the rest (append reallocates the array as it fills).
	k := 0
	for k < n && jr.asc[k] == nil {
		k++
	}
	jr.asc = jr.asc[k:]
	if k < n {
		jr.asc = slices.DeleteFunc(jr.asc, func(r *onetick.Run) bool { return r == nil })
	}
	if len(jr.asc) == 0 {
		delete(b.runs, job)
	}
}

// drop forgets record i of asc, leaving nil in its place.
func (jr *jobRuns) drop(i int) {
	delete(jr.byTick, jr.asc[i].Tick)
	jr.asc[i] = nil
}

// copyRun returns r with its own events, as a reader may keep it.
func copyRun(r *onetick.Run) onetick.Run {
	c := *r
	c.Events = slices.Clone(r.Events)
	return c
}

// Runs implements onetick.Ledger.
func (b *Backend) Runs(ctx context.Context, q onetick.RunQuery) (onetick.RunPage, error) {
	if b.opts.Ledger.Off {
		return onetick.RunPage{}, onetick.ErrLedgerOff
	}
	var (
		slot   onetick.Slot
		cursor string
	)
	if q.After != "" {
		var err error
		if slot, cursor, err = storekit.ParseCursor(q.After); err != nil {
			return onetick.RunPage{}, fmt.Errorf("memory: runs of %s: %w", q.Job, err)
		}
	}
	if _, err := b.lock(ctx); err != nil {
		return onetick.RunPage{}, err
	}
	defer b.mu.Unlock()
	page := onetick.RunPage{Runs: []onetick.Run{}}
	jr := b.runsOf(q.Job, false)
	if jr == nil {
		return page, nil
	}
	// The records after the cursor, in page order, are a prefix of asc.
	end := len(jr.asc)
	if cursor != "" {
		end = sort.Search(len(jr.asc), func(i int) bool { return !storekit.After(*jr.asc[i], slot, cursor) })
	}
	limit := storekit.Limit(q)
	for i := end - 1; i >= 0; i-- {
		r := jr.asc[i]
		if !storekit.Match(q, *r) {
			continue
		}
		if len(page.Runs) == limit {
			page.Next = storekit.Cursor(page.Runs[limit-1])
			break
		}
		page.Runs = append(page.Runs, copyRun(r))
	}
	return page, nil
}

// Run implements onetick.Ledger.
func (b *Backend) Run(ctx context.Context, job, tick string) (onetick.Run, bool, error) {
	if b.opts.Ledger.Off {
		return onetick.Run{}, false, onetick.ErrLedgerOff
	}
	if _, err := b.lock(ctx); err != nil {
		return onetick.Run{}, false, err
	}
	defer b.mu.Unlock()
	if jr := b.runsOf(job, false); jr != nil {
		if r := jr.byTick[tick]; r != nil {
			return copyRun(r), true, nil
		}
	}
	return onetick.Run{}, false, nil
}
