package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// Pause implements onetick.Controller.
func (b *Backend) Pause(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.control(ctx, job, a, true)
}

// Resume implements onetick.Controller.
func (b *Backend) Resume(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.control(ctx, job, a, false)
}

// control pauses or resumes job in one transaction, serialized with every
// other pause and resume of the schema by an advisory lock.
func (b *Backend) control(ctx context.Context, job string, a onetick.Actor, pause bool) (onetick.JobControl, error) {
	var c onetick.JobControl
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, b.lockKey("controls")); err != nil {
			return err
		}
		iv, err := b.readPauses(ctx, tx, job)
		if err != nil {
			return err
		}
		var at time.Time
		if err := tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&at); err != nil {
			return err
		}
		rule, action := storekit.Resume, storekit.ActionResume
		if pause {
			rule, action = storekit.Pause, storekit.ActionPause
		}
		next, detail := rule(onetick.JobControl{Intervals: iv}, at, a)
		batch := &pgx.Batch{}
		switch p := next.Intervals; {
		case !next.Changed:
		case pause:
			// A pause in the millisecond a resume closed reopens that
			// (empty) interval.
			batch.Queue(b.q(`INSERT INTO {s}.pauses (job, since_ms) VALUES ($1, $2)
				ON CONFLICT (job, since_ms) DO UPDATE SET until_ms = NULL`), job, p[len(p)-1].Since.UnixMilli())
			batch.Queue(b.q(`DELETE FROM {s}.pauses WHERE job = $1 AND since_ms < (SELECT since_ms FROM {s}.pauses
				WHERE job = $1 ORDER BY since_ms DESC OFFSET $2 LIMIT 1)`), job, storekit.MaxIntervals-1)
		default:
			batch.Queue(b.q(`UPDATE {s}.pauses SET until_ms = $2 WHERE job = $1 AND until_ms IS NULL`), job, p[len(p)-1].Until.UnixMilli())
		}
		c.Changed = next.Changed
		if detail != storekit.WasNotPaused {
			batch.Queue(b.q(`INSERT INTO {s}.job_controls (job, paused, who, reason, at) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (job) DO UPDATE SET paused = excluded.paused, who = excluded.who, reason = excluded.reason, at = excluded.at`),
				job, pause, a.Who, a.Reason, at)
			batch.Queue(b.q(`INSERT INTO {s}.control_version (id, version) VALUES (true, 1)
				ON CONFLICT (id) DO UPDATE SET version = control_version.version + 1`))
		}
		batch.Queue(b.q(`INSERT INTO {s}.control_log (action, job, who, reason, at, detail) VALUES ($1, $2, $3, $4, $5, $6)`),
			action, job, a.Who, a.Reason, at, detail)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if iv, err = b.readPauses(ctx, tx, job); err != nil {
			return err
		}
		c.Actor, c.At, c.Intervals = a, at.UTC(), iv
		c.Paused = len(iv) > 0 && iv[len(iv)-1].Until.IsZero()
		return nil
	})
	return c, err
}

