package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// claimState caches, for one claim, what it read and moved.
type claimState struct {
	o      *op
	last   map[string]onetick.Slot // job -> last-fired slot (read, then moved)
	hasOld map[string]bool
	moved  map[string]bool
	pauses map[string][]onetick.PauseInterval
	maxLen map[string]int64 // stream -> MaxLen of its newest tick in the batch
	jobs   map[string]bool
	getRec *sql.Stmt
	putRec *sql.Stmt
	putEnt *sql.Stmt
	wrote  bool
}

func (b *Backend) newClaimState(o *op) (*claimState, error) {
	c := &claimState{o: o, last: map[string]onetick.Slot{}, hasOld: map[string]bool{}, moved: map[string]bool{},
		pauses: map[string][]onetick.PauseInterval{}, maxLen: map[string]int64{}, jobs: map[string]bool{}}
	var err error
	if c.getRec, err = o.tx.PrepareContext(o.ctx, "SELECT token FROM tick_records WHERE tick = ? AND expires_ms > ?"); err != nil {
		return nil, err
	}
	if c.putRec, err = o.tx.PrepareContext(o.ctx, `INSERT INTO tick_records (tick, token, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (tick) DO UPDATE SET token = excluded.token, expires_ms = excluded.expires_ms`); err != nil {
		return nil, err
	}
	if c.putEnt, err = o.tx.PrepareContext(o.ctx, `INSERT INTO entries (stream, ms, job, slot, tick, epoch, replica, payload, kind, attempt, grp, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *claimState) close() {
	for _, s := range []*sql.Stmt{c.getRec, c.putRec, c.putEnt} {
		if s != nil {
			_ = s.Close()
		}
	}
}

// record returns the token of tick id's unexpired record.
func (c *claimState) record(id string) (string, bool, error) {
	var tok string
	err := c.getRec.QueryRowContext(c.o.ctx, id, c.o.ms).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return tok, err == nil, err
}

func (c *claimState) putRecord(id, token string, retention time.Duration) error {
	_, err := c.putRec.ExecContext(c.o.ctx, id, token, c.o.ms+retention.Milliseconds())
	return err
}

// lastOf returns job's last-fired slot, reading it once per claim.
func (c *claimState) lastOf(job string) (onetick.Slot, bool, error) {
	if s, ok := c.last[job]; ok {
		return s, true, nil
	}
	if _, read := c.hasOld[job]; read {
		return 0, false, nil
	}
	var s onetick.Slot
	err := c.o.row("SELECT slot FROM last_fired WHERE job = ?", job).Scan(&s)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		c.hasOld[job] = false
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	c.hasOld[job] = true
	c.last[job] = s
	return s, true, nil
}

func (c *claimState) move(job string, s onetick.Slot) {
	c.last[job] = s
	c.moved[job] = true
}

// paused reports whether job's in-order slot s falls in a pause interval.
func (c *claimState) paused(job string, s onetick.Slot) (bool, error) {
	iv, ok := c.pauses[job]
	if !ok {
		var err error
		if iv, err = c.o.intervals(job); err != nil {
			return false, err
		}
		c.pauses[job] = iv
	}
	return onetick.JobControl{Intervals: iv}.PausedAt(s), nil
}

// appendEntry appends tick t (identity id) to its stream.
func (c *claimState) appendEntry(t onetick.Tick, id string, epoch onetick.Epoch, replica, kind string) error {
	if _, err := c.putEnt.ExecContext(c.o.ctx, t.Stream, c.o.ms, t.Job, int64(t.Slot), id, int64(epoch), replica, t.Payload,
		kind, 1, "", t.Version); err != nil {
		return err
	}
	c.wrote = true
	if t.MaxLen > 0 {
		c.maxLen[t.Stream] = t.MaxLen
	} else {
		delete(c.maxLen, t.Stream)
	}
	return nil
}

// finish writes the moved last-fired slots, drops the pause intervals
// that the batch's jobs have passed and trims the streams.
func (c *claimState) finish() error {
	for job := range c.moved {
		if err := c.o.exec(`INSERT INTO last_fired (job, slot) VALUES (?, ?)
			ON CONFLICT (job) DO UPDATE SET slot = excluded.slot`, job, int64(c.last[job])); err != nil {
			return err
		}
	}
	for job := range c.jobs {
		// No in-order slot after the last-fired one can fall in an
		// interval that ends at or before it + 1.
		if err := c.o.exec(`DELETE FROM pauses WHERE job = ? AND until_ms IS NOT NULL
			AND (SELECT slot FROM last_fired WHERE job = ?) >= until_ms - 1`, job, job); err != nil {
			return err
		}
	}
	for stream, n := range c.maxLen {
		if err := c.o.exec(`DELETE FROM entries WHERE stream = ? AND seq <=
			(SELECT seq FROM entries WHERE stream = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`, stream, stream, n); err != nil {
			return err
		}
	}
	return nil
}

// Claim implements onetick.Claimer. It is one immediate transaction: the
// lease check, every tick's checks and every write commit together or not
// at all, and no other process can write in between. The schema's types
// and constraints leave no state a tick could find damaged, so no outcome
// is Broken.
func (b *Backend) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	var res onetick.ClaimResult
	fenced := false
	err := b.write(ctx, func(o *op) error {
		ok, err := o.holds(l)
		if err != nil {
			return err
		}
		if !ok {
			fenced = true
			return o.exec("UPDATE terms SET reason = 'fenced' WHERE epoch = ? AND reason NOT IN ('released', 'fenced')", l.Epoch)
		}
		c, err := b.newClaimState(o)
		if err != nil {
			return err
		}
		defer c.close()
		token := l.Token()
		limit := onetick.Slot(o.ms + b.opts.ClockTolerance.Milliseconds())
		res = onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: o.now}
		for i, t := range ticks {
			id := t.ID()
			rec, seen, err := c.record(id)
			if err != nil {
				return err
			}
			v := storekit.View{Seen: seen, Record: rec, Paused: c.paused}
			if !t.OutOfOrder {
				if v.Last, v.HasLast, err = c.lastOf(t.Job); err != nil {
					return err
				}
			}
			d, err := storekit.Decide(t, token, limit, v)
			if err != nil {
				return err
			}
			if d.Record != "" {
				if err := c.putRecord(id, d.Record, t.Retention); err != nil {
					return err
				}
			}
			if d.Move {
				c.move(t.Job, t.Slot)
			}
			if d.Append {
				if err := c.appendEntry(t, id, l.Epoch, l.Holder, ""); err != nil {
					return err
				}
			}
			if err := o.claimLedger(l, t, id, d); err != nil {
				return err
			}
			d.Answer(&res, i)
		}
		for _, t := range ticks {
			c.jobs[t.Job] = true
		}
		if err := c.finish(); err != nil {
			return err
		}
		for _, job := range storekit.Jobs(ticks) {
			if err := b.trimRuns(o, job); err != nil {
				return err
			}
		}
		if c.wrote {
			o.after = append(o.after, b.wakeAppended)
		}
		return b.sweep(o)
	})
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	if fenced {
		return onetick.ClaimResult{}, onetick.ErrFenced
	}
	return res, nil
}

// sweep deletes expired tick records, at most once a minute per process;
// every reader ignores them anyway.
func (b *Backend) sweep(o *op) error {
	b.mu.Lock()
	due := !o.now.Before(b.sweepAt)
	if due {
		b.sweepAt = o.now.Add(time.Minute)
	}
	b.mu.Unlock()
	if !due {
		return nil
	}
	return o.exec("DELETE FROM tick_records WHERE expires_ms <= ?", o.ms)
}

// wakeAppended wakes this process's fetches waiting for new entries.
func (b *Backend) wakeAppended() {
	b.appended.Ring()
}

// LastFired implements onetick.Claimer.
func (b *Backend) LastFired(ctx context.Context, jobs []string) (map[string]onetick.Slot, error) {
	out := make(map[string]onetick.Slot, len(jobs))
	err := b.read(ctx, func(o *op) error {
		st, err := o.tx.PrepareContext(o.ctx, "SELECT slot FROM last_fired WHERE job = ?")
		if err != nil {
			return err
		}
		defer st.Close()
		for _, j := range jobs {
			var s int64
			err := st.QueryRowContext(o.ctx, j).Scan(&s)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			out[j] = onetick.Slot(s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Stream returns the entries of a stream, oldest first.
func (b *Backend) Stream(ctx context.Context, key string) ([]onetick.TickRecord, error) {
	var out []onetick.TickRecord
	err := b.read(ctx, func(o *op) error {
		rows, err := o.tx.QueryContext(o.ctx, `SELECT seq, ms, job, slot, tick, epoch, replica, payload, kind, version
			FROM entries WHERE stream = ? ORDER BY seq`, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				r       onetick.TickRecord
				seq, ms int64
			)
			if err := rows.Scan(&seq, &ms, &r.Job, &r.Slot, &r.Tick, &r.Epoch, &r.Replica, &r.Payload, &r.Kind, &r.Version); err != nil {
				return err
			}
			r.ID = entryID(ms, seq)
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}
