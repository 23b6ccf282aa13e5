package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// The run ledger of the file store: table runs (migrations/0006), one row
// per tick identity of a job with its record as JSON. Every write is in
// the transaction of the change it records.

var _ onetick.Ledger = (*Backend)(nil)

// The statements of the ledger's writes.
const (
	insertRun = `INSERT INTO runs (job, tick, slot, newest, fate, doc) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (job, tick) DO NOTHING`
	upsertRun = `INSERT INTO runs (job, tick, slot, newest, fate, doc) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (job, tick) DO UPDATE SET slot = excluded.slot, newest = excluded.newest,
			fate = excluded.fate, doc = excluded.doc`
	selectRun = `SELECT doc FROM runs WHERE job = ? AND tick = ?`
	// runsOfJob: a job's count of records and its oldest slot (the
	// front of runs_slot read backwards).
	runsOfJob  = `SELECT n, (SELECT slot FROM runs WHERE job = ?1 ORDER BY slot LIMIT 1) FROM run_counts WHERE job = ?1`
	trimOldest = `DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs WHERE job = ? ORDER BY slot, tick DESC LIMIT ?)`
	trimAged   = `DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs WHERE job = ? AND slot < ? AND newest < ?
		ORDER BY slot LIMIT ?)`
)

// putRun writes record r: inserted when fresh, else replacing the row.
func (o *op) putRun(r onetick.Run, fresh bool) (bool, error) {
	if o.ledgerOff {
		return false, nil
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return false, err
	}
	q := insertRun
	if !fresh {
		q = upsertRun
	}
	st, err := o.stmt(q)
	if err != nil {
		return false, err
	}
	res, err := st.ExecContext(o.ctx, r.Job, r.Tick, int64(r.Slot), int64(storekit.Newest(r)), string(r.Fate), string(doc))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// getRun reads job's record of tick.
func (o *op) getRun(job, tick string) (onetick.Run, bool, error) {
	var doc string
	err := o.row("SELECT doc FROM runs WHERE job = ? AND tick = ?", job, tick).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return onetick.Run{}, false, nil
	}
	if err != nil {
		return onetick.Run{}, false, err
	}
	r, err := decodeRun(job, tick, doc)
	return r, err == nil, err
}

// decodeRun reads a row's record; a doc that does not parse names the row.
func decodeRun(job, tick, doc string) (onetick.Run, error) {
	var r onetick.Run
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return onetick.Run{}, fmt.Errorf("sqlite: runs row (%s, %s): doc: %w", job, tick, err)
	}
	return r, nil
}

// noteRun applies ev, at the store's now, to the record of fresh's
// identity: the stored one, or fresh when there is none.
func (o *op) noteRun(fresh onetick.Run, ev onetick.RunEvent) error {
	if o.ledgerOff {
		return nil
	}
	ev.At = o.now
	r := fresh
	storekit.Note(&r, ev)
	// Most notes of a claim or an enqueue create the record: try that
	// first.
	if ok, err := o.putRun(r, true); ok || err != nil {
		return err
	}
	var doc string
	st, err := o.stmt(selectRun)
	if err != nil {
		return err
	}
	if err := st.QueryRowContext(o.ctx, fresh.Job, fresh.Tick).Scan(&doc); err != nil {
		return err
	}
	// A record that does not parse (hand-edited) holds no claim and no
	// run back: it is replaced.
	r, derr := decodeRun(fresh.Job, fresh.Tick, doc)
	if derr != nil {
		r = fresh
	}
	storekit.Note(&r, ev)
	_, err = o.putRun(r, false)
	return err
}

// claimLedger records decision d of tick t (identity id) of a claim by
// lease l (storekit.ClaimNotes).
func (o *op) claimLedger(l onetick.Lease, t onetick.Tick, id string, d storekit.Decision) error {
	n, ok := storekit.ClaimNotes(t, id, d, l, o.now)
	if !ok {
		return nil
	}
	if err := o.noteRun(n.Fresh, n.Event); err != nil {
		return err
	}
	for _, r := range n.Skipped {
		if _, err := o.putRun(r, true); err != nil {
			return err
		}
	}
	return nil
}

