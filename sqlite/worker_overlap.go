package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/onetick/onetick/worker"
)

// Liveness and overlap. A consumer is alive while its w_alive row has not
// expired. A job's run marker is the w_markers row "run:<job>" (a lease of
// hold); it holds the job while unexpired and while the entry it names is
// pending and owned by a live consumer. Its waiter places are w_waiters
// rows, which count while their entry is pending.

func (s *WorkerStore) setAlive(o *op, consumer string, live time.Duration) error {
	return o.exec(`INSERT INTO w_alive (grp, consumer, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (grp, consumer) DO UPDATE SET expires_ms = excluded.expires_ms`, s.group, consumer, o.ms+live.Milliseconds())
}

// Register implements worker.Store.
func (s *WorkerStore) Register(ctx context.Context, consumer string, streams []string, live time.Duration) error {
	return s.b.write(ctx, func(o *op) error {
		for _, key := range streams {
			if err := o.exec("UPDATE w_pending SET consumer = '', delivered_ms = NULL WHERE grp = ? AND consumer = ? AND stream = ?",
				s.group, consumer, key); err != nil {
				return err
			}
		}
		return s.setAlive(o, consumer, live)
	})
}

// markerFree reports whether the job's run marker leaves it to d.
func (s *WorkerStore) markerFree(o *op, d *worker.Delivery) (bool, error) {
	cur, held, err := s.marker(o, "run:"+d.Job)
	if err != nil || !held || cur == token(d) {
		return true, err
	}
	stream, id, _ := strings.Cut(cur, "\n")
	var alive bool
	err = o.row(`SELECT EXISTS (SELECT 1 FROM w_alive a WHERE a.grp = p.grp AND a.consumer = p.consumer AND a.expires_ms > ?)
		FROM w_pending p WHERE p.grp = ? AND p.stream = ? AND p.seq = ?`, o.ms, s.group, stream, seqOf(id)).Scan(&alive)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil // the entry is no longer pending
	}
	return !alive, err
}

// overlapState reads what worker.DecideOverlap needs about d's job,
// dropping waiter places whose entry is no longer pending.
func (s *WorkerStore) overlapState(o *op, d *worker.Delivery) (worker.OverlapState, error) {
	var st worker.OverlapState
	var err error
	if st.MarkerFree, err = s.markerFree(o, d); err != nil {
		return st, err
	}
	if err := o.exec(`DELETE FROM w_waiters WHERE grp = ? AND job = ? AND NOT EXISTS (SELECT 1 FROM w_pending p
		WHERE p.grp = w_waiters.grp AND p.stream = w_waiters.stream AND p.seq = w_waiters.seq)`, s.group, d.Job); err != nil {
		return st, err
	}
	seq := seqOf(d.ID)
	err = o.row(`SELECT coalesce(max(stream = ?3 AND seq = ?4), 0), coalesce(sum(NOT (stream = ?3 AND seq = ?4)), 0),
			coalesce(max(NOT (stream = ?3 AND seq = ?4) AND (slot < ?5 OR (slot = ?5 AND seq < ?4))), 0)
		FROM w_waiters WHERE grp = ?1 AND job = ?2`, s.group, d.Job, d.Stream, seq, int64(d.Slot)).
		Scan(&st.HasPlace, &st.Waiting, &st.LowerWaiting)
	return st, err
}

// lowerPending reports whether an entry of d's job with a lower sequence
// and a slot no higher is pending in d's stream without a waiter place.
func (s *WorkerStore) lowerPending(o *op, d *worker.Delivery) (bool, error) {
	var found bool
	err := o.row(`SELECT EXISTS (SELECT 1 FROM w_pending p WHERE p.grp = ? AND p.stream = ? AND p.seq < ? AND p.job = ? AND p.slot <= ?
		AND NOT EXISTS (SELECT 1 FROM w_waiters w WHERE w.grp = p.grp AND w.stream = p.stream AND w.seq = p.seq))`,
		s.group, d.Stream, seqOf(d.ID), d.Job, int64(d.Slot)).Scan(&found)
	return found, err
}

func (s *WorkerStore) hasPlace(o *op, d *worker.Delivery) (bool, error) {
	var has bool
	err := o.row("SELECT EXISTS (SELECT 1 FROM w_waiters WHERE grp = ? AND stream = ? AND seq = ?)", s.group, d.Stream, seqOf(d.ID)).Scan(&has)
	return has, err
}

// dropWaiter removes d's waiter place; true if it had one.
func (s *WorkerStore) dropWaiter(o *op, d *worker.Delivery) (bool, error) {
	r, err := o.tx.ExecContext(o.ctx, "DELETE FROM w_waiters WHERE grp = ? AND stream = ? AND seq = ?", s.group, d.Stream, seqOf(d.ID))
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	return n > 0, err
}

// release drops d's run marker and waiter place; true if it had either.
func (s *WorkerStore) release(o *op, d *worker.Delivery) (bool, error) {
	freed, err := s.dropWaiter(o, d)
	if err != nil {
		return false, err
	}
	r, err := o.tx.ExecContext(o.ctx, "DELETE FROM w_markers WHERE grp = ? AND name = ? AND token = ?", s.group, "run:"+d.Job, token(d))
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	return freed || n > 0, err
}

// settle acknowledges d as Begin decides without running it, with its
// marker and waiter place, and tells the waiters after the commit.
func (s *WorkerStore) settle(o *op, d *worker.Delivery) error {
	freed, err := s.release(o, d)
	if err != nil {
		return err
	}
	if freed {
		o.after = append(o.after, func() { s.b.notify(s.listeners()) })
	}
	return s.ack(o, d)
}
