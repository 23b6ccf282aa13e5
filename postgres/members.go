package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
)

var _ onetick.Members = (*Backend)(nil)

// Heartbeat implements onetick.Members on the table members, by the
// database's clock, in one transaction: holder's row moves to now + ttl,
// the rows whose time has passed are deleted, and the live holders are
// returned in name order (holder included). The membership is the
// fleet's: a shard's view reads and writes the same table.
//
// Heartbeats of the schema take turns on an advisory lock, sent with
// the statement in one round trip: each deletes others' expired rows
// while it writes its own, so two at once could otherwise each wait for
// the row the other holds; and the statement, started after the lock,
// sees every heartbeat before it. One heartbeat per replica per renew
// period: the wait is short.
func (b *Backend) Heartbeat(ctx context.Context, holder string, ttl time.Duration) ([]string, error) {
	if err := onetick.CheckHeartbeat(holder, ttl); err != nil {
		return nil, err
	}
	var live []string
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue(lockSQL, b.lockKey("members"))
		batch.Queue(b.q(`WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
			up AS (INSERT INTO {s}.members (holder, expires_at) SELECT $1, t + $2 * interval '1 microsecond' FROM now
				ON CONFLICT (holder) DO UPDATE SET expires_at = excluded.expires_at),
			gone AS (DELETE FROM {s}.members m USING now WHERE m.expires_at <= now.t AND m.holder <> $1)
			SELECT $1::text COLLATE "C" AS holder
			UNION SELECT m.holder FROM {s}.members m, now WHERE m.expires_at > now.t AND m.holder <> $1
			ORDER BY holder`), holder, ttl.Microseconds()).Query(func(rows pgx.Rows) error {
			var err error
			live, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return nil, err
	}
	return live, nil
}

// Leave removes holder from the membership at once (a replica stopping
// cleanly), so that the others count it out without waiting for its TTL.
// Leaving when not a member is not an error. An empty holder is refused.
func (b *Backend) Leave(ctx context.Context, holder string) error {
	if holder == "" {
		return errors.New("onetick: leave: holder is empty")
	}
	_, err := b.pool.Exec(ctx, b.q(`DELETE FROM {s}.members WHERE holder = $1`), holder)
	return err
}
