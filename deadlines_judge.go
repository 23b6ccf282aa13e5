package onetick

import (
	"context"
	"time"
)

// How the watcher finds a job's state from the ledger. For each of its
// deadlines (start, finish; limit L) the state is the verdict of the
// newest slot that is decided: met (an attempt started, or succeeded,
// within L of the slot) or missed (L passed without). A slot newer than
// now−L is decided only when met; so the newest decided slot is the
// newest record that met L early, or else the newest slot at or before
// now−L (found from the schedule: a slot no leader fired has no record
// and is missed, once the ledger holds an older record of the job; see
// covered). The state depends only on the store and the schedule: a
// check that fails or never runs loses nothing, and a new leader finds
// what the old one found.

// maxPrevSearch bounds how far back the newest slot before an instant is
// looked for (a yearly schedule's).
const maxPrevSearch = 400 * 24 * time.Hour

// maxPrevScan bounds the slots stepped over inside the interval where
// the newest slot was found.
const maxPrevScan = 1 << 17

// judgePages bounds the pages of records one job's judgment reads.
const judgePages = 10

// kindNames are the deadlines in the order of watchedJob.kinds.
var kindNames = [2]string{DeadlineStart, DeadlineFinish}

func kindIndex(kind string) int {
	if kind == DeadlineFinish {
		return 1
	}
	return 0
}

// limits returns the job's deadlines in the order of kinds.
func limits(d Deadline) [2]time.Duration { return [2]time.Duration{d.Start, d.Finish} }

// only returns the deadline of kind k alone.
func only(k int, lim time.Duration) Deadline {
	if k == 0 {
		return Deadline{Start: lim}
	}
	return Deadline{Finish: lim}
}

// judge sets j.kinds from the ledger at now.
func (w *DeadlineWatcher) judge(ctx context.Context, j *watchedJob, now time.Time) error {
	lg := w.ledger(j.Name)
	floor := j.Since // a job defined at run time has no slot before
	lim := limits(j.Deadline)
	var (
		prev     [2]Slot // the newest slot at or before now-L, after floor
		hasPrev  [2]bool
		resolved [2]bool
		rec      [2]Run
		hasRec   [2]bool
		passed   [2]bool // the records read went below prev: it has none
	)
	// Read from the window's start, or from the oldest prev when every
	// deadline has one after it: nothing older decides anything.
	from := now.Add(-max(lim[0], lim[1]) - w.cfg.Lookback)
	oldest, narrow := now, true
	for k, l := range lim {
		if l <= 0 {
			resolved[k] = true
			continue
		}
		t, ok := prevSlot(j.Schedule, now.Add(-l))
		if !ok || !t.After(floor) {
			narrow = false
			continue
		}
		prev[k], hasPrev[k] = SlotOf(t), true
		if t.Before(oldest) {
			oldest = t
		}
	}
	if narrow && oldest.After(from) {
		from = oldest
	}
	if floor.After(from) {
		from = floor
	}
	after, pageLimit := "", DefaultRunLimit // most jobs decide on their newest records
	for page := 0; page < judgePages && !(resolved[0] && resolved[1]); page++ {
		rp, err := lg.Runs(ctx, RunQuery{Job: j.Name, From: SlotOf(from), To: SlotOf(now), After: after, Limit: pageLimit})
		if err != nil {
			return err
		}
		for _, r := range rp.Runs { // newest slot first
			j.sawRecord(r.Slot)
			if r.Kind != "" || !r.Slot.Time().After(floor) {
				continue
			}
			for k, l := range lim {
				switch {
				case resolved[k]:
				case hasPrev[k] && r.Slot == prev[k]:
					rec[k], hasRec[k] = r, true
				case hasPrev[k] && r.Slot < prev[k]:
					passed[k] = true
				default:
					// Newer than prev: decided only if met early (or a
					// slot of an earlier schedule).
					if v := only(k, l).Judge(r.Slot, r, true, now); !v.Pending {
						j.kinds[k] = kindState{known: true, missed: v.Missed(), slot: r.Slot}
						resolved[k] = true
					}
				}
			}
		}
		if rp.Next == "" {
			passed = [2]bool{true, true}
			break
		}
		after, pageLimit = rp.Next, MaxRunLimit
	}
	for k, l := range lim {
		if resolved[k] {
			continue
		}
		if !hasPrev[k] {
			j.kinds[k] = kindState{} // no decided slot yet
			continue
		}
		if !hasRec[k] && (!passed[k] || prev[k] < SlotOf(from)) {
			r, ok, err := lg.Run(ctx, j.Name, TickID(j.Name, prev[k]))
			if err != nil {
				return err
			}
			rec[k], hasRec[k] = r, ok
		}
		if !hasRec[k] {
			// No record: missed, if the ledger covers the slot.
			covered, err := w.covered(ctx, j, prev[k])
			if err != nil {
				return err
			}
			if !covered {
				j.kinds[k] = kindState{}
				continue
			}
		}
		v := only(k, l).Judge(prev[k], rec[k], hasRec[k], now)
		j.kinds[k] = kindState{known: !v.Pending, missed: v.Missed(), slot: prev[k]}
	}
	j.judged = true
	return nil
}