// readPauses reads one job's pause intervals; damaged ones are a
// *DamageError.
func (b *Backend) readPauses(ctx context.Context, tx pgx.Tx, job string) ([]onetick.PauseInterval, error) {
	var iv []onetick.PauseInterval
	var dmg *onetick.DamageError
	batch := &pgx.Batch{}
	b.queuePauses(batch, []string{job}, func(_ string, v []onetick.PauseInterval, bad *onetick.DamageError) {
		iv, dmg = v, bad
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	if dmg != nil {
		return nil, dmg
	}
	return iv, nil
}

// Controls implements onetick.Controller. A job whose pause rows are
// damaged is left out and returned as a DamageErrors with the rest. A
// shard's view lists the jobs of its shard only (shard.go); the version
// is the store's.
func (b *Backend) Controls(ctx context.Context) (map[string]onetick.JobControl, int64, error) {
	out := map[string]onetick.JobControl{}
	var bad onetick.DamageErrors
	type info struct {
		who, reason string
		at          time.Time
	}
	infos := map[string]info{}
	var version int64
	batch := &pgx.Batch{}
	b.queuePauses(batch, nil, func(job string, iv []onetick.PauseInterval, d *onetick.DamageError) {
		if !b.mine(job) {
			return
		}
		if d != nil {
			bad = append(bad, d)
			return
		}
		out[job] = onetick.JobControl{Intervals: iv, Paused: iv[len(iv)-1].Until.IsZero()}
	})
	batch.Queue(b.q(`SELECT job, who, reason, at FROM {s}.job_controls`)).Query(func(rows pgx.Rows) error {
		var job string
		var in info
		_, err := pgx.ForEachRow(rows, []any{&job, &in.who, &in.reason, &in.at}, func() error { infos[job] = in; return nil })
		return err
	})
	batch.Queue(b.q(`SELECT coalesce((SELECT version FROM {s}.control_version), 0)`)).QueryRow(func(r pgx.Row) error {
		return r.Scan(&version)
	})
	if err := b.pool.SendBatch(ctx, batch).Close(); err != nil {
		return nil, 0, err
	}
	for job, c := range out {
		if in, ok := infos[job]; ok {
			c.Actor, c.At = onetick.Actor{Who: in.who, Reason: in.reason}, in.at.UTC()
			out[job] = c
		}
	}
	if bad != nil {
		return out, version, bad
	}
	return out, version, nil
}

// ControlsVersion implements onetick.Controller.
func (b *Backend) ControlsVersion(ctx context.Context) (int64, error) {
	var v int64
	err := b.pool.QueryRow(ctx, b.q(`SELECT coalesce((SELECT version FROM {s}.control_version), 0)`)).Scan(&v)
	return v, err
}

// Enqueue implements onetick.Controller: the claim's write without the
// fence, the last-fired rule or pauses, deduplicated by the records.
func (b *Backend) Enqueue(ctx context.Context, ticks []onetick.Tick, a onetick.Actor) (onetick.ClaimResult, error) {
	if len(ticks) == 0 {
		return onetick.ClaimResult{}, nil
	}
	m, err := storekit.Manual(ticks, a)
	if err != nil {
		return onetick.ClaimResult{}, fmt.Errorf("postgres: %w", err)
	}
	m.Relays = onetick.RelayRiver
	var res onetick.ClaimResult
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var now, epoch int64
		var at time.Time
		if err := tx.QueryRow(ctx, b.q(`SELECT clock_timestamp(), {s}.ms(clock_timestamp()),
				coalesce((SELECT epoch FROM {s}.election), 0)`)).Scan(&at, &now, &epoch); err != nil {
			return err
		}
		ids := make([]string, len(ticks))
		for i, t := range ticks {
			ids[i] = t.ID()
		}
		seen := map[string]bool{}
		cr := b.claimRuns()
		batch := &pgx.Batch{}
		batch.Queue(b.q(`SELECT tick FROM {s}.ticks WHERE tick = ANY($1) AND keep_until > $2`), ids, now).Query(func(rows pgx.Rows) error {
			var id string
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error { seen[id] = true; return nil })
			return err
		})
		cr.queueCounts(b, batch, []string{m.Job})
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		res = onetick.ClaimResult{StoreTime: msTime(now), Outcomes: make([]onetick.Outcome, len(ticks))}
		limit := onetick.Slot(now + b.opts.ClockTolerance.Milliseconds())
		var plan []wtick
		for i := range ticks {
			t := &ticks[i]
			slot := m.Slot(*t, onetick.Slot(now))
			d := m.Decide(slot, limit, seen[ids[i]], nil)
			d.Answer(&res, i)
			if d.Append {
				seen[ids[i]] = true
				plan = append(plan, wtick{t: t, id: ids[i], slot: int64(slot), keep: keepFor(int64(slot), now, t.Retention), ooo: true, kind: m.Kind})
				tk := *t
				tk.Slot = slot
				if err := cr.add(ids[i], enqueueNote(tk, ids[i], m, msTime(now))); err != nil {
					return err
				}
			}
		}
		n := 0
		if len(plan) > 0 {
			cr.setTrim([]string{m.Job})
			wr, err := b.writeTicks(ctx, tx, plan, m.Token, epoch, m.Token, now, nil, cr)
			if err != nil {
				return err
			}
			for i := range ticks {
				if res.Outcomes[i] == onetick.Claimed && !wr[ids[i]] {
					res.Outcomes[i] = onetick.Duplicate // a concurrent request wrote it
				}
				if res.Outcomes[i] == onetick.Claimed {
					n++
				}
			}
		}
		r := m.Record(ticks, a, at, n)
		_, err = tx.Exec(ctx, b.q(`INSERT INTO {s}.control_log (action, job, who, reason, at, detail) VALUES ($1, $2, $3, $4, $5, $6)`),
			r.Action, r.Job, r.Who, r.Reason, at, r.Detail)
		return err
	})
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	return res, nil
}

// ControlLog implements onetick.Controller: the newest n records. A
// shard's view returns the newest n of its shard's jobs (shard.go),
// reading the log newest first in pages until it has them.
func (b *Backend) ControlLog(ctx context.Context, n int) ([]onetick.ControlRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	page := n
	if b.root != nil {
		page = min(n*b.shards, 10000) // about n of this shard's, if jobs spread evenly
	}
	out := []onetick.ControlRecord{}
	before := int64(math.MaxInt64)
	for {
		rows, err := b.pool.Query(ctx, b.q(`SELECT id, action, job, who, reason, at, detail FROM {s}.control_log
			WHERE id < $1 ORDER BY id DESC LIMIT $2`), before, page)
		if err != nil {
			return nil, err
		}
		read := 0
		var c onetick.ControlRecord
		_, err = pgx.ForEachRow(rows, []any{&before, &c.Action, &c.Job, &c.Who, &c.Reason, &c.At, &c.Detail}, func() error {
			read++
			if len(out) < n && b.mine(c.Job) {
				c.At = c.At.UTC()
				out = append(out, c)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(out) >= n || read < page {
			return out, nil
		}
	}
}
