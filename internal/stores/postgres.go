package stores

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	otpostgres "github.com/onetick/onetick/postgres"
)

// openPostgres opens the PostgreSQL backend. With MigrateSchema it brings
// the schema to the latest version (safe when replicas start together:
// Migrate holds an advisory lock); with CheckSchema it refuses a schema
// that is not at that version, so a newer CLI never migrates under a
// running fleet.
func openPostgres(ctx context.Context, f *config.File, o Options) (*Handle, error) {
	b, err := openPostgresBackend(ctx, f, o.Schema, o.ledger)
	if err != nil {
		return nil, err
	}
	h := &Handle{backend: b, close: b.Close,
		desc:     Description{Kind: Postgres, Address: f.MaskedPostgresURL(), Schema: b.Schema()},
		work:     func(group string) WorkStore { return b.WorkerStore(group) },
		viewWork: viewWorkStore[*otpostgres.Backend, *otpostgres.WorkerStore](Postgres),
	}
	h.describe = func(ctx context.Context) string { return describePostgres(ctx, f, b) }
	h.announce = func(ctx context.Context, log *slog.Logger) {
		log.Info("using PostgreSQL", "store", h.describe(ctx))
	}
	h.upkeep = func(ctx context.Context) { prunePeriodically(ctx, b, o.Logger) }
	return h, nil
}

// openPostgresBackend opens the backend with the ledger's retention
// (Options.ledger; none needed to migrate).
func openPostgresBackend(ctx context.Context, f *config.File, mode SchemaMode, ledger onetick.LedgerRetention) (*otpostgres.Backend, error) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := f.PostgresOptions()
	opts.Ledger = ledger
	b, err := otpostgres.Open(pctx, f.Backend.Postgres.URL, opts)
	if err != nil {
		return nil, invalid(err)
	}
	if err := b.Ping(pctx); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s: %v", f.MaskedPostgresURL(), err)
	}
	if mode == MigrateSchema {
		if err := b.Migrate(pctx); err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("migrating schema %s at %s: %v", b.Schema(), f.MaskedPostgresURL(), err)
		}
		return b, nil
	}
	v, err := b.SchemaVersion(pctx)
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("reading the schema version of %s at %s: %v", b.Schema(), f.MaskedPostgresURL(), err)
	}
	if want := otpostgres.LatestVersion(); v != want {
		_ = b.Close()
		return nil, fmt.Errorf("schema %s at %s is at version %d, this onetick uses version %d: run `onetick migrate --config %s` (or start `onetick run`, which migrates)", b.Schema(), f.MaskedPostgresURL(), v, want, f.Path)
	}
	return b, nil
}

// describePostgres names the database, its server and whether it is a
// primary (a replica in recovery cannot take writes).
func describePostgres(ctx context.Context, f *config.File, b *otpostgres.Backend) string {
	out := f.MaskedStore()
	var version string
	var recovery bool
	err := b.Pool().QueryRow(ctx, `SELECT current_setting('server_version'), pg_is_in_recovery()`).Scan(&version, &recovery)
	if err != nil {
		return out + " (unreachable: " + err.Error() + ")"
	}
	role := "primary"
	if recovery {
		role = "standby (read-only: claims will fail)"
	}
	return out + ", PostgreSQL " + version + " " + role
}

// prunePeriodically deletes expired PostgreSQL rows every minute (what
// Redis expires by itself). Every replica does it; two deleting the same
// rows is harmless.
func prunePeriodically(ctx context.Context, b *otpostgres.Backend, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, err := b.Prune(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("pruning expired rows failed", "err", err)
		case err == nil:
			log.Debug("pruned expired rows", "pruned", fmt.Sprintf("%+v", p))
		}
	}
}
