package cli

import (
	"context"
	"flag"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
)

// storeFlags are the flags of the commands that work on the shared store
// from outside a replica (status, repair).
type storeFlags struct {
	path, redisURL *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		path:     fs.String("config", "", "configuration file"),
		redisURL: fs.String("redis", "", "Redis URL, overrides backend.redis.url and ONETICK_REDIS_URL"),
	}
}

// open loads the configuration, applies --redis and ONETICK_REDIS_URL,
// refuses the embedded backend (it lives inside its one replica) and
// opens the store. The caller closes the backend.
func (sf storeFlags) open(ctx context.Context, name string, pos []string, env Env) (*config.File, []onetick.Job, onetick.Backend, error) {
	if len(pos) > 0 {
		return nil, nil, nil, badInput("%s: unexpected argument %q", name, pos[0])
	}
	f, err := loadConfig(*sf.path)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := applyRedisOverride(f, *sf.redisURL, env); err != nil {
		return nil, nil, nil, err
	}
	if f.Backend.Redis == nil {
		return nil, nil, nil, badInput("%s: %s has no shared backend (backend.redis): the embedded backend lives inside its one replica; ask it at http://%s/status", name, f.Path, f.HTTP.Listen)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		return nil, nil, nil, usageError{err}
	}
	b, err := openBackend(ctx, f, "")
	if err != nil {
		return nil, nil, nil, err
	}
	return f, jobs, b, nil
}