// trimRuns, by a claim or an enqueue, drops at most storekit.TrimPerClaim
// records of job: the oldest beyond the newest MaxPerJob, then those
// past the age limit.
func (b *Backend) trimRuns(o *op, job string) error {
	if o.ledgerOff {
		return nil
	}
	ret := b.opts.Ledger
	st, err := o.stmt(runsOfJob)
	if err != nil {
		return err
	}
	var (
		count  int64
		oldest sql.NullInt64
	)
	err = st.QueryRowContext(o.ctx, job).Scan(&count, &oldest)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var n int64
	if over := count - int64(ret.MaxPerJob); over > 0 {
		n = min(over, storekit.TrimPerClaim)
		st, err := o.stmt(trimOldest)
		if err == nil {
			_, err = st.ExecContext(o.ctx, job, n)
		}
		if err != nil || n == storekit.TrimPerClaim {
			return err
		}
	}
	// A record can be expired only if its slot is: nothing to do while
	// the oldest slot is recent.
	cutoff := int64(onetick.SlotOf(o.now.Add(-ret.MaxAge)))
	if !oldest.Valid || oldest.Int64 >= cutoff {
		return nil
	}
	st, err = o.stmt(trimAged)
	if err == nil {
		_, err = st.ExecContext(o.ctx, job, cutoff, cutoff, storekit.TrimPerClaim-n)
	}
	return err
}

// Runs implements onetick.Ledger. It reads a snapshot and takes no write
// lock.
func (b *Backend) Runs(ctx context.Context, q onetick.RunQuery) (onetick.RunPage, error) {
	if b.opts.Ledger.Off {
		return onetick.RunPage{}, onetick.ErrLedgerOff
	}
	var (
		where strings.Builder
		args  = []any{q.Job}
	)
	where.WriteString("job = ?")
	if q.After != "" {
		slot, tick, err := storekit.ParseCursor(q.After)
		if err != nil {
			return onetick.RunPage{}, fmt.Errorf("sqlite: runs of %s: %w", q.Job, err)
		}
		where.WriteString(" AND slot <= ? AND NOT (slot = ? AND tick <= ?)")
		args = append(args, int64(slot), int64(slot), tick)
	}
	if q.From != 0 {
		where.WriteString(" AND newest >= ?")
		args = append(args, int64(q.From))
	}
	if q.To != 0 {
		where.WriteString(" AND slot <= ?")
		args = append(args, int64(q.To))
	}
	if q.Fate != "" {
		where.WriteString(" AND fate = ?")
		args = append(args, string(q.Fate))
	}
	limit := storekit.Limit(q)
	args = append(args, limit+1)
	page := onetick.RunPage{Runs: []onetick.Run{}}
	err := b.read(ctx, func(o *op) error {
		rows, err := o.tx.QueryContext(o.ctx, "SELECT tick, doc FROM runs WHERE "+where.String()+
			" ORDER BY slot DESC, tick LIMIT ?", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tick, doc string
			if err := rows.Scan(&tick, &doc); err != nil {
				return err
			}
			if len(page.Runs) == limit {
				page.Next = storekit.Cursor(page.Runs[limit-1])
				break
			}
			r, err := decodeRun(q.Job, tick, doc)
			if err != nil {
				return err
			}
			page.Runs = append(page.Runs, r)
		}
		return rows.Err()
	})
	if err != nil {
		return onetick.RunPage{}, err
	}
	return page, nil
}

// Run implements onetick.Ledger.
func (b *Backend) Run(ctx context.Context, job, tick string) (onetick.Run, bool, error) {
	if b.opts.Ledger.Off {
		return onetick.Run{}, false, onetick.ErrLedgerOff
	}
	var (
		r  onetick.Run
		ok bool
	)
	err := b.read(ctx, func(o *op) (err error) {
		r, ok, err = o.getRun(job, tick)
		return err
	})
	return r, ok, err
}
