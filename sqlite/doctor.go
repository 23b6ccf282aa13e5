package sqlite

import (
	"context"
	"fmt"

	"github.com/onetick/onetick"
)

// Inspect implements onetick.Doctor. The tables' types and constraints
// leave no room for the damage the Redis backend finds (a key of another
// type, a value that does not parse), so what can be damaged is the file
// itself: Inspect runs SQLite's integrity check over all of it and
// reports each problem it names. It writes nothing.
func (b *Backend) Inspect(ctx context.Context, _ map[string]string) ([]*onetick.DamageError, error) {
	var out []*onetick.DamageError
	err := b.read(ctx, func(o *op) error {
		rows, err := o.tx.QueryContext(o.ctx, "PRAGMA quick_check(100)")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			if s != "ok" {
				out = append(out, &onetick.DamageError{Kind: onetick.DamageValue, Key: b.path, Reason: s})
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Repair implements onetick.Doctor. A damaged file is not onetick's to
// patch: restore it from a backup (or let SQLite's own .recover salvage
// it into a new file).
func (b *Backend) Repair(_ context.Context, d *onetick.DamageError, _ bool) (string, error) {
	key := ""
	if d != nil {
		key = d.Key
	}
	return "", fmt.Errorf("%w: %s: restore the file from a backup, or salvage it with sqlite3's .recover into a new file", onetick.ErrNotRepairable, key)
}
