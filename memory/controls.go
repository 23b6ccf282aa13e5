package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// controls is the memory backend's control state.
type controls struct {
	paused  map[string]onetick.JobControl
	log     []onetick.ControlRecord // newest first
	version int64
}

func (b *Backend) logControl(r onetick.ControlRecord) {
	b.ctl.log = append([]onetick.ControlRecord{r}, b.ctl.log...)
	if len(b.ctl.log) > 1000 {
		b.ctl.log = b.ctl.log[:1000]
	}
}

// Pause implements onetick.Controller.
func (b *Backend) Pause(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.control(ctx, job, a, storekit.ActionPause, storekit.Pause)
}

// Resume implements onetick.Controller.
func (b *Backend) Resume(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.control(ctx, job, a, storekit.ActionResume, storekit.Resume)
}

// control applies rule (storekit.Pause or Resume) to job's control state
// and logs it as action; every pause, and a resume of a paused job, bumps
// the controls' version. The state kept has Changed false: Changed
// belongs to the answer.
func (b *Backend) control(ctx context.Context, job string, a onetick.Actor, action string,
	rule func(onetick.JobControl, time.Time, onetick.Actor) (onetick.JobControl, string)) (onetick.JobControl, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.JobControl{}, err
	}
	defer b.mu.Unlock()
	c, detail := rule(b.ctl.paused[job], now, a)
	b.logControl(onetick.ControlRecord{Action: action, Job: job, Who: a.Who, Reason: a.Reason, At: now.UTC(), Detail: detail})
	if detail == storekit.WasNotPaused {
		return c, nil
	}
	if b.ctl.paused == nil {
		b.ctl.paused = map[string]onetick.JobControl{}
	}
	stored := c
	stored.Changed = false
	b.ctl.paused[job] = stored
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
func (b *Backend) pausedLocked(job string, s onetick.Slot) (bool, error) {
	c, ok := b.ctl.paused[job]
	return ok && c.PausedAt(s), nil
}

// dropPassedLocked drops the pause intervals of job that no in-order slot
// after last can fall in.
func (b *Backend) dropPassedLocked(job string, last onetick.Slot) {
	c, ok := b.ctl.paused[job]
	if !ok {
		return
	}
	kept := storekit.DropPassed(c.Intervals, last)
	switch {
	case len(kept) == len(c.Intervals):
	case len(kept) == 0:
		delete(b.ctl.paused, job)
	default:
		c.Intervals = kept
		b.ctl.paused[job] = c
	}
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
	m, err := storekit.Manual(ticks, a)
	if err != nil {
		return onetick.ClaimResult{}, fmt.Errorf("memory: %w", err)
	}
	res := onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: now}
	limit := onetick.SlotOf(now.Add(b.opts.ClockTolerance))
	n := 0
	for i, t := range ticks {
		t.Slot = m.Slot(t, onetick.SlotOf(now))
		id := t.ID()
		_, seen := b.recordLocked(now, id)
		d := m.Decide(t.Slot, limit, seen, b.dmg.stream[t.Stream])
		if d.Append {
			b.ticks[id] = tickRecord{token: d.Record, expires: now.Add(t.Retention)}
			b.appendLocked(now, t, id, onetick.TickRecord{Epoch: b.epoch, Replica: m.Token, Kind: m.Kind})
			b.noteLocked(now, storekit.NewRun(t, id, m.Kind), onetick.RunEvent{What: onetick.EventEnqueued, Replica: m.Token})
			n++
		}
		d.Answer(&res, i)
	}
	b.logControl(m.Record(ticks, a, now, n))
	b.trimLocked(now, m.Job)
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
