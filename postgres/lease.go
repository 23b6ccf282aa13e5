package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
)

// validTerm is the condition a terms row must meet to be a term onetick
// wrote; other rows (written by hand) are skipped and reported.
const validTerm = `(holder <> '' AND epoch > 0 AND (reason IS NULL OR reason IN ('released', 'expired', 'fenced')))`

// leaseDamage reports a lease row that onetick cannot have written: an
// empty holder or an epoch that is not positive.
func (b *Backend) leaseDamage(holder string, epoch int64) *onetick.DamageError {
	if holder != "" && epoch > 0 {
		return nil
	}
	v := onetick.Lease{Holder: holder, Epoch: onetick.Epoch(epoch)}.Token()
	return &onetick.DamageError{Key: b.table("lease"), Kind: onetick.DamageValue, Value: v, Repairable: true,
		Reason: fmt.Sprintf("lease row %q is not a lease onetick writes (empty holder or epoch not positive)", short(v))}
}

// Acquire implements onetick.Leaser. Acquirers of a shard are serialized
// by its advisory lock; its lease row is locked FOR UPDATE, which also
// waits for claims in flight (they hold it FOR KEY SHARE). The epoch
// counter is the store's: acquirers of different shards take it in turn
// (its row is locked until commit), so epochs are unique across shards.
func (b *Backend) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	var g onetick.Grant
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, b.acquireLock()); err != nil {
			return err
		}
		var cur string
		var epoch, left int64
		err := tx.QueryRow(ctx, b.q(`SELECT holder, epoch, {s}.ms(expires_at) - {s}.ms(clock_timestamp())
			FROM {s}.lease WHERE shard = $1 FOR UPDATE`), b.shard).Scan(&cur, &epoch, &left)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			if d := b.leaseDamage(cur, epoch); d != nil {
				return d
			}
			if left > 0 {
				return &onetick.HeldError{Leader: onetick.LeaderInfo{Lease: onetick.Lease{Holder: cur, Epoch: onetick.Epoch(epoch)},
					TTL: time.Duration(left) * time.Millisecond, Held: true}}
			}
		}
		// Never an epoch issued before: past the counter, past every
		// recorded term (of every shard), and at least the clock in
		// milliseconds, so that a counter lost with the history still
		// gives a new epoch. The counter is moved here, its row locked
		// until commit: an acquirer of another shard waits, then counts
		// past this one.
		var next int64
		if err := tx.QueryRow(ctx, b.q(`INSERT INTO {s}.election AS e (id, epoch)
				SELECT true, greatest(
					coalesce((SELECT max(epoch) FROM {s}.terms WHERE `+validTerm+`), 0) + 1,
					{s}.ms(clock_timestamp()))
				ON CONFLICT (id) DO UPDATE SET epoch = greatest(e.epoch + 1, excluded.epoch)
				RETURNING epoch`)).Scan(&next); err != nil {
			return err
		}
		batch := &pgx.Batch{}
		var start time.Time
		batch.Queue(b.q(`WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
			l AS (INSERT INTO {s}.lease (shard, holder, epoch, expires_at)
				SELECT $4, $1, $2, t + $3 * interval '1 millisecond' FROM now
				ON CONFLICT (shard) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, expires_at = excluded.expires_at),
			c AS (UPDATE {s}.terms SET ended_at = least(now.t, coalesce(terms.expires_at, now.t)),
					reason = CASE WHEN terms.reason = 'fenced' THEN 'fenced' ELSE 'expired' END
				FROM now WHERE terms.shard = $4 AND terms.ended_at IS NULL AND terms.epoch < $2 AND `+validTerm+`),
			n AS (INSERT INTO {s}.terms (epoch, holder, started_at, expires_at, shard)
				SELECT $2, $1, t, t + $3 * interval '1 millisecond', $4 FROM now
				ON CONFLICT (epoch) DO NOTHING)
			SELECT t FROM now`), holder, next, ttl.Milliseconds(), b.shard).QueryRow(func(r pgx.Row) error { return r.Scan(&start) })
		batch.Queue(b.q(`DELETE FROM {s}.terms WHERE shard = $2 AND epoch < (SELECT epoch FROM {s}.terms WHERE shard = $2
				ORDER BY epoch DESC OFFSET $1 LIMIT 1)`),
			b.opts.HistoryLen-1, b.shard)
		var bad int64
		batch.Queue(b.q(`SELECT count(*) FROM {s}.terms WHERE shard = $1 AND NOT `+validTerm), b.shard).QueryRow(func(r pgx.Row) error { return r.Scan(&bad) })
		batch.Queue(`SELECT pg_notify($1, $2)`, b.channel(chanLease), b.leasePayload("acquired"))
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		g = onetick.Grant{Lease: onetick.Lease{Holder: holder, Epoch: onetick.Epoch(next)}, StoreTime: start.UTC()}
		if bad > 0 {
			g.Damage = &onetick.DamageError{Key: b.table("terms"), Kind: onetick.DamageValue, Repairable: true,
				Reason: fmt.Sprintf("%d rows are not terms onetick writes; skipped", bad)}
		}
		return nil
	})
	return g, err
}

