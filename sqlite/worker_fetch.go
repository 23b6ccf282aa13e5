package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/onetick/onetick/worker"
)

// Fetch implements worker.Store. Entries appended by this process wake it
// at once; those appended by another process on the file are seen within
// Options.PollInterval.
func (s *WorkerStore) Fetch(ctx context.Context, consumer string, streams []string, max int, block time.Duration) ([]*worker.Delivery, error) {
	if max <= 0 || len(streams) == 0 {
		return nil, nil
	}
	b := s.b
	var timer <-chan time.Time
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wake := b.appended.Wait()
		// The entries taken must reach the caller: the transaction is
		// not cut short by ctx, so it commits them and returns them, or
		// takes nothing.
		out, err := s.takeNew(context.WithoutCancel(ctx), consumer, streams, max)
		if err != nil || len(out) > 0 {
			return out, err
		}
		seen := b.dataVersion(ctx)
		if timer == nil {
			t := b.opts.Clock.NewTimer(block)
			defer t.Stop()
			timer = t.Chan()
		}
		poll := b.opts.Clock.NewTicker(b.opts.PollInterval)
	wait:
		for {
			select {
			case <-ctx.Done():
				poll.Stop()
				return nil, ctx.Err()
			case <-timer:
				poll.Stop()
				return nil, nil
			case <-wake:
				break wait
			case <-poll.Chan():
				if v := b.dataVersion(ctx); v != seen || v < 0 {
					break wait
				}
			}
		}
		poll.Stop()
	}
}

// dataVersion is SQLite's data version of the file as this Backend's
// connection sees it: it changes when another connection (another
// process) commits, and reading it takes no lock. -1 when it cannot be
// read: the caller then looks at the file anyway.
func (b *Backend) dataVersion(ctx context.Context) int64 {
	var v int64
	if b.db.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v) != nil {
		return -1
	}
	return v
}

func (s *WorkerStore) takeNew(ctx context.Context, consumer string, streams []string, max int) ([]*worker.Delivery, error) {
	var out []*worker.Delivery
	err := s.b.write(ctx, func(o *op) error {
		out = nil
		if err := s.wsweep(o); err != nil {
			return err
		}
		s.b.mu.Lock()
		s.b.rot[s.group]++
		rot := s.b.rot[s.group]
		s.b.mu.Unlock()
		for k := range streams {
			if len(out) >= max {
				break
			}
			// Start at a different stream each time, so none starves.
			key := streams[(k+rot)%len(streams)]
			var last int64
			err := o.row("SELECT last_seq FROM w_cursors WHERE grp = ? AND stream = ?", s.group, key).Scan(&last)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			rows, err := o.tx.QueryContext(o.ctx, `SELECT seq, ms, job, slot, tick, epoch, replica, payload, attempt, grp, version
				FROM entries WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?`, key, last, max-len(out))
			if err != nil {
				return err
			}
			var got []*worker.Delivery
			newest := last
			for rows.Next() {
				var (
					d       worker.Delivery
					seq, ms int64
					grp     string
				)
				if err := rows.Scan(&seq, &ms, &d.Job, &d.Slot, &d.Tick, &d.Epoch, &d.Replica, &d.Payload, &d.Attempt, &grp, &d.Version); err != nil {
					rows.Close()
					return err
				}
				newest = seq
				if grp != "" && grp != s.group {
					continue // another group's retry or replay
				}
				d.Stream, d.ID, d.Enqueued, d.Deliveries = key, entryID(ms, seq), msTime(ms), 1
				got = append(got, &d)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if newest == last {
				continue
			}
			if err := o.exec(`INSERT INTO w_cursors (grp, stream, last_seq) VALUES (?, ?, ?)
				ON CONFLICT (grp, stream) DO UPDATE SET last_seq = excluded.last_seq`, s.group, key, newest); err != nil {
				return err
			}
			for _, d := range got {
				if err := o.exec(`INSERT INTO w_pending (grp, stream, seq, id, consumer, delivered_ms, count,
					job, slot, tick, epoch, replica, payload, attempt, enqueued_ms, version) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
					s.group, key, seqOf(d.ID), d.ID, consumer, o.ms, d.Job, int64(d.Slot), d.Tick, int64(d.Epoch), d.Replica, d.Payload,
					d.Attempt, d.Enqueued.UnixMilli(), d.Version); err != nil {
					return err
				}
			}
			out = append(out, got...)
		}
		return nil
	})
	return out, err
}
