package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// WorkerStore is the worker.Store of one consumer group on a Backend's
// database. Its rows (tables cursors, pending, markers, done, retries,
// dead, last_outcome) carry the group's name; see doc.go.
//
// An entry is a consumer's while its pending row names that consumer;
// every write that settles an entry locks that row (FOR UPDATE) in the
// same transaction, so a consumer that lost the entry writes nothing.
// Idle times, marker expiry and due times are judged by the database's
// clock.
type WorkerStore struct {
	b     *Backend
	group string

	mu    sync.Mutex
	known map[string]bool // streams whose cursor row exists
	rot   int
}

var _ worker.Store = (*WorkerStore)(nil)

// WorkerStore returns the worker store of group (default "onetick").
func (b *Backend) WorkerStore(group string) *WorkerStore {
	if group == "" {
		group = "onetick"
	}
	return &WorkerStore{b: b, group: group, known: map[string]bool{}}
}

// Fetch implements worker.Store. A consumer group has a cursor per
// stream: the newest entry handed to the group. Fetching locks the
// cursors of the streams FOR UPDATE SKIP LOCKED (a stream another
// consumer is fetching from right now is left to it), takes the entries
// after them, records each as pending for consumer and moves the cursors,
// in one transaction. With nothing to take it waits for the NOTIFY that
// every append sends, up to block.
func (s *WorkerStore) Fetch(ctx context.Context, consumer string, streams []string, max int, block time.Duration) ([]*worker.Delivery, error) {
	if max <= 0 || len(streams) == 0 {
		return nil, nil
	}
	var wake <-chan struct{}
	if block > 0 {
		sub, unsub := s.b.hub.subscribe(s.b.channel(chanAppend), nil)
		defer unsub()
		s.b.hub.waitReady(ctx, min(block, 2*time.Second))
		wake = sub.c
	}
	deadline := time.Now().Add(block)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Entries taken are returned even when ctx ends meanwhile.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		out, moved, skipped, err := s.fetchOnce(qctx, consumer, streams, max)
		cancel()
		if err != nil || len(out) > 0 {
			return out, err
		}
		if moved {
			continue // passed entries of other groups: there may be more
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		if skipped {
			// Another consumer is fetching from some of the streams: look
			// again when it is done, which is soon.
			left = min(left, 10*time.Millisecond)
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// fetchOnce takes what there is. moved is true when it moved a cursor
// without taking anything (past entries of other groups), skipped when
// another fetch held the cursor of one of the streams.
func (s *WorkerStore) fetchOnce(ctx context.Context, consumer string, streams []string, max int) (out []*worker.Delivery, moved, skipped bool, err error) {
	if err := s.ensureCursors(ctx, streams); err != nil {
		return nil, false, false, err
	}
	s.mu.Lock()
	s.rot++
	rot := s.rot
	s.mu.Unlock()
	err = pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.b.q(`SELECT stream, last_id FROM {s}.cursors
			WHERE grp = $1 AND stream = ANY($2) FOR UPDATE SKIP LOCKED`), s.group, streams)
		if err != nil {
			return err
		}
		cur := map[string]int64{}
		var st string
		var last int64
		if _, err := pgx.ForEachRow(rows, []any{&st, &last}, func() error { cur[st] = last; return nil }); err != nil {
			return err
		}
		for _, k := range streams {
			if _, ok := cur[k]; !ok {
				skipped = true
			}
		}
		// Start at a different stream each time, so none starves.
		var locked []string
		var lasts []int64
		var ords []int32
		for i := range streams {
			k := streams[(i+rot)%len(streams)]
			if l, ok := cur[k]; ok {
				locked, lasts, ords = append(locked, k), append(lasts, l), append(ords, int32(len(ords)))
				delete(cur, k) // a stream named twice is read once
			}
		}
		if len(locked) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, s.b.q(`SELECT c.ord, e.id, e.ms, e.job, e.slot, e.tick, e.epoch, e.replica, e.payload, e.attempt, e.grp, e.version
			FROM unnest($1::text[], $2::bigint[], $3::int[]) AS c(stream, last_id, ord)
			CROSS JOIN LATERAL (SELECT x.id, x.ms, x.job, x.slot, x.tick, x.epoch, x.replica, x.payload, x.attempt, x.grp, x.version
				FROM {s}.entries x WHERE x.stream = c.stream AND x.id > c.last_id ORDER BY x.id LIMIT $4) e
			ORDER BY c.ord, e.id`), locked, lasts, ords, max)
		if err != nil {
			return err
		}
		to := map[string]int64{}
		var ids []int64
		var pstreams, pjobs []string
		var ord int32
		var e entryRow
		_, err = pgx.ForEachRow(rows, []any{&ord, &e.id, &e.ms, &e.job, &e.slot, &e.tick, &e.epoch, &e.replica, &e.payload, &e.attempt, &e.grp, &e.version},
			func() error {
				if len(out) >= max {
					return nil
				}
				k := locked[ord]
				to[k] = e.id
				if e.grp != nil && *e.grp != s.group {
					return nil // another group's retry or replay
				}
				d := e.delivery(k)
				d.Deliveries = 1
				out = append(out, d)
				ids, pstreams, pjobs = append(ids, e.id), append(pstreams, k), append(pjobs, e.job)
				return nil
			})
		if err != nil {
			return err
		}
		if len(to) == 0 {
			return nil
		}
		moved = len(out) == 0
		var ms []string
		var mv []int64
		for k, v := range to {
			ms, mv = append(ms, k), append(mv, v)
		}
		batch := &pgx.Batch{}
		if len(ids) > 0 {
			batch.Queue(s.b.q(`INSERT INTO {s}.pending (grp, entry_id, stream, job, consumer, seen_at, deliveries)
				SELECT $1, id, stream, job, $2, clock_timestamp(), 1 FROM unnest($3::bigint[], $4::text[], $5::text[]) AS u(id, stream, job)`),
				s.group, consumer, ids, pstreams, pjobs)
		}
		batch.Queue(s.b.q(`UPDATE {s}.cursors c SET last_id = u.id FROM unnest($2::text[], $3::bigint[]) AS u(stream, id)
			WHERE c.grp = $1 AND c.stream = u.stream`), s.group, ms, mv)
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return nil, false, false, err
	}
	return out, moved, skipped, nil
}