// sawRecord notes that the ledger holds a record of j at slot s.
func (j *watchedJob) sawRecord(s Slot) {
	if !j.hasOldest || s < j.oldest {
		j.oldest, j.hasOldest = s, true
	}
}

// covered reports whether the ledger's story of j covers slot p: it holds
// a record of an older slot. A slot before the job's first record (a job
// new to the ledger, whose earlier slots were never its to run; or one
// whose records retention removed) is not judged.
func (w *DeadlineWatcher) covered(ctx context.Context, j *watchedJob, p Slot) (bool, error) {
	if j.hasOldest && j.oldest < p {
		return true, nil
	}
	rp, err := w.ledger(j.Name).Runs(ctx, RunQuery{Job: j.Name, To: p - 1, Limit: 1})
	if err != nil {
		return false, err
	}
	for _, r := range rp.Runs {
		j.sawRecord(r.Slot)
	}
	return len(rp.Runs) > 0, nil
}

// prevSlot returns the newest slot of s at or before t.
func prevSlot(s Schedule, t time.Time) (time.Time, bool) {
	for step := time.Second; step <= maxPrevSearch; step *= 2 {
		n := s.Next(t.Add(-step))
		if n.IsZero() || n.After(t) {
			continue
		}
		for range maxPrevScan {
			m := s.Next(n)
			if m.IsZero() || m.After(t) {
				break
			}
			n = m
		}
		return n, true
	}
	return time.Time{}, false
}

// mark is the job's state from its deadlines' states: late by the first
// deadline missed (start before finish), else ok with the newest slot
// that met one.
func (j *watchedJob) mark() stateMark {
	for k, ks := range j.kinds {
		if ks.known && ks.missed {
			return stateMark{valid: true, late: true, kind: kindNames[k], slot: ks.slot}
		}
	}
	m := stateMark{valid: true}
	for k, ks := range j.kinds {
		if ks.known && ks.slot >= m.slot {
			m.kind, m.slot = kindNames[k], ks.slot
		}
	}
	return m
}

// note logs and counts a change of j's state.
func (w *DeadlineWatcher) note(j *watchedJob, now time.Time) {
	cur := j.mark()
	if !j.shown.valid || j.shown.late != cur.late {
		lim := limits(j.Deadline)[kindIndex(cur.kind)]
		switch {
		case cur.late && j.takeover:
			w.log.Warn("job is late: it missed a deadline (found by a new leader)", "job", j.Name, "deadline", cur.kind,
				"slot", cur.slot.String(), "due", cur.slot.Time().Add(lim))
		case cur.late:
			w.log.Warn("job is late: it missed a deadline", "job", j.Name, "deadline", cur.kind,
				"slot", cur.slot.String(), "due", cur.slot.Time().Add(lim))
			j.metrics.missed(kindIndex(cur.kind))
		case j.shown.valid:
			w.log.Info("job meets its deadlines again", "job", j.Name, "deadline", j.shown.kind, "slot", cur.slot.String())
		}
		if j.shown.valid || cur.late {
			j.since = now
		}
		j.shown = cur
	}
}

// notify sends the notice of j's state when it differs from the one the
// notifier last accepted.
func (w *DeadlineWatcher) notify(ctx context.Context, j *watchedJob, now time.Time) {
	cur := j.mark()
	if w.cfg.Notifier == nil || j.sent.valid && j.sent.late == cur.late || !j.sent.valid && !cur.late {
		if !j.sent.valid || j.sent.late != cur.late {
			j.sent = cur
		}
		j.takeover = false
		return
	}
	n := DeadlineNotice{Job: j.Name, Status: DeadlineLate, Deadline: cur.kind, Slot: cur.slot, At: now,
		Takeover: j.takeover && !j.sent.valid}
	if !cur.late {
		n.Status, n.Deadline, n.Slot = DeadlineOK, j.sent.kind, j.kinds[kindIndex(j.sent.kind)].slot
	}
	n.Due = n.Slot.Time().Add(limits(j.Deadline)[kindIndex(n.Deadline)])
	if err := w.cfg.Notifier.NotifyDeadline(ctx, n); err != nil {
		if ctx.Err() == nil {
			w.log.Warn("deadline notice not delivered; sending it again at the next check", "job", j.Name,
				"notice", n.ID(), "err", err)
		}
		return
	}
	j.sent = cur
	j.takeover = false
}
