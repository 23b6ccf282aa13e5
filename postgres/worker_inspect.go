package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// Status implements worker.Inspector.
func (s *WorkerStore) Status(ctx context.Context, jobs []string) (worker.Status, error) {
	st := worker.Status{Jobs: make([]worker.JobStatus, len(jobs))}
	index := make(map[string][]int, len(jobs))
	for i, j := range jobs {
		st.Jobs[i].Job = j
		index[j] = append(index[j], i)
	}
	each := func(job string, f func(js *worker.JobStatus)) {
		for _, i := range index[job] {
			f(&st.Jobs[i])
		}
	}
	batch := &pgx.Batch{}
	batch.Queue(s.b.q(`SELECT clock_timestamp(), (SELECT count(*) FROM {s}.dead WHERE grp = $1)`), s.group).
		QueryRow(func(r pgx.Row) error { return r.Scan(&st.StoreTime, &st.Dead) })
	batch.Queue(s.b.q(`SELECT job, count(*) FROM {s}.pending WHERE grp = $1 AND job = ANY($2) AND running_until > clock_timestamp()
		GROUP BY job`), s.group, jobs).Query(func(rows pgx.Rows) error {
		var job string
		var n int
		_, err := pgx.ForEachRow(rows, []any{&job, &n}, func() error {
			each(job, func(js *worker.JobStatus) { js.InFlight = n })
			return nil
		})
		return err
	})
	batch.Queue(s.b.q(`SELECT job, outcome, tick, at FROM {s}.last_outcome WHERE grp = $1 AND job = ANY($2)`), s.group, jobs).
		Query(func(rows pgx.Rows) error {
			var job, outcome, tick string
			var at struct{ t time.Time }
			_, err := pgx.ForEachRow(rows, []any{&job, &outcome, &tick, &at.t}, func() error {
				each(job, func(js *worker.JobStatus) {
					js.LastOutcome, js.LastTick, js.LastAt = worker.Outcome(outcome), tick, at.t.UTC()
				})
				return nil
			})
			return err
		})
	batch.Queue(s.b.q(`SELECT job, count(*) FROM {s}.dead WHERE grp = $1 AND job = ANY($2) GROUP BY job`), s.group, jobs).
		Query(func(rows pgx.Rows) error {
			var job string
			var n int64
			_, err := pgx.ForEachRow(rows, []any{&job, &n}, func() error {
				each(job, func(js *worker.JobStatus) { js.Dead = n })
				return nil
			})
			return err
		})
	if err := s.b.pool.SendBatch(ctx, batch).Close(); err != nil {
		return worker.Status{}, err
	}
	st.StoreTime = st.StoreTime.UTC()
	return st, nil
}

// DoneRecords implements worker.Inspector.
func (s *WorkerStore) DoneRecords(ctx context.Context, ticks []string) (map[string]worker.DoneRecord, error) {
	out := map[string]worker.DoneRecord{}
	if len(ticks) == 0 {
		return out, nil
	}
	rows, err := s.b.pool.Query(ctx, s.b.q(`SELECT tick, entry, consumer, at FROM {s}.done
		WHERE grp = $1 AND tick = ANY($2) AND keep_until > clock_timestamp()`), s.group, ticks)
	if err != nil {
		return nil, err
	}
	var r worker.DoneRecord
	_, err = pgx.ForEachRow(rows, []any{&r.Tick, &r.Entry, &r.Consumer, &r.At}, func() error {
		r.At = r.At.UTC()
		out[r.Tick] = r
		return nil
	})
	return out, err
}

const deadColumns = `id, ms, job, tick, slot, epoch, replica, payload, stream, entry, attempts, deliveries, error, consumer, at`

func scanDead(r pgx.Row) (worker.DeadLetter, error) {
	var dl worker.DeadLetter
	var id, ms, slot, epoch int64
	err := r.Scan(&id, &ms, &dl.Job, &dl.Tick, &slot, &epoch, &dl.Replica, &dl.Payload, &dl.Stream, &dl.Entry,
		&dl.Attempts, &dl.Deliveries, &dl.Error, &dl.Consumer, &dl.At)
	dl.ID, dl.Slot, dl.Epoch, dl.At = entryID(ms, id), onetick.Slot(slot), onetick.Epoch(epoch), dl.At.UTC()
	return dl, err
}

// DeadLetters implements worker.Inspector. Ids are "<ms>-<seq>", like
// stream entries'.
func (s *WorkerStore) DeadLetters(ctx context.Context, after string, n int) ([]worker.DeadLetter, error) {
	if n <= 0 {
		return nil, nil
	}
	var from int64
	if after != "" {
		var ok bool
		if from, ok = parseEntryID(after); !ok {
			return nil, fmt.Errorf("postgres: dead letter id %q: want <ms>-<seq>", after)
		}
	}
	rows, err := s.b.pool.Query(ctx, s.b.q(`SELECT `+deadColumns+` FROM {s}.dead WHERE grp = $1 AND id > $2 ORDER BY id LIMIT $3`),
		s.group, from, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (worker.DeadLetter, error) { return scanDead(r) })
}

// Replay implements worker.Inspector: the dead letter is deleted, its
// tick's ledger record noted (replayed) and its tick appended to its
// stream (attempt 1, for this group) in one transaction.
func (s *WorkerStore) Replay(ctx context.Context, id string) (worker.DeadLetter, error) {
	seq, ok := parseEntryID(id)
	if !ok {
		return worker.DeadLetter{}, fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
	}
	var dl worker.DeadLetter
	err := pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
		var err error
		dl, err = scanDead(tx.QueryRow(ctx, s.b.q(`DELETE FROM {s}.dead WHERE grp = $1 AND id = $2 RETURNING `+deadColumns), s.group, seq))
		if err != nil {
			return err
		}
		// The record is written before the append lock is taken: claims
		// write records while they hold that lock.
		if lt := s.b.ledgerTx(time.Time{}); lt != nil {
			var now time.Time
			if err := tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
				return err
			}
			lt.at(now)
			d := worker.Delivery{Job: dl.Job, Slot: dl.Slot, Tick: dl.Tick}
			if err := lt.apply(ctx, tx, []onetick.Run{storekit.RunOf(&d)}, []onetick.RunEvent{{What: onetick.EventReplayed}}); err != nil {
				return err
			}
		}
		batch := &pgx.Batch{}
		batch.Queue(lockSQL, s.b.lockKey("append"))
		batch.Queue(s.b.q(`INSERT INTO {s}.entries (stream, ms, job, slot, tick, epoch, replica, payload, attempt, grp)
			VALUES ($1, {s}.ms(clock_timestamp()), $2, $3, $4, $5, $6, $7, 1, $8)`),
			dl.Stream, dl.Job, int64(dl.Slot), dl.Tick, int64(dl.Epoch), dl.Replica, dl.Payload, s.group)
		batch.Queue(`SELECT pg_notify($1, '')`, s.b.channel(chanAppend))
		return tx.SendBatch(ctx, batch).Close()
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return worker.DeadLetter{}, fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
	}
	if err != nil {
		return worker.DeadLetter{}, err
	}
	return dl, nil
}