// ensureCursors creates the group's cursors of streams it has not seen,
// at the beginning of the stream: ticks enqueued before any worker ran
// are run (the stream's MaxLen bounds how many).
func (s *WorkerStore) ensureCursors(ctx context.Context, streams []string) error {
	s.mu.Lock()
	var missing []string
	for _, k := range streams {
		if !s.known[k] {
			missing = append(missing, k)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	if _, err := s.b.pool.Exec(ctx, s.b.q(`INSERT INTO {s}.cursors (grp, stream) SELECT $1, unnest($2::text[])
		ON CONFLICT DO NOTHING`), s.group, missing); err != nil {
		return err
	}
	s.mu.Lock()
	for _, k := range missing {
		s.known[k] = true
	}
	s.mu.Unlock()
	return nil
}

// entryRow is an entry as a worker reads it.
type entryRow struct {
	id, ms, slot, epoch int64
	job, tick, replica  string
	payload, version    string
	attempt             int
	grp                 *string
}

func (e *entryRow) delivery(stream string) *worker.Delivery {
	return &worker.Delivery{Stream: stream, ID: entryID(e.ms, e.id), Job: e.job, Slot: onetick.Slot(e.slot), Tick: e.tick,
		Epoch: onetick.Epoch(e.epoch), Replica: e.replica, Payload: e.payload, Attempt: max(e.attempt, 1), Enqueued: msTime(e.ms),
		Version: e.version}
}

// Reclaim implements worker.Store: the pending rows that were given back,
// are owned by a consumer that is not alive, or are idle are locked FOR
// UPDATE SKIP LOCKED, so that concurrent reclaimers never take one entry
// twice, and handed to consumer with one more delivery. Rows whose entry
// was trimmed away are deleted instead (as XAUTOCLAIM does).
func (s *WorkerStore) Reclaim(ctx context.Context, consumer string, streams []string, idle time.Duration, max int) ([]*worker.Delivery, error) {
	if max <= 0 || len(streams) == 0 {
		return nil, nil
	}
	rows, err := s.b.pool.Query(ctx, s.b.q(`WITH c AS (
			SELECT p.grp, p.entry_id, e.id IS NOT NULL AS live FROM {s}.pending p LEFT JOIN {s}.entries e ON e.id = p.entry_id
			WHERE p.grp = $1 AND p.stream = ANY($2)
				AND (p.seen_at IS NULL OR p.seen_at <= clock_timestamp() - $3 * interval '1 millisecond'
					OR (p.consumer <> $5 AND NOT EXISTS (SELECT 1 FROM {s}.alive a
						WHERE a.grp = p.grp AND a.consumer = p.consumer AND a.expires_at > clock_timestamp())))
			ORDER BY p.entry_id LIMIT $4 FOR UPDATE OF p SKIP LOCKED),
		gone AS (DELETE FROM {s}.pending p USING c WHERE NOT c.live AND p.grp = c.grp AND p.entry_id = c.entry_id),
		u AS (UPDATE {s}.pending p SET consumer = $5, seen_at = clock_timestamp(), deliveries = p.deliveries + 1, running_until = NULL
			FROM c WHERE c.live AND p.grp = c.grp AND p.entry_id = c.entry_id RETURNING p.entry_id, p.stream, p.deliveries)
		SELECT u.stream, u.deliveries, e.id, e.ms, e.job, e.slot, e.tick, e.epoch, e.replica, e.payload, e.attempt, e.grp, e.version
		FROM u JOIN {s}.entries e ON e.id = u.entry_id ORDER BY e.id`), s.group, streams, idle.Milliseconds(), max, consumer)
	if err != nil {
		return nil, err
	}
	var out []*worker.Delivery
	var stream string
	var count int
	var e entryRow
	_, err = pgx.ForEachRow(rows, []any{&stream, &count, &e.id, &e.ms, &e.job, &e.slot, &e.tick, &e.epoch, &e.replica, &e.payload, &e.attempt, &e.grp, &e.version},
		func() error {
			d := e.delivery(stream)
			d.Deliveries = count
			out = append(out, d)
			return nil
		})
	return out, err
}

const lastOutcomeSQL = `INSERT INTO {s}.last_outcome (grp, job, outcome, tick, at) VALUES ($1, $2, $3, $4, clock_timestamp())
	ON CONFLICT (grp, job) DO UPDATE SET outcome = excluded.outcome, tick = excluded.tick, at = excluded.at`

const deadSQL = `INSERT INTO {s}.dead (ms, grp, job, tick, slot, epoch, replica, payload, stream, entry, attempts, deliveries, error, consumer, at)
	VALUES ({s}.ms(clock_timestamp()), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, clock_timestamp())`

const ackSQL = `DELETE FROM {s}.pending WHERE grp = $1 AND entry_id = $2`

func (s *WorkerStore) queueDead(batch *pgx.Batch, consumer string, d *worker.Delivery, deliveries int, msg string) {
	batch.Queue(s.b.q(deadSQL), s.group, d.Job, d.Tick, int64(d.Slot), int64(d.Epoch), d.Replica, d.Payload, d.Stream, d.ID,
		d.Attempt, deliveries, msg, consumer)
	batch.Queue(s.b.q(lastOutcomeSQL), s.group, d.Job, string(worker.OutcomeDead), d.Tick)
}

// beginState is what Begin reads of a pending row it admits.
type beginState struct {
	count int
	done  bool
}

// Begin implements worker.Store in one transaction: the starts' pending
// rows are locked FOR UPDATE, then each start is decided in order, by
// storekit.Screen (done record, then delivery limit, with
// storekit.DeliveryLimitError) and worker.DecideOverlap. It does not run
// storekit.Begin over primitives, as the memory and file stores do: that
// would cost several round trips per start where this reads every start's
// row in one query and writes in one batch; Heartbeat and Finish batch
// the same way.
func (s *WorkerStore) Begin(ctx context.Context, consumer string, hold time.Duration, starts []worker.Start) (worker.BeginResult, error) {
	if len(starts) == 0 {
		return worker.BeginResult{}, nil
	}
	hold = max(hold, time.Millisecond)
	ids := make([]int64, len(starts))
	ticks := make([]string, len(starts))
	for i, st := range starts {
		ids[i], _ = parseEntryID(st.D.ID)
		ticks[i] = st.D.Tick
	}
	var res worker.BeginResult
	err := pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
		res = worker.BeginResult{Admissions: make([]worker.Admission, len(starts))}
		owned := map[int64]beginState{}
		lt := s.b.ledgerTx(time.Time{})
		batch := &pgx.Batch{}
		batch.Queue(s.b.q(`SELECT p.entry_id, p.deliveries,
				EXISTS (SELECT 1 FROM {s}.done d WHERE d.grp = $1 AND d.tick = u.tick AND d.keep_until > clock_timestamp())
			FROM unnest($2::bigint[], $3::text[]) AS u(id, tick)
			JOIN {s}.pending p ON p.grp = $1 AND p.entry_id = u.id AND p.consumer = $4
			FOR UPDATE OF p`), s.group, ids, ticks, consumer).Query(func(rows pgx.Rows) error {
			var id int64
			var st beginState
			_, err := pgx.ForEachRow(rows, []any{&id, &st.count, &st.done}, func() error { owned[id] = st; return nil })
			return err
		})
		batch.Queue("SELECT clock_timestamp()").QueryRow(func(r pgx.Row) error { return r.Scan(&res.StoreTime) })
		lt.queueRead(batch, readOwnedRunsSQL, s.group, ids, ticks, consumer)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		res.StoreTime = res.StoreTime.UTC()
		lt.at(res.StoreTime)
		if err := s.lockJobs(ctx, tx, starts, owned, ids); err != nil {
			return err
		}
		batch = &pgx.Batch{}
		var settled []int64 // acknowledged without running: their marker and waiter place go
		for i, start := range starts {
			d := start.D
			o, ok := owned[ids[i]]
			if !ok {
				res.Admissions[i] = worker.NotOwned
				continue
			}
			d.Deliveries = o.count
			if a := storekit.Screen(start, o.count, o.done); a != 0 {
				if a == worker.DeadDeliveries {
					msg := storekit.DeliveryLimitError(o.count, start.MaxDeliveries)
					s.queueDead(batch, consumer, d, o.count, msg)
					lt.note(storekit.RunOf(d), workEvent(onetick.EventDead, consumer, d, msg))
				} else {
					lt.note(storekit.RunOf(d), workEvent(onetick.EventSkippedDone, consumer, d, ""))
				}
				batch.Queue(s.b.q(ackSQL), s.group, ids[i])
				settled = append(settled, ids[i])
				res.Admissions[i] = a
				continue
			}
			// Decided one start at a time: a start's effects are seen by
			// the next one of the same job.
			a, err := s.admit(ctx, tx, start, ids[i], hold)
			if err != nil {
				return err
			}
			switch a {
			case worker.Run:
				batch.Queue(s.b.q(`UPDATE {s}.pending SET running_until = clock_timestamp() + $3 * interval '1 millisecond'
					WHERE grp = $1 AND entry_id = $2`), s.group, ids[i], hold.Milliseconds())
				lt.note(storekit.RunOf(d), workEvent(onetick.EventStarted, consumer, d, ""))
			case worker.SkipOverlap:
				batch.Queue(s.b.q(ackSQL), s.group, ids[i])
				batch.Queue(s.b.q(lastOutcomeSQL), s.group, d.Job, string(worker.OutcomeSkippedOverlap), d.Tick)
				lt.note(storekit.RunOf(d), workEvent(onetick.EventSkippedOverlap, consumer, d, ""))
			}
			res.Admissions[i] = a
		}
		if len(settled) > 0 {
			s.queueRelease(batch, settled)
		}
		if err := lt.queueWrite(batch); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		return lt.settle(ctx, tx)
	})
	return res, err
}

