package cli

import (
	"fmt"
	"net"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
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

// overrides are run's flags that change what the configuration says
// (validate has none of them, and so checks the file as run without flags
// would).
type overrides struct {
	redisURL, listen, role, data string
	inMemory                     bool
}

// checked is a configuration checked as `run` checks it before it touches
// the store.
type checked struct {
	f    *config.File
	jobs []onetick.Job
	// statePath is the file store's file ("" for a shared store and for
	// the in-process one, mem).
	statePath string
	mem       bool
}

// check loads the configuration and applies o and the environment
// (ONETICK_REDIS_URL) to it, then runs every check `run` runs before it
// opens the store: the file's (which include the executors' own, see
// config.Run.Executor), the flags', the schedules', the TLS files'. Both
// validate and run call it, so validate accepts exactly what run would
// start with. Every problem is bad input.
func check(path string, o overrides, env Env) (*checked, error) {
	f, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := applyRedisOverride(f, o.redisURL, env); err != nil {
		return nil, err
	}
	if o.listen != "" {
		if o.listen != config.ListenOff {
			if _, _, err := net.SplitHostPort(o.listen); err != nil {
				return nil, badInput("--listen: want host:port or off, got %q", o.listen)
			}
		}
		f.HTTP.Listen = o.listen
	}
	switch o.role {
	case "":
	case config.RoleBoth, config.RoleScheduler, config.RoleWorker:
		f.Role = o.role
	default:
		return nil, badInput("--role: must be both, scheduler or worker, got %q", o.role)
	}
	if (o.data != "" || o.inMemory) && f.Shared() {
		return nil, badInput("--data and --memory choose the embedded backend, and %s uses %s", f.Path, f.MaskedStore())
	}
	c := &checked{f: f}
	if !f.Shared() {
		if c.statePath, c.mem, err = stores.Embedded(f, o.data, o.inMemory, env.Getenv); err != nil {
			return nil, storeErr(err)
		}
		if !c.mem {
			if err := f.FileStoreShards(); err != nil {
				return nil, usageError{err}
			}
		}
		if c.mem && f.Role != config.RoleBoth {
			return nil, badInput("--role %s: the in-process store lives inside its one replica, which must both schedule and work", f.Role)
		}
	}
	if c.jobs, err = f.OneTickJobs(); err != nil {
		return nil, usageError{err}
	}
	if _, err := f.TLSConfig(); err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// cmdValidate checks the file as run would, without touching the backend:
// `FILE:LINE: FIELD: message` per problem (exit 2), a line per warning.
func cmdValidate(args []string, env Env) error {
	fs := newFlags("validate", env)
	path := fs.String("config", "", "configuration file")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("validate: unexpected argument %q", pos[0])
	}
	c, err := check(*path, overrides{}, env)
	if err != nil {
		return err
	}
	f := c.f
	if _, err := f.LoadHTTPCertificate(); err != nil {
		return usageError{err}
	}
	for _, w := range f.Warnings() {
		w.Msg = "warning: " + w.Msg
		fmt.Fprintln(env.Stderr, printable(w.Error()))
	}
	backend := "embedded (file store " + c.statePath + ", single replica)"
	switch {
	case f.Shared():
		backend = f.MaskedStore()
	case c.mem:
		backend = "embedded (in-process, single replica)"
	default:
		// The file store's file and directory, if they exist: a stat,
		// not an open.
		if p, _, err := stores.Embedded(f, "", false, env.Getenv); err == nil {
			for _, x := range stores.Exposed(p) {
				fmt.Fprintf(env.Stderr, "%s: warning: %s\n", f.Path, x)
			}
		}
	}
	fmt.Fprintf(env.Stdout, "%s: ok: %d jobs, backend %s, lease ttl %s renew %s\n",
		f.Path, len(f.Jobs), printable(backend), f.Lease.TTL, f.Lease.Renew)
	return nil
}
