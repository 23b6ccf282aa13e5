package stores

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	otpostgres "github.com/onetick/onetick/postgres"
)

// Migrate brings the schema of the store f names (the embedded one of o
// without a shared store) to this onetick's version and says what it
// did, in one line. Only PostgreSQL has a schema to migrate by command;
// the file store migrates itself when opened, and Redis and the
// in-process store keep none. o.Schema is not used.
func Migrate(ctx context.Context, f *config.File, o Options) (string, error) {
	switch {
	case f.Backend.Postgres != nil:
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		b, err := openPostgresBackend(mctx, f, CheckSchema, onetick.LedgerRetention{})
		if err == nil {
			_ = b.Close()
			return fmt.Sprintf("schema %s at %s is at version %d: nothing to do", f.Backend.Postgres.Schema, f.MaskedPostgresURL(), otpostgres.LatestVersion()), nil
		}
		b, err = openPostgresBackend(mctx, f, MigrateSchema, onetick.LedgerRetention{})
		if err != nil {
			return "", err
		}
		defer b.Close()
		v, err := b.SchemaVersion(mctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("schema %s at %s migrated to version %d", b.Schema(), f.MaskedPostgresURL(), v), nil
	case f.Backend.Redis != nil:
		return f.MaskedStore() + ": Redis keeps no schema: nothing to migrate", nil
	case f.Backend.Etcd != nil:
		return f.MaskedStore() + ": etcd keeps no schema: nothing to migrate", nil
	case o.Memory:
		return "the memory store keeps nothing: nothing to migrate", nil
	}
	if _, err := os.Stat(o.Path); err != nil {
		return fmt.Sprintf("no onetick state at %s yet: `onetick run` creates it at the current version", o.Path), nil
	}
	h, err := openFile(o) // the file store migrates when opened
	if err != nil {
		return "", err
	}
	_ = h.Close()
	return fmt.Sprintf("%s is at the current version (the file store migrates itself when opened)", o.Path), nil
}
