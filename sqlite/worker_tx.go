package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// workTx is the storekit.WorkTx of one write transaction of the group.
type workTx struct {
	s      *WorkerStore
	o      *op
	notify bool // Notify queued its call after the commit
}

var _ storekit.WorkTx = (*workTx)(nil)

// tx runs fn in one write transaction of the group.
func (s *WorkerStore) tx(ctx context.Context, fn func(t *workTx) error) error {
	return s.b.write(ctx, func(o *op) error { return fn(&workTx{s: s, o: o}) })
}

// Begin implements worker.Store, by storekit.Begin in one transaction.
func (s *WorkerStore) Begin(ctx context.Context, consumer string, hold time.Duration, starts []worker.Start) (worker.BeginResult, error) {
	var res worker.BeginResult
	err := s.tx(ctx, func(t *workTx) error {
		a, err := storekit.Begin(t, consumer, hold, starts)
		res = worker.BeginResult{Admissions: a, StoreTime: t.o.now}
		return err
	})
	return res, err
}

// Heartbeat implements worker.Store, by storekit.Heartbeat in one
// transaction.
func (s *WorkerStore) Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	var lost []int
	err := s.tx(ctx, func(t *workTx) (err error) {
		lost, err = storekit.Heartbeat(t, consumer, live, hold, holds)
		return err
	})
	return lost, err
}

// Finish implements worker.Store, by storekit.Finish in one transaction.
func (s *WorkerStore) Finish(ctx context.Context, consumer string, fs []worker.Finish) ([]bool, error) {
	var owned []bool
	err := s.tx(ctx, func(t *workTx) (err error) {
		owned, err = storekit.Finish(t, consumer, fs)
		return err
	})
	return owned, err
}

// Register implements worker.Store.
func (s *WorkerStore) Register(ctx context.Context, consumer string, streams []string, live time.Duration) error {
	return s.tx(ctx, func(t *workTx) error {
		for _, key := range streams {
			if err := t.o.exec("UPDATE w_pending SET consumer = '', delivered_ms = NULL WHERE grp = ? AND consumer = ? AND stream = ?",
				s.group, consumer, key); err != nil {
				return err
			}
		}
		return t.SetAlive(consumer, live)
	})
}

// Marker implements storekit.WorkTx.
func (t *workTx) Marker(name string) (string, bool, error) {
	var tok string
	err := t.o.row("SELECT token FROM w_markers WHERE grp = ? AND name = ? AND expires_ms > ?", t.s.group, name, t.o.ms).Scan(&tok)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return tok, err == nil, err
}

// changed runs a statement and reports whether it changed a row.
func (t *workTx) changed(q string, args ...any) (bool, error) {
	r, err := t.o.tx.ExecContext(t.o.ctx, q, args...)
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	return n > 0, err
}

// pendingWhere selects d's pending row.
const pendingWhere = " WHERE grp = ? AND stream = ? AND seq = ?"

// Owned implements storekit.WorkTx.
func (t *workTx) Owned(consumer string, d *worker.Delivery) (int, bool, error) {
	var count int
	err := t.o.row("SELECT count FROM w_pending"+pendingWhere+" AND id = ? AND consumer = ?",
		t.s.group, d.Stream, seqOf(d.ID), d.ID, consumer).Scan(&count)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return count, err == nil, err
}

// Done implements storekit.WorkTx.
func (t *workTx) Done(tick string) (worker.DoneRecord, bool, error) { return t.s.doneRecord(t.o, tick) }

// WriteDone implements storekit.WorkTx.
func (t *workTx) WriteDone(consumer string, d *worker.Delivery, retention time.Duration) error {
	return t.o.exec(`INSERT INTO w_done (grp, tick, entry, consumer, at_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (grp, tick) DO UPDATE SET entry = excluded.entry, consumer = excluded.consumer,
		at_ms = excluded.at_ms, expires_ms = excluded.expires_ms`,
		t.s.group, d.Tick, d.ID, consumer, t.o.ms, t.o.ms+retention.Milliseconds())
}

// Ack implements storekit.WorkTx.
func (t *workTx) Ack(d *worker.Delivery) error {
	return t.o.exec("DELETE FROM w_pending"+pendingWhere, t.s.group, d.Stream, seqOf(d.ID))
}

// Unown implements storekit.WorkTx.
func (t *workTx) Unown(d *worker.Delivery) error {
	return t.o.exec("UPDATE w_pending SET consumer = '', delivered_ms = NULL"+pendingWhere, t.s.group, d.Stream, seqOf(d.ID))
}

// Touch implements storekit.WorkTx.
func (t *workTx) Touch(d *worker.Delivery) error {
	return t.o.exec("UPDATE w_pending SET delivered_ms = ?"+pendingWhere, t.o.ms, t.s.group, d.Stream, seqOf(d.ID))
}

// SetRunning implements storekit.WorkTx.
func (t *workTx) SetRunning(d *worker.Delivery, hold time.Duration) error {
	return t.o.exec(`INSERT INTO w_running (grp, token, job, expires_ms) VALUES (?, ?, ?, ?)
		ON CONFLICT (grp, token) DO UPDATE SET job = excluded.job, expires_ms = excluded.expires_ms`,
		t.s.group, storekit.Token(d), d.Job, t.o.ms+hold.Milliseconds())
}

// RefreshRunning implements storekit.WorkTx.
func (t *workTx) RefreshRunning(d *worker.Delivery, hold time.Duration) error {
	return t.o.exec("UPDATE w_running SET expires_ms = ? WHERE grp = ? AND token = ?", t.o.ms+hold.Milliseconds(), t.s.group, storekit.Token(d))
}

// DeleteRunning implements storekit.WorkTx.
func (t *workTx) DeleteRunning(d *worker.Delivery) error {
	return t.o.exec("DELETE FROM w_running WHERE grp = ? AND token = ?", t.s.group, storekit.Token(d))
}

// SetLast implements storekit.WorkTx.
func (t *workTx) SetLast(job string, outcome worker.Outcome, tick string) error {
	return t.o.exec(`INSERT INTO w_last (grp, job, outcome, tick, at_ms) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (grp, job) DO UPDATE SET outcome = excluded.outcome, tick = excluded.tick, at_ms = excluded.at_ms`,
		t.s.group, job, string(outcome), tick, t.o.ms)
}

// ScheduleRetry implements storekit.WorkTx.
func (t *workTx) ScheduleRetry(d worker.Delivery, delay time.Duration) error {
	return t.o.exec(`INSERT OR REPLACE INTO w_retries (grp, stream, entry, due_ms, job, slot, tick, epoch, replica, payload, attempt, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, t.s.group, d.Stream, d.ID, t.o.ms+delay.Milliseconds(), d.Job, int64(d.Slot),
		d.Tick, int64(d.Epoch), d.Replica, d.Payload, d.Attempt, d.Version)
}

// Dead implements storekit.WorkTx.
func (t *workTx) Dead(consumer string, d *worker.Delivery, deliveries int, msg string) error {
	return t.o.exec(`INSERT INTO w_dead (grp, ms, job, tick, slot, epoch, replica, payload, stream, entry, attempts, deliveries, error, consumer)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, t.s.group, t.o.ms, d.Job, d.Tick, int64(d.Slot), int64(d.Epoch), d.Replica, d.Payload,
		d.Stream, d.ID, d.Attempt, deliveries, msg, consumer)
}

// Note implements storekit.WorkTx.
func (t *workTx) Note(d *worker.Delivery, ev onetick.RunEvent) error {
	return t.o.noteRun(storekit.RunOf(d), ev)
}
