package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
)

// Typed columns, primary keys and NOT NULL leave little that can be
// damaged: no key of another type, no value that does not parse. What a
// row written by hand can still hold is a value onetick never writes:
// a lease with an empty holder or an epoch that is not positive, a term
// with an unknown reason, a pause interval that ends before it starts.
// Those are what Inspect reports and Repair moves aside.

// Inspect implements onetick.Doctor: it reads the lease, the whole
// history and the pause intervals. Streams are rows of one typed table:
// nothing of theirs can be damaged.
func (b *Backend) Inspect(ctx context.Context, _ map[string]string) ([]*onetick.DamageError, error) {
	var out []*onetick.DamageError
	add := func(err error) error {
		if ds := onetick.Damages(err); ds != nil {
			out = append(out, ds...)
			return nil
		}
		return err
	}
	if _, err := b.Leader(ctx); add(err) != nil {
		return nil, err
	}
	if _, err := b.History(ctx, 1<<20); add(err) != nil {
		return nil, err
	}
	if _, _, err := b.Controls(ctx); add(err) != nil {
		return nil, err
	}
	return out, nil
}

// Repair implements onetick.Doctor: it moves the damaged row (or a job's
// pause rows) into the table damaged, if it is still exactly as reported,
// and returns "<schema>.damaged:<id>".
func (b *Backend) Repair(ctx context.Context, d *onetick.DamageError, _ bool) (string, error) {
	if d == nil {
		return "", fmt.Errorf("%w: no damage given", onetick.ErrNotRepairable)
	}
	var id int64
	var err error
	switch {
	case d.Key == b.table("lease") && d.Kind == onetick.DamageValue:
		l, perr := onetick.ParseToken(d.Value)
		if perr != nil {
			return "", fmt.Errorf("%w: %v", onetick.ErrNotRepairable, perr)
		}
		err = b.pool.QueryRow(ctx, b.q(`WITH m AS (DELETE FROM {s}.lease WHERE shard = $4 AND holder = $1 AND epoch = $2 RETURNING 1)
			INSERT INTO {s}.damaged (tbl, field, value) SELECT 'lease', '', $3 FROM m RETURNING id`),
			l.Holder, int64(l.Epoch), d.Value, b.shard).Scan(&id)
	case d.Key == b.table("terms") && d.Field != "":
		epoch, perr := strconv.ParseInt(d.Field, 10, 64)
		if perr != nil {
			return "", fmt.Errorf("%w: field %q is not an epoch", onetick.ErrNotRepairable, d.Field)
		}
		err = b.pool.QueryRow(ctx, b.q(`WITH m AS (DELETE FROM {s}.terms WHERE epoch = $1 AND NOT `+validTerm+`
				AND $2 = epoch::text || '|' || holder || '|' || coalesce(reason, '') RETURNING 1)
			INSERT INTO {s}.damaged (tbl, field, value) SELECT 'terms', $3, $2 FROM m RETURNING id`),
			epoch, d.Value, d.Field).Scan(&id)
	case d.Key == b.table("pauses") && d.Field != "":
		err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockSQL, b.lockKey("controls")); err != nil {
				return err
			}
			_, rerr := b.readPauses(ctx, tx, d.Field)
			var cur *onetick.DamageError
			if !errors.As(rerr, &cur) {
				if rerr != nil {
					return rerr
				}
				return pgx.ErrNoRows
			}
			if cur.Value != d.Value {
				return pgx.ErrNoRows
			}
			return tx.QueryRow(ctx, b.q(`WITH m AS (DELETE FROM {s}.pauses WHERE job = $1 RETURNING 1)
				INSERT INTO {s}.damaged (tbl, field, value) SELECT 'pauses', $1, $2 LIMIT 1 RETURNING id`),
				d.Field, d.Value).Scan(&id)
		})
	default:
		return "", fmt.Errorf("%w: %s is not a damage onetick can move aside", onetick.ErrNotRepairable, keyOf(d))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%s: the damage is no longer there as reported (fixed, or changed since): inspect again", keyOf(d))
	}
	if err != nil {
		return "", err
	}
	return b.table("damaged") + ":" + strconv.FormatInt(id, 10), nil
}

func keyOf(d *onetick.DamageError) string {
	if d.Field != "" {
		return d.Key + " field " + d.Field
	}
	return d.Key
}