// Heartbeat implements worker.Store, in one statement: the consumer is
// marked alive, the owned pending rows are touched (idle time reset, no
// delivery counted) and the run markers they hold extended.
func (s *WorkerStore) Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	hold = max(hold, time.Millisecond)
	ids := make([]int64, len(holds))
	jobs := make([]string, len(holds))
	kinds := make([]string, len(holds))
	idx := make([]int32, len(holds))
	for i, h := range holds {
		ids[i], _ = parseEntryID(h.D.ID)
		jobs[i], idx[i] = h.D.Job, int32(i)
		switch h.Marker {
		case worker.MarkerRun:
			kinds[i] = "run"
		case worker.MarkerWait:
			kinds[i] = "wait"
		default:
			kinds[i] = ""
		}
	}
	rows, err := s.b.pool.Query(ctx, s.b.q(`WITH h AS (SELECT * FROM unnest($3::bigint[], $4::text[], $5::text[], $6::int[]) AS h(id, job, kind, idx)),
		p AS (UPDATE {s}.pending p SET seen_at = clock_timestamp(),
				running_until = CASE WHEN p.running_until IS NULL THEN NULL ELSE clock_timestamp() + $7 * interval '1 millisecond' END
			FROM h WHERE p.grp = $1 AND p.entry_id = h.id AND p.consumer = $2 RETURNING h.idx, h.id, h.job, h.kind),
		m AS (UPDATE {s}.markers m SET expires_at = clock_timestamp() + $7 * interval '1 millisecond'
			FROM p WHERE p.kind = 'run' AND m.grp = $1 AND m.job = p.job AND m.kind = 'run' AND m.token = p.id
				AND m.expires_at > clock_timestamp() RETURNING p.idx),
		a AS (INSERT INTO {s}.alive (grp, consumer, expires_at) VALUES ($1, $2, clock_timestamp() + $8 * interval '1 millisecond')
			ON CONFLICT (grp, consumer) DO UPDATE SET expires_at = excluded.expires_at)
		SELECT idx FROM p WHERE kind = '' UNION ALL SELECT idx FROM m
		UNION ALL SELECT p.idx FROM p JOIN {s}.waiters w ON w.grp = $1 AND w.entry_id = p.id WHERE p.kind = 'wait'`),
		s.group, consumer, ids, jobs, kinds, idx, hold.Milliseconds(), max(live.Milliseconds(), 1))
	if err != nil {
		return nil, err
	}
	kept := make([]bool, len(holds))
	var i int32
	if _, err := pgx.ForEachRow(rows, []any{&i}, func() error { kept[i] = true; return nil }); err != nil {
		return nil, err
	}
	var lost []int
	for i, k := range kept {
		if !k {
			lost = append(lost, i)
		}
	}
	return lost, nil
}

