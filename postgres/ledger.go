package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// The run ledger on PostgreSQL: table runs (migrations/005), one row per
// tick identity of a job with its record (onetick.Run) as JSON, and
// run_counts, each job's number of records. Every write is in the
// transaction of the change it records: a claim's and an enqueue's
// records in the statement that writes their tick records (ledger_claim.go),
// a worker's steps and a replay through a ledgerTx. What an event does to
// a record is storekit.Note's, in Go: a record that exists is read FOR
// UPDATE, noted and written back.

var _ onetick.Ledger = (*Backend)(nil)

// runKey is a record's identity.
type runKey struct{ job, tick string }

// runRec is one record a ledgerTx changes.
type runRec struct {
	run    onetick.Run
	events []onetick.RunEvent // noted in this transaction, in order
	fresh  onetick.Run        // the record to start from when there is none
	stored bool               // read from the table (locked): written back by UPDATE
	bad    bool               // stored, but its doc does not parse: replaced
	noted  bool
}

// ledgerTx applies ledger events to records inside one transaction:
// queueRead locks and reads the records (FOR UPDATE, in key order), note
// applies an event in Go (storekit.Note) at the store's now, queueWrite
// writes the changed records back (UPDATE the ones read, INSERT the
// others), and settle notes again the records that another transaction
// created meanwhile. A nil *ledgerTx (the ledger is off) does nothing.
type ledgerTx struct {
	b        *Backend
	now      time.Time
	recs     map[runKey]*runRec
	order    []runKey
	inserted map[runKey]bool
}

// ledgerTx returns a ledgerTx judged by the store's clock now, nil when
// the ledger is off.
func (b *Backend) ledgerTx(now time.Time) *ledgerTx {
	if b.opts.Ledger.Off {
		return nil
	}
	return &ledgerTx{b: b, now: now.UTC(), recs: map[runKey]*runRec{}}
}

// at sets the store's now of lt's events.
func (lt *ledgerTx) at(now time.Time) {
	if lt != nil {
		lt.now = now.UTC()
	}
}

// readOwnedRunsSQL locks and reads the records of the ticks ($3) of
// entries ($2) pending for consumer $4 of group $1: those a worker's
// Begin or Finish may note.
const readOwnedRunsSQL = `SELECT r.job, r.tick, r.doc::text FROM {s}.runs r
	WHERE (r.job, r.tick) IN (SELECT p.job, u.tick FROM unnest($2::bigint[], $3::text[]) AS u(id, tick)
		JOIN {s}.pending p ON p.grp = $1 AND p.entry_id = u.id AND p.consumer = $4)
	ORDER BY r.job, r.tick FOR UPDATE OF r`

// workEvent is the ledger event what of d's attempt by consumer.
func workEvent(what, consumer string, d *worker.Delivery, detail string) onetick.RunEvent {
	return onetick.RunEvent{What: what, Worker: consumer, Attempt: d.Attempt, Detail: detail}
}

const readRunsSQL = `SELECT r.job, r.tick, r.doc::text FROM {s}.runs r
	WHERE (r.job, r.tick) IN (SELECT * FROM unnest($1::text[], $2::text[]))
	ORDER BY r.job, r.tick FOR UPDATE OF r`

// queueReadKeys queues the locking read of the records of job[i], tick[i].
func (lt *ledgerTx) queueReadKeys(batch *pgx.Batch, jobs, ticks []string) {
	if lt == nil || len(jobs) == 0 {
		return
	}
	lt.queueRead(batch, readRunsSQL, jobs, ticks)
}

// queueRead queues query, which returns job, tick and doc of records it
// locks, and keeps what it returns.
func (lt *ledgerTx) queueRead(batch *pgx.Batch, query string, args ...any) {
	if lt == nil {
		return
	}
	batch.Queue(lt.b.q(query), args...).Query(func(rows pgx.Rows) error {
		var job, tick, doc string
		_, err := pgx.ForEachRow(rows, []any{&job, &tick, &doc}, func() error {
			k := runKey{job, tick}
			rec := lt.recs[k]
			if rec == nil {
				rec = &runRec{}
				lt.recs[k] = rec
				lt.order = append(lt.order, k)
			}
			rec.stored = true
			// A record that does not parse (edited by hand) holds no
			// worker back: its next event replaces it.
			r, err := decodeRun(job, tick, doc)
			rec.run, rec.bad = r, err != nil
			return nil
		})
		return err
	})
}

