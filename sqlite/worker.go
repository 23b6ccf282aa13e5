package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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

func token(d *worker.Delivery) string { return d.Stream + "\n" + d.ID }

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

// owned returns the pending entry of d if consumer owns it.
func (s *WorkerStore) owned(o *op, consumer string, d *worker.Delivery) (*pendingRow, error) {
	p, err := scanPending(o.row("SELECT "+pendingCols+" FROM w_pending WHERE grp = ? AND stream = ? AND seq = ? AND id = ?",
		s.group, d.Stream, seqOf(d.ID), d.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if p.consumer != consumer {
		return nil, nil
	}
	return p, nil
}

func (s *WorkerStore) ack(o *op, d *worker.Delivery) error {
	return o.exec("DELETE FROM w_pending WHERE grp = ? AND stream = ? AND seq = ?", s.group, d.Stream, seqOf(d.ID))
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

// marker returns the token of the group's marker name, if unexpired.
func (s *WorkerStore) marker(o *op, name string) (string, bool, error) {
	var tok string
	err := o.row("SELECT token FROM w_markers WHERE grp = ? AND name = ? AND expires_ms > ?", s.group, name, o.ms).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return tok, err == nil, err
}

func (s *WorkerStore) setMarker(o *op, name, tok string, hold time.Duration) error {
	return o.exec(`INSERT INTO w_markers (grp, name, token, expires_ms) VALUES (?, ?, ?, ?)
		ON CONFLICT (grp, name) DO UPDATE SET token = excluded.token, expires_ms = excluded.expires_ms`,
		s.group, name, tok, o.ms+hold.Milliseconds())
}

func (s *WorkerStore) setLast(o *op, job string, outcome worker.Outcome, tick string) error {
	return o.exec(`INSERT INTO w_last (grp, job, outcome, tick, at_ms) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (grp, job) DO UPDATE SET outcome = excluded.outcome, tick = excluded.tick, at_ms = excluded.at_ms`,
		s.group, job, string(outcome), tick, o.ms)
}

func (s *WorkerStore) dead(o *op, consumer string, d *worker.Delivery, deliveries int, msg string) error {
	if err := o.exec(`INSERT INTO w_dead (grp, ms, job, tick, slot, epoch, replica, payload, stream, entry, attempts, deliveries, error, consumer)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.group, o.ms, d.Job, d.Tick, int64(d.Slot), int64(d.Epoch), d.Replica, d.Payload,
		d.Stream, d.ID, d.Attempt, deliveries, msg, consumer); err != nil {
		return err
	}
	return s.setLast(o, d.Job, worker.OutcomeDead, d.Tick)
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

// Begin implements worker.Store.
func (s *WorkerStore) Begin(ctx context.Context, consumer string, hold time.Duration, starts []worker.Start) (worker.BeginResult, error) {
	var res worker.BeginResult
	err := s.b.write(ctx, func(o *op) error {
		res = worker.BeginResult{Admissions: make([]worker.Admission, len(starts)), StoreTime: o.now}
		for i, st := range starts {
			a, err := s.begin(o, consumer, hold, st)
			if err != nil {
				return err
			}
			res.Admissions[i] = a
		}
		return nil
	})
	return res, err
}

func (s *WorkerStore) begin(o *op, consumer string, hold time.Duration, st worker.Start) (worker.Admission, error) {
	d := st.D
	p, err := s.owned(o, consumer, d)
	if err != nil || p == nil {
		return worker.NotOwned, err
	}
	d.Deliveries = p.count
	if _, done, err := s.doneRecord(o, d.Tick); err != nil {
		return 0, err
	} else if done {
		return worker.SkipDone, s.settle(o, d)
	}
	if st.MaxDeliveries > 0 && p.count > st.MaxDeliveries {
		if err := s.dead(o, consumer, d, p.count, deliveryLimitError(p.count, st.MaxDeliveries)); err != nil {
			return 0, err
		}
		return worker.DeadDeliveries, s.settle(o, d)
	}
	state, err := s.overlapState(o, d)
	if err != nil {
		return 0, err
	}
	a, err := worker.DecideOverlap(st, state, func() (bool, error) { return s.lowerPending(o, d) })
	if err != nil {
		return 0, err
	}
	tok := token(d)
	switch a {
	case worker.Run:
		if st.Overlap != worker.OverlapAllow {
			if err := s.setMarker(o, "run:"+d.Job, tok, hold); err != nil {
				return 0, err
			}
			if _, err := s.dropWaiter(o, d); err != nil {
				return 0, err
			}
		}
		err = o.exec(`INSERT INTO w_running (grp, token, job, expires_ms) VALUES (?, ?, ?, ?)
			ON CONFLICT (grp, token) DO UPDATE SET job = excluded.job, expires_ms = excluded.expires_ms`,
			s.group, tok, d.Job, o.ms+hold.Milliseconds())
	case worker.Wait:
		err = o.exec(`INSERT INTO w_waiters (grp, stream, seq, job, slot) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			s.group, d.Stream, seqOf(d.ID), d.Job, int64(d.Slot))
	case worker.SkipOverlap:
		if err = s.ack(o, d); err == nil {
			err = s.setLast(o, d.Job, worker.OutcomeSkippedOverlap, d.Tick)
		}
	}
	return a, err
}

func deliveryLimitError(count, limit int) string {
	return fmt.Sprintf("delivery limit: delivered %d times without a result (max_deliveries %d)", count, limit)
}

// Heartbeat implements worker.Store.
func (s *WorkerStore) Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	var lost []int
	err := s.b.write(ctx, func(o *op) error {
		lost = nil
		if err := s.setAlive(o, consumer, live); err != nil {
			return err
		}
		for i, h := range holds {
			p, err := s.owned(o, consumer, h.D)
			if err != nil {
				return err
			}
			if p == nil {
				lost = append(lost, i)
				continue
			}
			if err := o.exec("UPDATE w_pending SET delivered_ms = ? WHERE grp = ? AND stream = ? AND seq = ?",
				o.ms, s.group, h.D.Stream, seqOf(h.D.ID)); err != nil {
				return err
			}
			tok := token(h.D)
			switch h.Marker {
			case worker.MarkerRun:
				name := "run:" + h.D.Job
				cur, held, err := s.marker(o, name)
				if err != nil {
					return err
				}
				if !held || cur != tok {
					lost = append(lost, i)
					continue
				}
				if err := s.setMarker(o, name, tok, hold); err != nil {
					return err
				}
			case worker.MarkerWait:
				has, err := s.hasPlace(o, h.D)
				if err != nil {
					return err
				}
				if !has {
					lost = append(lost, i)
					continue
				}
			}
			if err := o.exec("UPDATE w_running SET expires_ms = ? WHERE grp = ? AND token = ?", o.ms+hold.Milliseconds(), s.group, tok); err != nil {
				return err
			}
		}
		return nil
	})
	return lost, err
}

// Finish implements worker.Store.
func (s *WorkerStore) Finish(ctx context.Context, consumer string, fs []worker.Finish) ([]bool, error) {
	var owned []bool
	err := s.b.write(ctx, func(o *op) error {
		owned = make([]bool, len(fs))
		released := false
		for i, f := range fs {
			d := f.D
			p, err := s.owned(o, consumer, d)
			if err != nil {
				return err
			}
			if p == nil {
				rec, ok, err := s.doneRecord(o, d.Tick)
				if err != nil {
					return err
				}
				owned[i] = f.Kind == worker.FinishDone && ok && rec.Entry == d.ID && rec.Consumer == consumer
				continue
			}
			owned[i] = true
			tok := token(d)
			freed, err := s.release(o, d)
			if err != nil {
				return err
			}
			released = released || freed
			if err := o.exec("DELETE FROM w_running WHERE grp = ? AND token = ?", s.group, tok); err != nil {
				return err
			}
			switch f.Kind {
			case worker.FinishRelease:
				if err := o.exec("UPDATE w_pending SET consumer = '', delivered_ms = NULL WHERE grp = ? AND stream = ? AND seq = ?",
					s.group, d.Stream, seqOf(d.ID)); err != nil {
					return err
				}
				continue
			case worker.FinishDone:
				if err := o.exec(`INSERT INTO w_done (grp, tick, entry, consumer, at_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?)
					ON CONFLICT (grp, tick) DO UPDATE SET entry = excluded.entry, consumer = excluded.consumer,
					at_ms = excluded.at_ms, expires_ms = excluded.expires_ms`,
					s.group, d.Tick, d.ID, consumer, o.ms, o.ms+f.Retention.Milliseconds()); err != nil {
					return err
				}
				err = s.setLast(o, d.Job, worker.OutcomeSucceeded, d.Tick)
			case worker.FinishRetry:
				if err := o.exec(`INSERT OR REPLACE INTO w_retries (grp, stream, entry, due_ms, job, slot, tick, epoch, replica, payload, attempt, version)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.group, d.Stream, d.ID, o.ms+f.Delay.Milliseconds(), d.Job, int64(d.Slot),
					d.Tick, int64(d.Epoch), d.Replica, d.Payload, d.Attempt+1, d.Version); err != nil {
					return err
				}
				err = s.setLast(o, d.Job, worker.OutcomeRetried, d.Tick)
			case worker.FinishDead:
				err = s.dead(o, consumer, d, p.count, f.Err)
			}
			if err != nil {
				return err
			}
			if err := s.ack(o, d); err != nil {
				return err
			}
		}
		if released {
			o.after = append(o.after, func() { s.b.notify(s.listeners()) })
		}
		return nil
	})
	return owned, err
}

// PromoteDue implements worker.Store.
func (s *WorkerStore) PromoteDue(ctx context.Context, max int) (worker.Promoted, error) {
	p := worker.Promoted{Next: -1}
	err := s.b.write(ctx, func(o *op) error {
		p = worker.Promoted{Next: -1}
		rows, err := o.tx.QueryContext(o.ctx, `SELECT stream, entry, due_ms, job, slot, tick, epoch, replica, payload, attempt, version
			FROM w_retries WHERE grp = ? ORDER BY due_ms, stream, entry LIMIT ?`, s.group, max+1)
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
			if r.due > o.ms || p.N >= max {
				p.Next = max0(time.Duration(r.due-o.ms) * time.Millisecond)
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

func max0(d time.Duration) time.Duration { return max(d, 0) }

// appendEntry appends a worker's entry (a retry or a replay, addressed to
// this group) to its stream.
func (s *WorkerStore) appendEntry(o *op, d worker.Delivery, attempt int) error {
	return o.exec(`INSERT INTO entries (stream, ms, job, slot, tick, epoch, replica, payload, kind, attempt, grp, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?)`, d.Stream, o.ms, d.Job, int64(d.Slot), d.Tick, int64(d.Epoch), d.Replica, d.Payload,
		attempt, s.group, d.Version)
}

// listeners returns the group's set of Released channels.
func (s *WorkerStore) listeners() map[chan struct{}]struct{} {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	set := s.b.released[s.group]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		s.b.released[s.group] = set
	}
	return set
}

// Released implements worker.Store. It is told of markers released
// through this process; a worker waiting on a marker released by another
// process on the file finds it free on its timer.
func (s *WorkerStore) Released(ctx context.Context) <-chan struct{} {
	return s.b.relay(ctx, s.listeners())
}
