package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	otpostgres "github.com/onetick/onetick/postgres"
)

// cmdMigrate brings the configured store's schema to this onetick's
// version. Only PostgreSQL has a schema to migrate by command; the file
// store migrates itself when opened, and Redis keeps no schema.
func cmdMigrate(ctx context.Context, args []string, env Env) error {
	fs := newFlags("migrate", env)
	sf := addStoreFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("migrate: unexpected argument %q", pos[0])
	}
	c, err := check(*sf.path, overrides{redisURL: *sf.redisURL, data: *sf.data}, env)
	if err != nil {
		return err
	}
	f := c.f
	switch {
	case f.Backend.Postgres != nil:
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		b, err := openPostgres(mctx, f, false)
		if err == nil {
			_ = b.Close()
			fprintf(env.Stdout, "schema %s at %s is at version %d: nothing to do\n", f.Backend.Postgres.Schema, f.MaskedPostgresURL(), otpostgres.LatestVersion())
			return nil
		}
		b, err = openPostgres(mctx, f, true)
		if err != nil {
			return err
		}
		defer b.Close()
		v, err := b.SchemaVersion(mctx)
		if err != nil {
			return err
		}
		fprintf(env.Stdout, "schema %s at %s migrated to version %d\n", b.Schema(), f.MaskedPostgresURL(), v)
		return nil
	case f.Backend.Redis != nil:
		fprintf(env.Stdout, "%s: Redis keeps no schema: nothing to migrate\n", f.MaskedStore())
		return nil
	}
	p := c.statePath
	if c.mem {
		fmt.Fprintln(env.Stdout, "the memory store keeps nothing: nothing to migrate")
		return nil
	}
	if _, err := os.Stat(p); err != nil {
		fprintf(env.Stdout, "no onetick state at %s yet: `onetick run` creates it at the current version\n", p)
		return nil
	}
	b, err := openBackend(ctx, f, p, env.logger()) // the file store migrates when opened
	if err != nil {
		return err
	}
	_ = b.Close()
	fprintf(env.Stdout, "%s is at the current version (the file store migrates itself when opened)\n", p)
	return nil
}