// Finish implements worker.Store in one transaction: the pending rows are
// locked FOR UPDATE; for each one still the consumer's, its markers are
// released (NOTIFY) and it is settled; for a FinishDone no longer the
// consumer's, storekit.RetriedDone answers from the tick's done record.
func (s *WorkerStore) Finish(ctx context.Context, consumer string, fs []worker.Finish) ([]bool, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(fs))
	for i, f := range fs {
		ids[i], _ = parseEntryID(f.D.ID)
	}
	owned := make([]bool, len(fs))
	ticks := make([]string, len(fs))
	for i, f := range fs {
		ticks[i] = f.D.Tick
	}
	err := pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
		clear(owned)
		count := map[int64]int{}
		lt := s.b.ledgerTx(time.Time{})
		var now time.Time
		batch := &pgx.Batch{}
		batch.Queue(s.b.q(`SELECT entry_id, deliveries FROM {s}.pending
			WHERE grp = $1 AND consumer = $2 AND entry_id = ANY($3) FOR UPDATE`), s.group, consumer, ids).Query(func(rows pgx.Rows) error {
			var id int64
			var n int
			_, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { count[id] = n; return nil })
			return err
		})
		if lt != nil {
			batch.Queue("SELECT clock_timestamp()").QueryRow(func(r pgx.Row) error { return r.Scan(&now) })
			lt.queueRead(batch, readOwnedRunsSQL, s.group, ids, ticks, consumer)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		lt.at(now)
		batch = &pgx.Batch{}
		var mine []int64
		for i, f := range fs {
			if _, ok := count[ids[i]]; ok {
				mine = append(mine, ids[i])
			} else if f.Kind == worker.FinishDone {
				// A retry after a lost reply: this consumer's own done
				// record for this entry answers it.
				i, f := i, f
				batch.Queue(s.b.q(`SELECT entry, consumer FROM {s}.done WHERE grp = $1 AND tick = $2 AND keep_until > clock_timestamp()`),
					s.group, f.D.Tick).
					QueryRow(func(r pgx.Row) error {
						var rec worker.DoneRecord
						err := r.Scan(&rec.Entry, &rec.Consumer)
						if errors.Is(err, pgx.ErrNoRows) {
							return nil
						}
						owned[i] = storekit.RetriedDone(f, consumer, rec, err == nil)
						return err
					})
			}
		}
		if len(mine) > 0 {
			s.queueRelease(batch, mine)
		}
		for i, f := range fs {
			c, ok := count[ids[i]]
			if !ok {
				continue
			}
			owned[i] = true
			d := f.D
			lt.note(storekit.RunOf(d), storekit.FinishEvent(consumer, f))
			switch f.Kind {
			case worker.FinishRelease:
				// Owned by nobody and idle forever: any consumer may take
				// it over at once, and the old owner's heartbeat fails.
				batch.Queue(s.b.q(`UPDATE {s}.pending SET consumer = '', seen_at = NULL, running_until = NULL
					WHERE grp = $1 AND entry_id = $2`), s.group, ids[i])
				continue
			case worker.FinishDone:
				batch.Queue(s.b.q(`INSERT INTO {s}.done (grp, tick, entry, consumer, at, keep_until)
					VALUES ($1, $2, $3, $4, clock_timestamp(),
						greatest(to_timestamp($5::bigint / 1000.0), clock_timestamp()) + $6 * interval '1 millisecond')
					ON CONFLICT (grp, tick) DO UPDATE SET entry = excluded.entry, consumer = excluded.consumer, at = excluded.at,
						keep_until = excluded.keep_until`),
					s.group, d.Tick, d.ID, consumer, int64(d.Slot), max(f.Retention.Milliseconds(), 1))
				batch.Queue(s.b.q(lastOutcomeSQL), s.group, d.Job, string(worker.OutcomeSucceeded), d.Tick)
			case worker.FinishRetry:
				batch.Queue(s.b.q(`INSERT INTO {s}.retries (grp, due_at, stream, job, slot, tick, epoch, replica, payload, attempt, version)
					VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond', $3, $4, $5, $6, $7, $8, $9, $10, $11)`),
					s.group, max(f.Delay.Milliseconds(), 0), d.Stream, d.Job, int64(d.Slot), d.Tick, int64(d.Epoch), d.Replica, d.Payload, d.Attempt+1, d.Version)
				batch.Queue(s.b.q(lastOutcomeSQL), s.group, d.Job, string(worker.OutcomeRetried), d.Tick)
			case worker.FinishDead:
				s.queueDead(batch, consumer, d, c, f.Err)
			default:
				return fmt.Errorf("postgres: unknown finish kind %d", f.Kind)
			}
			batch.Queue(s.b.q(ackSQL), s.group, ids[i])
		}
		if err := lt.queueWrite(batch); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		return lt.settle(ctx, tx)
	})
	if err != nil {
		return nil, err
	}
	return owned, nil
}

