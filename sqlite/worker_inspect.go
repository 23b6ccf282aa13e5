package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// Status implements worker.Inspector. It reads a snapshot and takes no
// write lock, so `onetick status` in another process never waits for the
// daemon.
func (s *WorkerStore) Status(ctx context.Context, jobs []string) (worker.Status, error) {
	var st worker.Status
	err := s.b.read(ctx, func(o *op) error {
		st = worker.Status{StoreTime: o.now.UTC(), Jobs: make([]worker.JobStatus, len(jobs))}
		if err := o.row("SELECT count(*) FROM w_dead WHERE grp = ?", s.group).Scan(&st.Dead); err != nil {
			return err
		}
		for i, j := range jobs {
			js := worker.JobStatus{Job: j}
			if err := o.row("SELECT count(*) FROM w_running WHERE grp = ? AND job = ? AND expires_ms > ?", s.group, j, o.ms).
				Scan(&js.InFlight); err != nil {
				return err
			}
			if err := o.row("SELECT count(*) FROM w_dead WHERE grp = ? AND job = ?", s.group, j).Scan(&js.Dead); err != nil {
				return err
			}
			var (
				outcome string
				at      int64
			)
			err := o.row("SELECT outcome, tick, at_ms FROM w_last WHERE grp = ? AND job = ?", s.group, j).Scan(&outcome, &js.LastTick, &at)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			default:
				js.LastOutcome, js.LastAt = worker.Outcome(outcome), msTime(at)
			}
			st.Jobs[i] = js
		}
		return nil
	})
	return st, err
}

// DoneRecords implements worker.Inspector.
func (s *WorkerStore) DoneRecords(ctx context.Context, ticks []string) (map[string]worker.DoneRecord, error) {
	out := map[string]worker.DoneRecord{}
	err := s.b.read(ctx, func(o *op) error {
		for _, t := range ticks {
			r, ok, err := s.doneRecord(o, t)
			if err != nil {
				return err
			}
			if ok {
				out[t] = r
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const deadCols = `seq, ms, job, tick, slot, epoch, replica, payload, stream, entry, attempts, deliveries, error, consumer`

func scanDead(sc interface{ Scan(...any) error }) (worker.DeadLetter, error) {
	var (
		dl      worker.DeadLetter
		seq, ms int64
	)
	err := sc.Scan(&seq, &ms, &dl.Job, &dl.Tick, &dl.Slot, &dl.Epoch, &dl.Replica, &dl.Payload, &dl.Stream, &dl.Entry,
		&dl.Attempts, &dl.Deliveries, &dl.Error, &dl.Consumer)
	dl.ID, dl.At = entryID(ms, seq), msTime(ms)
	return dl, err
}

// DeadLetters implements worker.Inspector.
func (s *WorkerStore) DeadLetters(ctx context.Context, after string, n int) ([]worker.DeadLetter, error) {
	var out []worker.DeadLetter
	err := s.b.read(ctx, func(o *op) error {
		rows, err := o.tx.QueryContext(o.ctx, "SELECT "+deadCols+" FROM w_dead WHERE grp = ? AND seq > ? ORDER BY seq LIMIT ?",
			s.group, seqOf(after), max(n, 0))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			dl, err := scanDead(rows)
			if err != nil {
				return err
			}
			out = append(out, dl)
		}
		return rows.Err()
	})
	return out, err
}

// Replay implements worker.Inspector.
func (s *WorkerStore) Replay(ctx context.Context, id string) (worker.DeadLetter, error) {
	var dl worker.DeadLetter
	err := s.b.write(ctx, func(o *op) error {
		var err error
		dl, err = scanDead(o.row("SELECT "+deadCols+" FROM w_dead WHERE grp = ? AND seq = ?", s.group, seqOf(id)))
		if errors.Is(err, sql.ErrNoRows) || (err == nil && dl.ID != id) {
			return fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
		}
		if err != nil {
			return err
		}
		d := worker.Delivery{Stream: dl.Stream, Job: dl.Job, Slot: dl.Slot, Tick: dl.Tick,
			Epoch: dl.Epoch, Replica: dl.Replica, Payload: dl.Payload}
		if err := s.appendEntry(o, d, 1); err != nil {
			return err
		}
		if err := o.noteRun(storekit.RunOf(&d), onetick.RunEvent{What: onetick.EventReplayed}); err != nil {
			return err
		}
		if err := o.exec("DELETE FROM w_dead WHERE grp = ? AND seq = ?", s.group, seqOf(id)); err != nil {
			return err
		}
		o.after = append(o.after, s.b.wakeAppended)
		return nil
	})
	if err != nil {
		return worker.DeadLetter{}, err
	}
	return dl, nil
}
