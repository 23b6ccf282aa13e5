package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/redact"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/worker"
)

// ShutdownBound is the longest a replica takes to exit after SIGTERM:
// stop firing, finish the claim in flight, release the lease.
const ShutdownBound = 10 * time.Second

// applyRedisOverride points f at the Redis of --redis or
// ONETICK_REDIS_URL (the flag wins), keeping the file's other Redis
// settings.
func applyRedisOverride(f *config.File, flagURL string, env Env) error {
	u := flagURL
	src := "--redis"
	if u == "" {
		u, src = env.Getenv("ONETICK_REDIS_URL"), "ONETICK_REDIS_URL"
	}
	if u == "" {
		return nil
	}
	if _, err := goredis.ParseURL(u); err != nil {
		return badInput("%s: invalid Redis URL %s: %s", src, redact.URL(u), redact.Error(err))
	}
	if f.Backend.Postgres != nil {
		return badInput("%s: %s uses PostgreSQL (backend.postgres); a Redis URL does not apply", src, f.Path)
	}
	if f.Backend.Etcd != nil {
		return badInput("%s: %s uses etcd (backend.etcd); a Redis URL does not apply", src, f.Path)
	}
	if r := f.Backend.Redis; r != nil && (r.Sentinel != nil || r.Cluster != nil) {
		return badInput("%s: %s names a Redis %s (backend.redis.%s); a URL does not apply", src, f.Path, r.Topology(), r.Topology())
	}
	if f.Backend.Redis == nil {
		f.Backend.Redis = &config.Redis{Prefix: config.DefaultPrefix, ClockTolerance: config.Duration(config.DefaultClockTolerance)}
	}
	f.Backend.Redis.URL = u
	return nil
}

func signals(env Env) (<-chan os.Signal, func()) {
	if env.Signals != nil {
		return env.Signals, func() {}
	}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	return ch, func() { signal.Stop(ch) }
}