// Renew implements onetick.Leaser: compare-and-extend in one statement.
func (b *Backend) Renew(ctx context.Context, l onetick.Lease, ttl time.Duration) (onetick.Grant, error) {
	var at time.Time
	err := b.pool.QueryRow(ctx, b.q(`WITH l AS (UPDATE {s}.lease SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
			WHERE shard = $4 AND holder = $1 AND epoch = $2 AND expires_at > clock_timestamp() RETURNING expires_at),
		t AS (UPDATE {s}.terms SET expires_at = l.expires_at FROM l WHERE terms.epoch = $2 AND terms.shard = $4)
		SELECT expires_at - $3 * interval '1 millisecond' FROM l`), l.Holder, int64(l.Epoch), ttl.Milliseconds(), b.shard).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return onetick.Grant{}, onetick.ErrLeaseLost
	}
	if err != nil {
		return onetick.Grant{}, err
	}
	return onetick.Grant{Lease: l, StoreTime: at.UTC()}, nil
}

// Release implements onetick.Leaser: compare-and-delete, the term closed
// and standbys notified, in one statement.
func (b *Backend) Release(ctx context.Context, l onetick.Lease) error {
	var n int
	err := b.pool.QueryRow(ctx, b.q(`WITH d AS (DELETE FROM {s}.lease
			WHERE shard = $5 AND holder = $1 AND epoch = $2 AND expires_at > clock_timestamp() RETURNING epoch),
		t AS (UPDATE {s}.terms SET ended_at = clock_timestamp(), reason = 'released' FROM d
			WHERE terms.epoch = d.epoch AND terms.shard = $5),
		n AS (SELECT pg_notify($3, $4) FROM d)
		SELECT (SELECT count(*) FROM d) + 0 * (SELECT count(*) FROM n)`), l.Holder, int64(l.Epoch), b.channel(chanLease),
		b.leasePayload("released"), b.shard).Scan(&n)
	if err != nil {
		return err
	}
	if n != 1 {
		return onetick.ErrLeaseLost
	}
	return nil
}

// Leader implements onetick.Leaser. A lease row onetick cannot have
// written is a *DamageError.
func (b *Backend) Leader(ctx context.Context) (onetick.LeaderInfo, error) {
	var holder string
	var epoch, left int64
	err := b.pool.QueryRow(ctx, b.q(`SELECT holder, epoch, {s}.ms(expires_at) - {s}.ms(clock_timestamp()) FROM {s}.lease
		WHERE shard = $1`), b.shard).Scan(&holder, &epoch, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return onetick.LeaderInfo{}, nil
	}
	if err != nil {
		return onetick.LeaderInfo{}, err
	}
	if d := b.leaseDamage(holder, epoch); d != nil {
		return onetick.LeaderInfo{}, d
	}
	if left <= 0 {
		return onetick.LeaderInfo{}, nil
	}
	return onetick.LeaderInfo{Lease: onetick.Lease{Holder: holder, Epoch: onetick.Epoch(epoch)},
		TTL: time.Duration(left) * time.Millisecond, Held: true}, nil
}

// Watch implements onetick.Leaser: it wakes on the NOTIFY that Release
// and Acquire of its shard send, and at the instant the shard's lease
// expires by the database's clock (learned after every wake and re-read
// then, so a renewed lease moves it on), since PostgreSQL has no expiry
// event.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	s, unsub := b.hub.subscribe(b.channel(chanLease), b.myLease)
	return b.hub.forward(ctx, s, unsub, func(ctx context.Context) time.Duration {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var left int64
		err := b.pool.QueryRow(qctx, b.q(`SELECT {s}.ms(expires_at) - {s}.ms(clock_timestamp()) FROM {s}.lease WHERE shard = $1`),
			b.shard).Scan(&left)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return -1 // nothing to expire; an acquire notifies
		case err != nil:
			return time.Second // the database is away: look again
		case left < 0:
			return -1 // expired already: the wake that got us here said so
		}
		return time.Duration(left+1) * time.Millisecond
	})
}

// History implements onetick.Backend. Rows onetick cannot have written
// are skipped and returned as DamageErrors.
func (b *Backend) History(ctx context.Context, n int) ([]onetick.Term, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := b.pool.Query(ctx, b.q(`SELECT epoch, holder, started_at, ended_at, coalesce(reason, ''), `+validTerm+`
		FROM {s}.terms WHERE shard = $2 ORDER BY epoch DESC LIMIT $1`), n, b.shard)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []onetick.Term
	var bad onetick.DamageErrors
	for rows.Next() {
		var epoch int64
		var holder, reason string
		var start time.Time
		var end *time.Time
		var valid bool
		if err := rows.Scan(&epoch, &holder, &start, &end, &reason, &valid); err != nil {
			return nil, err
		}
		if !valid {
			bad = append(bad, b.termDamage(epoch, holder, reason))
			continue
		}
		t := onetick.Term{Epoch: onetick.Epoch(epoch), Holder: holder, Start: start.UTC(), Reason: onetick.EndReason(reason)}
		if end != nil {
			t.End = end.UTC()
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// termDamage describes a terms row onetick cannot have written. Value is
// what Repair compares: the row's epoch, holder and reason.
func (b *Backend) termDamage(epoch int64, holder, reason string) *onetick.DamageError {
	v := termValue(epoch, holder, reason)
	return &onetick.DamageError{Key: b.table("terms"), Field: strconv.FormatInt(epoch, 10), Kind: onetick.DamageValue,
		Value: v, Repairable: true,
		Reason: fmt.Sprintf("row %q is not a term onetick writes (empty holder, epoch not positive or unknown reason); skipped", short(v))}
}

func termValue(epoch int64, holder, reason string) string {
	return strconv.FormatInt(epoch, 10) + "|" + holder + "|" + reason
}