// note applies ev (at the store's now) to the record of fresh's identity:
// the one read, or fresh when there is none.
func (lt *ledgerTx) note(fresh onetick.Run, ev onetick.RunEvent) {
	if lt == nil {
		return
	}
	k := runKey{fresh.Job, fresh.Tick}
	rec := lt.recs[k]
	if rec == nil {
		rec = &runRec{}
		lt.recs[k] = rec
		lt.order = append(lt.order, k)
	}
	if !rec.noted {
		rec.fresh = fresh
		if !rec.stored || rec.bad {
			rec.run = fresh
		}
	}
	rec.noted = true
	ev.At = lt.now
	storekit.Note(&rec.run, ev)
	rec.events = append(rec.events, ev)
}

// runArrays are records as the array arguments of a write.
type runArrays struct {
	jobs, ticks, fates, docs []string
	slots, newest            []int64
}

func (a *runArrays) add(r onetick.Run) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	a.jobs, a.ticks, a.fates, a.docs = append(a.jobs, r.Job), append(a.ticks, r.Tick), append(a.fates, string(r.Fate)), append(a.docs, string(doc))
	a.slots, a.newest = append(a.slots, int64(r.Slot)), append(a.newest, int64(storekit.Newest(r)))
	return nil
}

const (
	updateRunsSQL = `UPDATE {s}.runs r SET slot = u.slot, newest = u.newest, fate = u.fate, doc = u.doc::json
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[]) AS u(job, tick, slot, newest, fate, doc)
		WHERE r.job = u.job AND r.tick = u.tick`
	insertRunsSQL = `INSERT INTO {s}.runs (job, tick, slot, newest, fate, doc)
		SELECT job, tick, slot, newest, fate, doc::json
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[]) AS u(job, tick, slot, newest, fate, doc)
		ORDER BY job, tick
		ON CONFLICT (job, tick) DO NOTHING RETURNING job, tick`
)

// queueWrite queues the writes of the records noted.
func (lt *ledgerTx) queueWrite(batch *pgx.Batch) error {
	if lt == nil {
		return nil
	}
	var upd, ins runArrays
	for _, k := range lt.order {
		rec := lt.recs[k]
		if !rec.noted {
			continue
		}
		a := &ins
		if rec.stored {
			a = &upd
		}
		if err := a.add(rec.run); err != nil {
			return err
		}
	}
	if len(upd.jobs) > 0 {
		batch.Queue(lt.b.q(updateRunsSQL), upd.jobs, upd.ticks, upd.slots, upd.newest, upd.fates, upd.docs)
	}
	if len(ins.jobs) > 0 {
		lt.inserted = map[runKey]bool{}
		batch.Queue(lt.b.q(insertRunsSQL), ins.jobs, ins.ticks, ins.slots, ins.newest, ins.fates, ins.docs).
			Query(func(rows pgx.Rows) error {
				var job, tick string
				_, err := pgx.ForEachRow(rows, []any{&job, &tick}, func() error { lt.inserted[runKey{job, tick}] = true; return nil })
				return err
			})
	}
	return nil
}

