package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// controlLogLen bounds the control log.
const controlLogLen = 1000

// intervals reads job's pause intervals, oldest first.
func (o *op) intervals(job string) ([]onetick.PauseInterval, error) {
	rows, err := o.tx.QueryContext(o.ctx, "SELECT since_ms, until_ms FROM pauses WHERE job = ? ORDER BY since_ms", job)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []onetick.PauseInterval
	for rows.Next() {
		var (
			since int64
			until sql.NullInt64
		)
		if err := rows.Scan(&since, &until); err != nil {
			return nil, err
		}
		p := onetick.PauseInterval{Since: msTime(since)}
		if until.Valid {
			p.Until = msTime(until.Int64)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (o *op) logControl(r onetick.ControlRecord) error {
	if err := o.exec("INSERT INTO control_log (action, job, who, reason, at_ms, detail) VALUES (?, ?, ?, ?, ?, ?)",
		r.Action, r.Job, r.Who, r.Reason, r.At.UnixMilli(), r.Detail); err != nil {
		return err
	}
	return o.exec("DELETE FROM control_log WHERE seq <= (SELECT seq FROM control_log ORDER BY seq DESC LIMIT 1 OFFSET ?)", controlLogLen)
}

func (o *op) bumpControls() error {
	v, err := o.counter("controls")
	if err != nil {
		return err
	}
	return o.setCounter("controls", v+1)
}

func (o *op) setControl(job string, paused bool, a onetick.Actor) error {
	return o.exec(`INSERT INTO controls (job, paused, who, reason, at_ms) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (job) DO UPDATE SET paused = excluded.paused, who = excluded.who, reason = excluded.reason, at_ms = excluded.at_ms`,
		job, paused, a.Who, a.Reason, o.ms)
}

// control reads job's control state.
func (o *op) control(job string) (onetick.JobControl, error) {
	iv, err := o.intervals(job)
	if err != nil {
		return onetick.JobControl{}, err
	}
	c := onetick.JobControl{Intervals: iv, Paused: len(iv) > 0 && iv[len(iv)-1].Until.IsZero()}
	var at int64
	err = o.row("SELECT who, reason, at_ms FROM controls WHERE job = ?", job).Scan(&c.Actor.Who, &c.Actor.Reason, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return onetick.JobControl{}, err
	default:
		c.At = msTime(at)
	}
	return c, nil
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
// in one transaction and logs it as action; the answer is the state as
// stored.
func (b *Backend) control(ctx context.Context, job string, a onetick.Actor, action string,
	rule func(onetick.JobControl, time.Time, onetick.Actor) (onetick.JobControl, string)) (onetick.JobControl, error) {
	var c onetick.JobControl
	err := b.write(ctx, func(o *op) error {
		prev, err := o.control(job)
		if err != nil {
			return err
		}
		next, detail := rule(prev, o.now, a)
		if err := o.logControl(onetick.ControlRecord{Action: action, Job: job, Who: a.Who, Reason: a.Reason, At: o.now, Detail: detail}); err != nil {
			return err
		}
		if detail == storekit.WasNotPaused {
			c = prev
			return nil
		}
		if next.Changed {
			if err := o.storeInterval(job, next.Intervals[len(next.Intervals)-1]); err != nil {
				return err
			}
		}
		if err := o.setControl(job, next.Paused, a); err != nil {
			return err
		}
		if err := o.bumpControls(); err != nil {
			return err
		}
		if c, err = o.control(job); err != nil {
			return err
		}
		c.Changed = next.Changed
		return nil
	})
	return c, err
}

// storeInterval stores job's newest interval p, as a pause opened or a
// resume closed it, and drops the oldest beyond storekit.MaxIntervals.
func (o *op) storeInterval(job string, p onetick.PauseInterval) error {
	since := p.Since.UnixMilli()
	if !p.Until.IsZero() {
		return o.exec("UPDATE pauses SET until_ms = ? WHERE job = ? AND since_ms = ?", p.Until.UnixMilli(), job, since)
	}
	// OR REPLACE: a pause in the same millisecond as the resume before it
	// replaces that empty interval.
	if err := o.exec("INSERT OR REPLACE INTO pauses (job, since_ms, until_ms) VALUES (?, ?, NULL)", job, since); err != nil {
		return err
	}
	return o.exec(`DELETE FROM pauses WHERE job = ? AND since_ms <=
		(SELECT since_ms FROM pauses WHERE job = ? ORDER BY since_ms DESC LIMIT 1 OFFSET ?)`, job, job, storekit.MaxIntervals)
}

// Controls implements onetick.Controller: every job that has pause
// intervals.
func (b *Backend) Controls(ctx context.Context) (map[string]onetick.JobControl, int64, error) {
	out := map[string]onetick.JobControl{}
	var version int64
	err := b.read(ctx, func(o *op) error {
		rows, err := o.tx.QueryContext(o.ctx, "SELECT DISTINCT job FROM pauses")
		if err != nil {
			return err
		}
		var jobs []string
		for rows.Next() {
			var j string
			if err := rows.Scan(&j); err != nil {
				rows.Close()
				return err
			}
			jobs = append(jobs, j)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, j := range jobs {
			c, err := o.control(j)
			if err != nil {
				return err
			}
			out[j] = c
		}
		version, err = o.counter("controls")
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return out, version, nil
}

// ControlsVersion implements onetick.Controller.
func (b *Backend) ControlsVersion(ctx context.Context) (int64, error) {
	var v int64
	err := b.read(ctx, func(o *op) error {
		var err error
		v, err = o.counter("controls")
		return err
	})
	return v, err
}

// Enqueue implements onetick.Controller.
func (b *Backend) Enqueue(ctx context.Context, ticks []onetick.Tick, a onetick.Actor) (onetick.ClaimResult, error) {
	if len(ticks) == 0 {
		return onetick.ClaimResult{}, nil
	}
	m, err := storekit.Manual(ticks, a)
	if err != nil {
		return onetick.ClaimResult{}, fmt.Errorf("sqlite: %w", err)
	}
	var res onetick.ClaimResult
	err = b.write(ctx, func(o *op) error {
		c, err := b.newClaimState(o)
		if err != nil {
			return err
		}
		defer c.close()
		epoch, err := o.counter("epoch")
		if err != nil {
			return err
		}
		res = onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: o.now}
		limit := onetick.Slot(o.ms + b.opts.ClockTolerance.Milliseconds())
		n := 0
		for i, t := range ticks {
			t.Slot = m.Slot(t, onetick.Slot(o.ms))
			id := t.ID()
			_, seen, err := c.record(id)
			if err != nil {
				return err
			}
			d := m.Decide(t.Slot, limit, seen, nil)
			if d.Append {
				if err := c.putRecord(id, d.Record, t.Retention); err != nil {
					return err
				}
				if err := c.appendEntry(t, id, onetick.Epoch(epoch), m.Token, m.Kind); err != nil {
					return err
				}
				if err := o.noteRun(storekit.NewRun(t, id, m.Kind), onetick.RunEvent{What: onetick.EventEnqueued, Replica: m.Token}); err != nil {
					return err
				}
				n++
			}
			d.Answer(&res, i)
		}
		if err := c.finish(); err != nil {
			return err
		}
		if err := o.logControl(m.Record(ticks, a, o.now, n)); err != nil {
			return err
		}
		if err := b.trimRuns(o, m.Job); err != nil {
			return err
		}
		if c.wrote {
			o.after = append(o.after, b.wakeAppended)
		}
		return nil
	})
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	return res, nil
}

// ControlLog implements onetick.Controller.
func (b *Backend) ControlLog(ctx context.Context, n int) ([]onetick.ControlRecord, error) {
	var out []onetick.ControlRecord
	err := b.read(ctx, func(o *op) error {
		rows, err := o.tx.QueryContext(o.ctx, "SELECT action, job, who, reason, at_ms, detail FROM control_log ORDER BY seq DESC LIMIT ?", max(n, 0))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				r  onetick.ControlRecord
				at int64
			)
			if err := rows.Scan(&r.Action, &r.Job, &r.Who, &r.Reason, &at, &r.Detail); err != nil {
				return err
			}
			r.At = msTime(at)
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}
