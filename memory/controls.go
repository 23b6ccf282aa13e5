package memory

import (
	"context"
	"errors"
	"strconv"

	"github.com/onetick/onetick"
)

// controls is the memory backend's control state.
type controls struct {
	paused  map[string]onetick.JobControl
	log     []onetick.ControlRecord // newest first
	version int64
}

const maxIntervals = 16

func (b *Backend) logControl(r onetick.ControlRecord) {
	b.ctl.log = append([]onetick.ControlRecord{r}, b.ctl.log...)
	if len(b.ctl.log) > 1000 {
		b.ctl.log = b.ctl.log[:1000]
	}
}

// Pause implements onetick.Controller.
func (b *Backend) Pause(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.JobControl{}, err
	}
	defer b.mu.Unlock()
	c := b.ctl.paused[job]
	detail := ""
	if c.Paused {
		detail = "already paused"
	} else {
		c.Intervals = append(append([]onetick.PauseInterval(nil), c.Intervals...), onetick.PauseInterval{Since: now.UTC()})
		if n := len(c.Intervals); n > maxIntervals {
			c.Intervals = c.Intervals[n-maxIntervals:]
		}
	}
	c.Paused, c.Actor, c.At, c.Changed = true, a, now.UTC(), detail == ""
	if b.ctl.paused == nil {
		b.ctl.paused = map[string]onetick.JobControl{}
	}
	b.ctl.paused[job] = c
	b.logControl(onetick.ControlRecord{Action: "pause", Job: job, Who: a.Who, Reason: a.Reason, At: now.UTC(), Detail: detail})
	b.ctl.version++
	return c, nil
}

// Resume implements onetick.Controller.
func (b *Backend) Resume(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.JobControl{}, err
	}
	defer b.mu.Unlock()
	c, ok := b.ctl.paused[job]
	if !ok || !c.Paused {
		b.logControl(onetick.ControlRecord{Action: "resume", Job: job, Who: a.Who, Reason: a.Reason, At: now.UTC(), Detail: "was not paused"})
		c.Changed = false
		return c, nil
	}
	iv := append([]onetick.PauseInterval(nil), c.Intervals...)
	last := &iv[len(iv)-1]
	last.Until = now.UTC()
	if last.Until.Before(last.Since) {
		last.Until = last.Since
	}
	c.Intervals, c.Paused, c.Actor, c.At = iv, false, a, now.UTC()
	b.ctl.paused[job] = c
	c.Changed = true
	b.logControl(onetick.ControlRecord{Action: "resume", Job: job, Who: a.Who, Reason: a.Reason, At: now.UTC()})
	b.ctl.version++
	return c, nil
}

// Controls implements onetick.Controller.
func (b *Backend) Controls(ctx context.Context) (map[string]onetick.JobControl, int64, error) {
	if _, err := b.lock(ctx); err != nil {
		return nil, 0, err
	}
	defer b.mu.Unlock()
	out := make(map[string]onetick.JobControl, len(b.ctl.paused))
	for j, c := range b.ctl.paused {
		if len(c.Intervals) > 0 {
			c.Intervals = append([]onetick.PauseInterval(nil), c.Intervals...)
			out[j] = c
		}
	}
	return out, b.ctl.version, nil
}

// ControlsVersion implements onetick.Controller.
func (b *Backend) ControlsVersion(ctx context.Context) (int64, error) {
	if _, err := b.lock(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	return b.ctl.version, nil
}

// pausedLocked reports whether job's in-order slot s is paused.
func (b *Backend) pausedLocked(job string, s onetick.Slot) bool {
	c, ok := b.ctl.paused[job]
	return ok && c.PausedAt(s)
}

// dropPassedLocked drops the pause intervals of job that no in-order slot
// after last can fall in.
func (b *Backend) dropPassedLocked(job string, last onetick.Slot) {
	c, ok := b.ctl.paused[job]
	if !ok {
		return
	}
	var kept []onetick.PauseInterval
	for _, p := range c.Intervals {
		if p.Until.IsZero() || last < onetick.SlotOf(p.Until)-1 {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(c.Intervals) {
		return
	}
	c.Intervals = kept
	if len(kept) == 0 {
		delete(b.ctl.paused, job)
		return
	}
	b.ctl.paused[job] = c
}

// Enqueue implements onetick.Controller.
func (b *Backend) Enqueue(ctx context.Context, ticks []onetick.Tick, a onetick.Actor) (onetick.ClaimResult, error) {
	if len(ticks) == 0 {
		return onetick.ClaimResult{}, nil
	}
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	defer b.mu.Unlock()
	job, trigger := ticks[0].Job, ticks[0].Key != ""
	for _, t := range ticks {
		if t.Job != job || (t.Key != "") != trigger {
			return onetick.ClaimResult{}, errors.New("memory: one Enqueue takes the triggers or the backfill of one job")
		}
	}
	res := onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: now}
	limit := onetick.SlotOf(now.Add(b.opts.ClockTolerance))
	token := "manual|" + a.Who
	n := 0
	for i, t := range ticks {
		kind := onetick.KindBackfill
		if trigger {
			kind = onetick.KindTrigger
			t.Slot = onetick.SlotOf(now)
		}
		id := t.ID()
		rec, seen := b.ticks[id]
		if seen && !now.Before(rec.expires) {
			delete(b.ticks, id)
			seen = false
		}
		switch {
		case !trigger && t.Slot > limit:
			res.Outcomes[i] = onetick.Early
		case seen:
			res.Outcomes[i] = onetick.Duplicate
		case b.dmg.stream[t.Stream] != nil:
			res.Outcomes[i] = onetick.Broken
			if res.Damaged == nil {
				res.Damaged = map[int]*onetick.DamageError{}
			}
			d := *b.dmg.stream[t.Stream]
			d.Job = job
			res.Damaged[i] = &d
		default:
			b.ticks[id] = tickRecord{token: token, expires: now.Add(t.Retention)}
			b.appendLocked(now, t, id, onetick.TickRecord{Epoch: b.epoch, Replica: token, Kind: kind})
			res.Outcomes[i] = onetick.Claimed
			n++
		}
	}
	action, detail := onetick.KindBackfill, ticks[0].Slot.String()+" .. "+ticks[len(ticks)-1].Slot.String()
	if trigger {
		action, detail = onetick.KindTrigger, ticks[0].ID()
	}
	b.logControl(onetick.ControlRecord{Action: action, Job: job, Who: a.Who, Reason: a.Reason, At: now.UTC(),
		Detail: detail + " (" + strconv.Itoa(n) + " of " + strconv.Itoa(len(ticks)) + " enqueued)"})
	return res, nil
}

// ControlLog implements onetick.Controller.
func (b *Backend) ControlLog(ctx context.Context, n int) ([]onetick.ControlRecord, error) {
	if _, err := b.lock(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	n = min(max(n, 0), len(b.ctl.log))
	return append([]onetick.ControlRecord(nil), b.ctl.log[:n]...), nil
}