// settle, after queueWrite's batch ran, notes again the records that
// another transaction created between the read and the insert (an insert
// that found one): read FOR UPDATE, the same events applied, written
// back. It costs round trips only when that happened.
func (lt *ledgerTx) settle(ctx context.Context, tx pgx.Tx) error {
	if lt == nil {
		return nil
	}
	again := &ledgerTx{b: lt.b, now: lt.now, recs: map[runKey]*runRec{}}
	var jobs, ticks []string
	for _, k := range lt.order {
		if rec := lt.recs[k]; rec.noted && !rec.stored && !lt.inserted[k] {
			jobs, ticks = append(jobs, k.job), append(ticks, k.tick)
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	again.queueReadKeys(batch, jobs, ticks)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	for _, k := range lt.order {
		rec := lt.recs[k]
		if !rec.noted || rec.stored || lt.inserted[k] {
			continue
		}
		for _, ev := range rec.events {
			again.note(rec.fresh, ev)
		}
	}
	batch = &pgx.Batch{}
	if err := again.queueWrite(batch); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	return again.settle(ctx, tx) // a record deleted meanwhile is inserted
}

// apply reads, notes and writes in round trips of its own: for the
// writes that are not on a hot path (a replay) or are rare (a claim's
// record that existed).
func (lt *ledgerTx) apply(ctx context.Context, tx pgx.Tx, fresh []onetick.Run, evs []onetick.RunEvent) error {
	if lt == nil || len(fresh) == 0 {
		return nil
	}
	jobs, ticks := make([]string, len(fresh)), make([]string, len(fresh))
	for i, r := range fresh {
		jobs[i], ticks[i] = r.Job, r.Tick
	}
	batch := &pgx.Batch{}
	lt.queueReadKeys(batch, jobs, ticks)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	for i := range fresh {
		lt.note(fresh[i], evs[i])
	}
	batch = &pgx.Batch{}
	if err := lt.queueWrite(batch); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	return lt.settle(ctx, tx)
}

// decodeRun reads a row's record; a doc that does not parse names the row.
func decodeRun(job, tick, doc string) (onetick.Run, error) {
	var r onetick.Run
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return onetick.Run{}, fmt.Errorf("postgres: runs row (%s, %s): doc: %w", job, tick, err)
	}
	return r, nil
}

// Runs implements onetick.Ledger: one index range of the job's records
// (runs_slot), newest slot first.
func (b *Backend) Runs(ctx context.Context, q onetick.RunQuery) (onetick.RunPage, error) {
	if b.opts.Ledger.Off {
		return onetick.RunPage{}, onetick.ErrLedgerOff
	}
	var (
		where strings.Builder
		args  = []any{q.Job}
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where.WriteString("job = $1")
	if q.After != "" {
		slot, tick, err := storekit.ParseCursor(q.After)
		if err != nil {
			return onetick.RunPage{}, fmt.Errorf("postgres: runs of %s: %w", q.Job, err)
		}
		s := arg(int64(slot))
		where.WriteString(" AND slot <= " + s + " AND (slot < " + s + " OR tick > " + arg(tick) + ")")
	}
	if q.From != 0 {
		where.WriteString(" AND newest >= " + arg(int64(q.From)))
	}
	if q.To != 0 {
		where.WriteString(" AND slot <= " + arg(int64(q.To)))
	}
	if q.Fate != "" {
		where.WriteString(" AND fate = " + arg(string(q.Fate)))
	}
	limit := storekit.Limit(q)
	lim := arg(limit + 1)
	rows, err := b.pool.Query(ctx, b.q(`SELECT tick, doc::text FROM {s}.runs WHERE `+where.String()+
		` ORDER BY slot DESC, tick LIMIT `+lim), args...)
	if err != nil {
		return onetick.RunPage{}, err
	}
	page := onetick.RunPage{Runs: []onetick.Run{}}
	var tick, doc string
	_, err = pgx.ForEachRow(rows, []any{&tick, &doc}, func() error {
		if len(page.Runs) == limit {
			page.Next = storekit.Cursor(page.Runs[limit-1])
			return nil
		}
		r, err := decodeRun(q.Job, tick, doc)
		if err != nil {
			return err
		}
		page.Runs = append(page.Runs, r)
		return nil
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
	var doc string
	err := b.pool.QueryRow(ctx, b.q(`SELECT doc::text FROM {s}.runs WHERE job = $1 AND tick = $2`), job, tick).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return onetick.Run{}, false, nil
	}
	if err != nil {
		return onetick.Run{}, false, err
	}
	r, err := decodeRun(job, tick, doc)
	return r, err == nil, err
}
