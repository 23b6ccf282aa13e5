package cli

import (
	"fmt"

	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/sqlite"
)

// loadConfig loads --config; every problem is bad input.
func loadConfig(path string) (*config.File, error) {
	if path == "" {
		return nil, badInput("--config FILE is required")
	}
	f, err := config.Load(path)
	if err != nil {
		return nil, usageError{err}
	}
	return f, nil
}

// cmdValidate checks the file and every schedule without touching the
// backend.
func cmdValidate(args []string, env Env) error {
	fs := newFlags("validate", env)
	path := fs.String("config", "", "configuration file")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if _, err := f.OneTickJobs(); err != nil {
		return usageError{err}
	}
	if _, err := f.TLSConfig(); err != nil {
		return usageError{err}
	}
	backend := "embedded (file store, single replica)"
	switch {
	case f.Shared():
		backend = f.MaskedStore()
	case f.Backend.Memory:
		backend = "embedded (in-process, single replica)"
	default:
		// The file store's file and directory, if they exist: a stat,
		// not an open.
		if p, _, err := embedded(f, "", false, env); err == nil {
			for _, x := range sqlite.Exposed(p) {
				fmt.Fprintf(env.Stderr, "%s: warning: %s\n", f.Path, x)
			}
		}
	}
	fmt.Fprintf(env.Stdout, "%s: ok: %d jobs, backend %s, lease ttl %s renew %s\n",
		f.Path, len(f.Jobs), backend, f.Lease.TTL, f.Lease.Renew)
	return nil
}