func cmdRun(ctx context.Context, args []string, env Env) error {
	fs := newFlags("run", env)
	path := fs.String("config", "", "configuration file")
	listen := fs.String("listen", "", "HTTP listen address, overrides http.listen (\"off\" disables)")
	replica := fs.String("replica", "", "replica identity shown in logs and status (default host:pid:random)")
	redisURL := fs.String("redis", "", "Redis URL, overrides backend.redis.url and ONETICK_REDIS_URL")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error (debug adds each lease renewal)")
	role := fs.String("role", "", "both (schedule when leading, and work), scheduler or worker; overrides role in the file")
	data := fs.String("data", "", "the embedded backend's state file (default: backend.file.path, else $STATE_DIRECTORY/onetick.db, $XDG_STATE_HOME/onetick/onetick.db or ~/.local/state/onetick/onetick.db)")
	inMemory := fs.Bool("memory", false, "keep the embedded backend's state in memory only (lost on exit; for tests and demos)")
	prof := addProfileFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("run: unexpected argument %q", pos[0])
	}
	stopProfiles, err := prof.start()
	if err != nil {
		return badInput("%v", err)
	}
	defer stopProfiles()
	log, err := newLogger(env.Stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	c, err := check(*path, overrides{redisURL: *redisURL, listen: *listen, role: *role, data: *data, inMemory: *inMemory}, env)
	if err != nil {
		return err
	}
	f, jobs := c.f, c.jobs
	for _, w := range f.Warnings() {
		log.Warn(w.Msg, "file", w.File, "line", w.Line, "field", w.Field)
	}
	if f.Role != config.RoleScheduler {
		// Whatever can refuse an executor, before the store is touched
		// (the worker builds its own below).
		for _, j := range runJobs(f) {
			if _, err := executorOf(j, log); err != nil {
				return fmt.Errorf("%s:%d: jobs (%s).run: %v", f.Path, j.Run.Line, j.Name, err)
			}
		}
	}
	if *replica == "" {
		*replica = onetick.DefaultHolder()
	}
	base := log
	log = log.With("replica", *replica)
	var hl *httpListener
	if f.HTTP.Enabled() {
		if hl, err = listenHTTP(f, log); err != nil {
			return err
		}
		defer hl.close(time.Second)
	}

	h, err := openStore(ctx, f, stores.Options{Path: c.statePath, Memory: c.mem, Schema: stores.MigrateSchema, Logger: log, Stdout: env.Stdout})
	if err != nil {
		return err
	}
	defer h.Close()
	b := h.Backend()
	h.Announce(ctx, log)

	clock, err := testClock(env.Getenv)
	if err != nil {
		return badInput("%v", err)
	}
	if clock != nil {
		log.Warn("test build: replica clock is skewed", "offset", env.Getenv("ONETICK_TEST_CLOCK_OFFSET"))
	}
	reg := MetricsRegistry()
	tr, err := startTracing(f, *replica, log, reg)
	if err != nil {
		return err
	}
	defer tr.stop()
	source := newStoreSource(b, jobs, log)
	sched, err := onetick.New(onetick.Config{Source: source,
		Backend: b, Shards: h.Shards(), Replica: *replica, Jobs: jobs, Lease: f.LeaseConfig(), JobMetrics: f.JobMetrics(), Sink: tr.sink(h.Sink()),
		Logger: base, Registerer: reg, Clock: clock,
		OnNewLeader: func(l onetick.Lease) {
			log.Info("leader observed", "leader", l.Holder, "leader_epoch", int64(l.Epoch))
		},
	})
	if err != nil {
		return usageError{err}
	}
	// The store's shard layout before anything runs: a replica whose
	// shards differ from the store's exits 2 (a store that does not answer
	// yet is checked again when the scheduler starts).
	lctx, lcancel := context.WithTimeout(ctx, 15*time.Second)
	err = sched.CheckLayout(lctx)
	lcancel()
	if errors.Is(err, onetick.ErrLayout) {
		if l := f.ShardsLine(); l > 0 {
			return usageError{fmt.Errorf("%s:%d: %v", f.Path, l, err)}
		}
		return usageError{fmt.Errorf("%s: %v", f.Path, err)}
	}
	dw, err := deadlineWatcher(f, sched, h)
	if err != nil {
		return err
	}

	var ws []*worker.Worker
	var rt *runtimeRuns
	closeRelays := func() {}
	if f.Role != config.RoleScheduler {
		if ws, rt, closeRelays, err = buildWorker(f, h, *replica, base.With("replica", *replica), reg, tr.onAttempt()); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	if hl != nil {
		mux := handler(reg, sched, b, h.Describe, done)
		var shards *fleetOps // nil with one shard: the API's ops act on the store
		if h.Shards() > 1 {
			if shards, err = newFleetOps(h, func(v onetick.Backend) *onetick.Ops {
				return &onetick.Ops{Backend: v, Jobs: jobs, Source: source, Sink: tr.opsSink(), Metrics: sched.Metrics()}
			}); err != nil {
				return err
			}
		}
		(&api{ops: &onetick.Ops{Backend: b, Jobs: jobs, Source: source, Sink: tr.opsSink(), Metrics: sched.Metrics()}, shards: shards,
			http: f.HTTP, log: log, sched: sched, file: f, store: h}).register(mux)
		hl.serve(mux)
		switch {
		case f.HTTP.Token == "":
			log.Info("http API is read-only: set http.token to allow pause, resume, trigger and backfill")
		case !f.HTTP.Loopback():
			log.Info("http API accepts changes with the bearer token; reads from outside loopback need it too")
		}
		log.Info("http listening", "addr", hl.Addr().String(), "tls", f.HTTP.TLS.Enabled(),
			"read_timeout", f.HTTP.ReadTimeout.String(), "write_timeout", f.HTTP.WriteTimeout.String(),
			"idle_timeout", f.HTTP.IdleTimeout.String(), "max_connections", f.HTTP.MaxConnections)
	}
	log.Info("onetick started", "version", version(), "jobs", len(jobs), "role", f.Role,
		"working", len(runJobs(f)), "lease_ttl", f.Lease.TTL.D().String(), "shards", h.Shards())

	go func() {
		defer close(done)
		var wg sync.WaitGroup
		if f.Role != config.RoleWorker {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := sched.Run(runCtx); err != nil {
					log.Error("the scheduler stopped: this replica no longer fires", "err", err)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.Upkeep(runCtx)
		}()
		if dw != nil {
			wg.Add(1)
			go func() { defer wg.Done(); _ = dw.Run(runCtx) }()
		}
		if rt != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rt.run(runCtx)
			}()
		}
		var workers sync.WaitGroup
		for _, w := range ws {
			workers.Add(1)
			go func() {
				defer workers.Done()
				if err := w.Run(runCtx); err != nil {
					log.Error("worker stopped", "err", err)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers.Wait()
			closeRelays()
		}()
		wg.Wait()
	}()
	sigs, stop := signals(env)
	defer stop()
	var runErr error
	select {
	case <-done: // the parent context ended
	case sig := <-sigs:
		log.Info("signal received: stopping firing, releasing the lease", "signal", sig.String())
		cancel()
		select {
		case <-done:
		case sig := <-sigs:
			runErr = fmt.Errorf("second signal (%s): exiting at once", sig)
		case <-time.After(ShutdownBound):
			runErr = fmt.Errorf("shutdown took longer than %s: exiting", ShutdownBound)
		}
	}
	if hl != nil {
		hl.close(time.Second)
	}
	if runErr == nil {
		log.Info("onetick stopped")
	}
	return runErr
}

// MetricsRegistry returns the registry a replica serves on /metrics, before
// the scheduler adds its own metrics: the Go runtime's and the process's.
// The tests of the shipped dashboard and alert rules check their queries
// against it.
func MetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// handler serves /metrics, /healthz and /readyz: open to every client, so
// that probes and a plain Prometheus scrape work (the API adds the rest,
// the status page included).
func handler(reg *prometheus.Registry, s *onetick.Scheduler, b onetick.Backend, describe func(context.Context) string, done <-chan struct{}) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-done:
			http.Error(w, "scheduler loop stopped", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := b.Time(ctx); err != nil {
			http.Error(w, "backend unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := s.Ready(); err != nil {
			http.Error(w, "store state damaged: "+err.Error()+" (see `onetick status` and `onetick repair`)", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok:", describe(ctx))
	})
	return mux
}

type replicaStatus struct {
	*onetick.Status
	Runs     *worker.Status `json:"runs,omitempty"`
	Replica  string         `json:"replica"`
	IsLeader bool           `json:"is_leader"`
	// Problems is the damage this replica ran into and has not seen
	// repaired (Status.Damage is what the store holds now).
	Problems []onetick.Problem `json:"problems"`
}
