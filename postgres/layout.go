package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

var _ onetick.Layouter = (*Backend)(nil)

// Layout implements onetick.Layouter in one transaction under the
// advisory lock "layout": the recorded count (table layout; none: one
// shard) and whether any shard's lease is held, by the database's clock,
// go to storekit.DecideLayout. The layouts share every job's rows (the
// job tables have no shard column: a slot's record refuses it in every
// layout), so the count may change once no lease is held: stop the
// fleet, start it with the new count.
func (b *Backend) Layout(ctx context.Context, shards int) error {
	if b.root != nil {
		return onetick.ViewLayout(shards)
	}
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, b.lockKey("layout")); err != nil {
			return err
		}
		st := storekit.LayoutState{Shared: true}
		err := tx.QueryRow(ctx, b.q(`SELECT shards FROM {s}.layout`)).Scan(&st.Stored)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := tx.QueryRow(ctx, b.q(`SELECT EXISTS (SELECT 1 FROM {s}.lease WHERE expires_at > clock_timestamp())`)).Scan(&st.Held); err != nil {
			return err
		}
		record, err := storekit.DecideLayout(st, shards)
		if !record || err != nil {
			return err
		}
		_, err = tx.Exec(ctx, b.q(`INSERT INTO {s}.layout (shards) VALUES ($1) ON CONFLICT (id) DO UPDATE SET shards = excluded.shards`), shards)
		return err
	})
}
