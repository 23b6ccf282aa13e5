package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
)

// storeFlags are the flags of the commands that work on the shared store
// from outside a replica (status, repair).
type storeFlags struct {
	path, redisURL, data *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		path:     fs.String("config", "", "configuration file"),
		redisURL: fs.String("redis", "", "Redis URL, overrides backend.redis.url and ONETICK_REDIS_URL"),
		data:     fs.String("data", "", "the file store's state file, for a configuration without Redis (default as for run)"),
	}
}

// open checks the configuration as run does (check: with --redis,
// ONETICK_REDIS_URL and --data applied), refuses the in-process store (it
// lives inside its one replica) and opens the store, refusing a
// PostgreSQL schema at another version. The caller closes the handle.
func (sf storeFlags) open(ctx context.Context, name string, pos []string, env Env) (*config.File, []onetick.Job, *stores.Handle, error) {
	if len(pos) > 0 {
		return nil, nil, nil, badInput("%s: unexpected argument %q", name, pos[0])
	}
	c, err := check(*sf.path, overrides{redisURL: *sf.redisURL, data: *sf.data}, env)
	if err != nil {
		return nil, nil, nil, err
	}
	f, jobs, path := c.f, c.jobs, c.statePath
	if c.mem {
		return nil, nil, nil, badInput("%s: %s keeps its state in memory (backend.memory): it lives inside its one replica; ask it at http://%s/status", name, f.Path, f.HTTP.Listen)
	}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: no onetick state at %s (%v): start `onetick run` first, or give --data", name, path, err)
		}
	}
	h, err := openStore(ctx, f, stores.Options{Path: path, Logger: env.logger()})
	if err != nil {
		return nil, nil, nil, err
	}
	return f, jobs, h, nil
}

// openStore opens the store through the factory.
func openStore(ctx context.Context, f *config.File, o stores.Options) (*stores.Handle, error) {
	h, err := stores.Open(ctx, f, o)
	if err != nil {
		return nil, storeErr(err)
	}
	return h, nil
}

// storeErr makes a configuration that cannot open a store bad input.
func storeErr(err error) error {
	if inv := (*stores.InvalidError)(nil); errors.As(err, &inv) {
		return usageError{err}
	}
	return err
}
