package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/onetick/onetick"
)

// leaseRow reads the lease row: present may be true for a lease that has
// expired (it stays until the next acquire closes its term).
func (o *op) leaseRow() (l onetick.Lease, expires int64, present bool, err error) {
	err = o.row("SELECT holder, epoch, expires_ms FROM lease WHERE id = 1").Scan(&l.Holder, &l.Epoch, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return onetick.Lease{}, 0, false, nil
	}
	return l, expires, err == nil, err
}

// holds reports whether the store holds exactly lease l, unexpired.
func (o *op) holds(l onetick.Lease) (bool, error) {
	cur, exp, ok, err := o.leaseRow()
	return ok && exp > o.ms && cur == l, err
}

// Acquire implements onetick.Leaser.
func (b *Backend) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	var g onetick.Grant
	err := b.write(ctx, func(o *op) error {
		cur, exp, ok, err := o.leaseRow()
		if err != nil {
			return err
		}
		if ok && exp > o.ms {
			// Unexpired: taken only if its holder's term lock proves that
			// no process holds the term any more (a crash).
			f, dead := b.terms.dead(int64(cur.Epoch))
			if !dead {
				return &onetick.HeldError{Leader: onetick.LeaderInfo{Lease: cur, TTL: time.Duration(exp-o.ms) * time.Millisecond, Held: true}}
			}
			o.after = append(o.after, func() {
				b.terms.remove(f)
				b.opts.Logger.Info("took over the lease of a holder whose process is gone", "file", b.path,
					"holder", cur.Holder, "epoch", cur.Epoch, "ttl_left", time.Duration(exp-o.ms)*time.Millisecond)
			})
			o.undo = append(o.undo, func() { _ = f.Close() })
		}
		// The epoch never repeats: the largest of the stored epoch + 1,
		// the history's newest + 1 and the clock in milliseconds.
		epoch := o.ms
		stored, err := o.counter("epoch")
		if err != nil {
			return err
		}
		var newest sql.NullInt64
		if err := o.row("SELECT max(epoch) FROM terms").Scan(&newest); err != nil {
			return err
		}
		epoch = max(epoch, stored+1, newest.Int64+1)
		// The previous term ended without a release: its lease expired.
		if err := o.exec(`UPDATE terms SET end_ms = min(?, exp_ms), reason = 'expired'
			WHERE epoch = (SELECT max(epoch) FROM terms) AND end_ms IS NULL`, o.ms); err != nil {
			return err
		}
		if err := o.setCounter("epoch", epoch); err != nil {
			return err
		}
		until := o.ms + ttl.Milliseconds()
		if err := o.exec("INSERT OR REPLACE INTO lease (id, holder, epoch, expires_ms) VALUES (1, ?, ?, ?)", holder, epoch, until); err != nil {
			return err
		}
		if err := o.exec("INSERT INTO terms (epoch, holder, start_ms, exp_ms) VALUES (?, ?, ?, ?)", epoch, holder, o.ms, until); err != nil {
			return err
		}
		if err := o.exec("DELETE FROM terms WHERE epoch NOT IN (SELECT epoch FROM terms ORDER BY epoch DESC LIMIT ?)", b.opts.HistoryLen); err != nil {
			return err
		}
		// This term's lock, and the files of ended terms nobody holds.
		b.terms.sweep()
		b.terms.hold(epoch)
		o.undo = append(o.undo, func() { b.terms.drop(epoch) })
		o.after = append(o.after, func() { b.terms.dropBefore(epoch) })
		g = onetick.Grant{Lease: onetick.Lease{Holder: holder, Epoch: onetick.Epoch(epoch)}, StoreTime: o.now}
		return nil
	})
	return g, err
}

// Renew implements onetick.Leaser.
func (b *Backend) Renew(ctx context.Context, l onetick.Lease, ttl time.Duration) (onetick.Grant, error) {
	var g onetick.Grant
	err := b.write(ctx, func(o *op) error {
		ok, err := o.holds(l)
		if err != nil {
			return err
		}
		if !ok {
			return onetick.ErrLeaseLost
		}
		until := o.ms + ttl.Milliseconds()
		if err := o.exec("UPDATE lease SET expires_ms = ? WHERE id = 1", until); err != nil {
			return err
		}
		if err := o.exec("UPDATE terms SET exp_ms = ? WHERE epoch = ?", until, l.Epoch); err != nil {
			return err
		}
		g = onetick.Grant{Lease: l, StoreTime: o.now}
		return nil
	})
	if errors.Is(err, onetick.ErrLeaseLost) {
		b.terms.drop(int64(l.Epoch))
	}
	return g, err
}

// Release implements onetick.Leaser.
func (b *Backend) Release(ctx context.Context, l onetick.Lease) error {
	err := b.write(ctx, func(o *op) error {
		ok, err := o.holds(l)
		if err != nil {
			return err
		}
		if !ok {
			return onetick.ErrLeaseLost
		}
		if err := o.exec("DELETE FROM lease WHERE id = 1"); err != nil {
			return err
		}
		if err := o.exec("UPDATE terms SET end_ms = ?, reason = 'released' WHERE epoch = ?", o.ms, l.Epoch); err != nil {
			return err
		}
		o.after = append(o.after, b.watchers.Notify)
		return nil
	})
	if err == nil || errors.Is(err, onetick.ErrLeaseLost) {
		b.terms.drop(int64(l.Epoch))
	}
	return err
}

// Leader implements onetick.Leaser.
func (b *Backend) Leader(ctx context.Context) (onetick.LeaderInfo, error) {
	var info onetick.LeaderInfo
	err := b.read(ctx, func(o *op) error {
		l, exp, ok, err := o.leaseRow()
		if err != nil || !ok || exp <= o.ms {
			return err
		}
		info = onetick.LeaderInfo{Lease: l, TTL: time.Duration(exp-o.ms) * time.Millisecond, Held: true}
		return nil
	})
	return info, err
}

// Watch implements onetick.Leaser. It is told of releases made through
// this Backend (this process). A release by another process on the same
// file is not signalled: a standby there waits for the lease's remaining
// TTL, as it does for a lease that expires.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	return b.watchers.Watch(ctx)
}

// History implements onetick.Backend.
func (b *Backend) History(ctx context.Context, n int) ([]onetick.Term, error) {
	var out []onetick.Term
	err := b.read(ctx, func(o *op) error {
		rows, err := o.tx.QueryContext(o.ctx, "SELECT epoch, holder, start_ms, end_ms, reason FROM terms ORDER BY epoch DESC LIMIT ?", max(n, 0))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				t          onetick.Term
				start      int64
				end        sql.NullInt64
				reasonText string
			)
			if err := rows.Scan(&t.Epoch, &t.Holder, &start, &end, &reasonText); err != nil {
				return err
			}
			t.Start = msTime(start)
			if end.Valid {
				t.End = msTime(end.Int64)
			}
			t.Reason = onetick.EndReason(reasonText)
			out = append(out, t)
		}
		return rows.Err()
	})
	return out, err
}

// Time implements onetick.Claimer: the store's clock is this host's.
func (b *Backend) Time(ctx context.Context) (time.Time, error) {
	if b.closed.Load() {
		return time.Time{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return b.opts.Clock.Now(), nil
}
