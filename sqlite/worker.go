package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// WorkerStore is the worker.Store of one consumer group on the file's
// streams. Its state lives in the w_* tables, so every WorkerStore of one
// group on one file shares it, in this process and in others, and each
// operation is one transaction: the ownership check and the write that
// settles an entry commit together.
type WorkerStore struct {
	b     *Backend
	group string
}

var _ worker.Store = (*WorkerStore)(nil)

// WorkerStore returns the worker store of group (default "onetick").
func (b *Backend) WorkerStore(group string) *WorkerStore {
	if group == "" {
		group = "onetick"
	}
	return &WorkerStore{b: b, group: group}
}

// wsweep drops the group's expired records, at most once a minute per
// process; every reader ignores them anyway.
func (s *WorkerStore) wsweep(o *op) error {
	b := s.b
	b.mu.Lock()
	due := !o.now.Before(b.wsweepAt[s.group])
	if due {
		b.wsweepAt[s.group] = o.now.Add(time.Minute)
	}
	b.mu.Unlock()
	if !due {
		return nil
	}
	for _, t := range []string{"w_done", "w_running", "w_markers", "w_alive"} {
		if err := o.exec("DELETE FROM "+t+" WHERE grp = ? AND expires_ms <= ?", s.group, o.ms); err != nil {
			return err
		}
	}
	return nil
}

// pendingRow is an entry of the group's pending list.
type pendingRow struct {
	consumer  string
	delivered sql.NullInt64
	count     int
	d         worker.Delivery
}

const pendingCols = `stream, id, consumer, delivered_ms, count, job, slot, tick, epoch, replica, payload, attempt, enqueued_ms, version`

func scanPending(sc interface{ Scan(...any) error }) (*pendingRow, error) {
	var (
		p        pendingRow
		enqueued int64
	)
	if err := sc.Scan(&p.d.Stream, &p.d.ID, &p.consumer, &p.delivered, &p.count, &p.d.Job, &p.d.Slot, &p.d.Tick,
		&p.d.Epoch, &p.d.Replica, &p.d.Payload, &p.d.Attempt, &enqueued, &p.d.Version); err != nil {
		return nil, err
	}
	p.d.Enqueued = msTime(enqueued)
	p.d.Deliveries = p.count
	return &p, nil
}

// Reclaim implements worker.Store.
func (s *WorkerStore) Reclaim(ctx context.Context, consumer string, streams []string, idle time.Duration, max int) ([]*worker.Delivery, error) {
	var out []*worker.Delivery
	err := s.b.write(context.WithoutCancel(ctx), func(o *op) error {
		out = nil
		for _, key := range streams {
			if len(out) >= max {
				break
			}
			// Given back, owned by a consumer that is not alive, or (the
			// backstop) idle.
			rows, err := o.tx.QueryContext(o.ctx, "SELECT "+pendingCols+` FROM w_pending p
				WHERE grp = ?1 AND stream = ?2 AND (delivered_ms IS NULL OR delivered_ms <= ?3
					OR (consumer <> ?4 AND NOT EXISTS (SELECT 1 FROM w_alive a
						WHERE a.grp = p.grp AND a.consumer = p.consumer AND a.expires_ms > ?5)))
				ORDER BY seq LIMIT ?6`,
				s.group, key, o.ms-idle.Milliseconds(), consumer, o.ms, max-len(out))
			if err != nil {
				return err
			}
			var got []*pendingRow
			for rows.Next() {
				p, err := scanPending(rows)
				if err != nil {
					rows.Close()
					return err
				}
				got = append(got, p)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, p := range got {
				if err := o.exec("UPDATE w_pending SET consumer = ?, delivered_ms = ?, count = count + 1 WHERE grp = ? AND stream = ? AND seq = ?",
					consumer, o.ms, s.group, key, seqOf(p.d.ID)); err != nil {
					return err
				}
				d := p.d
				d.Deliveries = p.count + 1
				out = append(out, &d)
			}
		}
		return nil
	})
	return out, err
}

// doneRecord returns the unexpired done record of tick.
func (s *WorkerStore) doneRecord(o *op, tick string) (worker.DoneRecord, bool, error) {
	r := worker.DoneRecord{Tick: tick}
	var at int64
	err := o.row("SELECT entry, consumer, at_ms FROM w_done WHERE grp = ? AND tick = ? AND expires_ms > ?", s.group, tick, o.ms).
		Scan(&r.Entry, &r.Consumer, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return worker.DoneRecord{}, false, nil
	}
	if err != nil {
		return worker.DoneRecord{}, false, err
	}
	r.At = msTime(at)
	return r, true, nil
}

// PromoteDue implements worker.Store.
func (s *WorkerStore) PromoteDue(ctx context.Context, limit int) (worker.Promoted, error) {
	p := worker.Promoted{Next: -1}
	err := s.b.write(ctx, func(o *op) error {
		p = worker.Promoted{Next: -1}
		rows, err := o.tx.QueryContext(o.ctx, `SELECT stream, entry, due_ms, job, slot, tick, epoch, replica, payload, attempt, version
			FROM w_retries WHERE grp = ? ORDER BY due_ms, stream, entry LIMIT ?`, s.group, limit+1)
		if err != nil {
			return err
		}
		type retry struct {
			entry string
			due   int64
			d     worker.Delivery
		}
		var rs []retry
		for rows.Next() {
			var r retry
			if err := rows.Scan(&r.d.Stream, &r.entry, &r.due, &r.d.Job, &r.d.Slot, &r.d.Tick, &r.d.Epoch, &r.d.Replica,
				&r.d.Payload, &r.d.Attempt, &r.d.Version); err != nil {
				rows.Close()
				return err
			}
			rs = append(rs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range rs {
			if r.due > o.ms || p.N >= limit {
				p.Next = max(time.Duration(r.due-o.ms)*time.Millisecond, 0)
				break
			}
			if err := s.appendEntry(o, r.d, r.d.Attempt); err != nil {
				return err
			}
			if err := o.exec("DELETE FROM w_retries WHERE grp = ? AND stream = ? AND entry = ?", s.group, r.d.Stream, r.entry); err != nil {
				return err
			}
			p.N++
		}
		if p.N > 0 {
			o.after = append(o.after, s.b.wakeAppended)
		}
		return nil
	})
	return p, err
}

// appendEntry appends a worker's entry (a retry or a replay, addressed to
// this group) to its stream.
func (s *WorkerStore) appendEntry(o *op, d worker.Delivery, attempt int) error {
	return o.exec(`INSERT INTO entries (stream, ms, job, slot, tick, epoch, replica, payload, kind, attempt, grp, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?)`, d.Stream, o.ms, d.Job, int64(d.Slot), d.Tick, int64(d.Epoch), d.Replica, d.Payload,
		attempt, s.group, d.Version)
}

// signal returns the group's Released signal.
func (s *WorkerStore) signal() *storekit.Signal {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	sig := s.b.released[s.group]
	if sig == nil {
		sig = &storekit.Signal{}
		s.b.released[s.group] = sig
	}
	return sig
}

// Released implements worker.Store. It is told of markers released
// through this process; a worker waiting on a marker released by another
// process on the file finds it free on its timer.
func (s *WorkerStore) Released(ctx context.Context) <-chan struct{} {
	return s.signal().Watch(ctx)
}