// PromoteDue implements worker.Store: the due retries are locked FOR
// UPDATE SKIP LOCKED (concurrent promoters take different ones), deleted
// and appended to their streams in one transaction.
func (s *WorkerStore) PromoteDue(ctx context.Context, limit int) (worker.Promoted, error) {
	p := worker.Promoted{Next: -1}
	err := pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
		p = worker.Promoted{Next: -1}
		if limit > 0 {
			rows, err := tx.Query(ctx, s.b.q(`SELECT id FROM {s}.retries WHERE grp = $1 AND due_at <= clock_timestamp()
				ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`), s.group, limit)
			if err != nil {
				return err
			}
			due, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			if len(due) > 0 {
				batch := &pgx.Batch{}
				batch.Queue(lockSQL, s.b.lockKey("append"))
				batch.Queue(s.b.q(`WITH m AS (DELETE FROM {s}.retries WHERE id = ANY($1) RETURNING *)
					INSERT INTO {s}.entries (stream, ms, job, slot, tick, epoch, replica, payload, attempt, grp, version)
					SELECT stream, {s}.ms(clock_timestamp()), job, slot, tick, epoch, replica, payload, attempt, grp, version
					FROM m ORDER BY due_at, id`), due)
				batch.Queue(`SELECT pg_notify($1, '')`, s.b.channel(chanAppend))
				if err := tx.SendBatch(ctx, batch).Close(); err != nil {
					return err
				}
				p.N = len(due)
			}
		}
		var next *int64
		if err := tx.QueryRow(ctx, s.b.q(`SELECT {s}.ms(min(due_at)) - {s}.ms(clock_timestamp())
			FROM {s}.retries WHERE grp = $1`), s.group).Scan(&next); err != nil {
			return err
		}
		if next != nil {
			p.Next = time.Duration(max(*next, 0)) * time.Millisecond
		}
		return nil
	})
	return p, err
}

// Released implements worker.Store: the NOTIFY that Finish sends when it
// releases a run marker of this group.
func (s *WorkerStore) Released(ctx context.Context) <-chan struct{} {
	sub, unsub := s.b.hub.subscribe(s.b.channel(chanReleased), func(payload string) bool { return payload == s.group })
	return s.b.hub.forward(ctx, sub, unsub, nil)
}
