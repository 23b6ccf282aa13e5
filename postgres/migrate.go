package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded files "NNN_name.sql", in version order.
var migrations = func() []migration {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var out []migration
	for _, f := range files {
		base := strings.TrimPrefix(f, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("postgres: migration file " + f + " is not named NNN_name.sql")
		}
		body, err := migrationFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, name: base, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			panic(fmt.Sprintf("postgres: migration %s: want version %d", m.name, i+1))
		}
	}
	return out
}()

// LatestVersion is the schema version this code migrates to.
func LatestVersion() int { return len(migrations) }

// Migrate creates the schema if it does not exist and applies the
// migrations it lacks, with their version records, in one transaction. Replicas may call it at the same time: a transaction-scoped
// advisory lock per schema lets one apply at a time, and the others find
// the work done. It refuses a schema that a newer onetick migrated.
func (b *Backend) Migrate(ctx context.Context) error { return b.migrateTo(ctx, len(migrations)) }

// migrateTo is Migrate up to version want (the tests build older schemas
// with it).
func (b *Backend) migrateTo(ctx context.Context, want int) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, b.lockKey("migrate")); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, b.q(`CREATE SCHEMA IF NOT EXISTS {s}`)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, b.q(`CREATE TABLE IF NOT EXISTS {s}.schema_migrations (
			version integer PRIMARY KEY,
			name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`)); err != nil {
			return err
		}
		var cur int
		if err := tx.QueryRow(ctx, b.q(`SELECT coalesce(max(version), 0) FROM {s}.schema_migrations`)).Scan(&cur); err != nil {
			return err
		}
		if cur > len(migrations) {
			return fmt.Errorf("postgres: schema %s is at version %d, newer than this onetick's %d: upgrade onetick", b.opts.Schema, cur, len(migrations))
		}
		for _, m := range migrations[min(cur, want):want] {
			if _, err := tx.Exec(ctx, b.q(m.sql)); err != nil {
				return fmt.Errorf("postgres: migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, b.q(`INSERT INTO {s}.schema_migrations (version, name) VALUES ($1, $2)`), m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
}

// SchemaVersion returns the version the schema is at (0: not created).
func (b *Backend) SchemaVersion(ctx context.Context) (int, error) {
	var exists bool
	if err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, b.ident+".schema_migrations").Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := b.pool.QueryRow(ctx, b.q(`SELECT coalesce(max(version), 0) FROM {s}.schema_migrations`)).Scan(&v)
	return v, err
}
