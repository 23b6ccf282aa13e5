package cli

import (
	"context"

	"github.com/onetick/onetick/internal/stores"
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
	msg, err := stores.Migrate(ctx, c.f, stores.Options{Path: c.statePath, Memory: c.mem, Logger: env.logger()})
	if err != nil {
		return storeErr(err)
	}
	fprintf(env.Stdout, "%s\n", msg)
	return nil
}
