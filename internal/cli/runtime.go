package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/executor"
	"github.com/onetick/onetick/worker"
)

// Jobs defined at run time may carry a run block (within the allow-list
// of the configuration file, config.Allow) or a NATS relay (naming a
// connection of the configuration file's relays.nats). Every worker reads
// their definitions when the jobs' version changes (checked every second,
// as the leader does), builds the executor (or the relay consumer) of
// each definition this replica's own file allows, and registers the job
// with its worker without a restart; a job removed or no longer allowed
// is unregistered. A relay's address and credentials come from this
// replica's file, looked up by the connection's name: the definition in
// the store holds neither.
//
// A tick carries its job's definition version (onetick.Job.Version), so
// it runs (is published) with the definition it was claimed under: a
// worker keeps the handlers of the last few versions of each job. A tick whose version
// this worker never saw (the definition changed again, or the job was
// removed, before this worker read it) is not run with another
// definition: it goes to the dead letters, saying so, and `onetick dead
// replay` runs it with the current one. A tick without a version (a
// replayed one) runs with the current definition.

// keptVersions is how many definitions of one job a worker keeps.
const keptVersions = 8

// runtimeRuns keeps the handlers of the run-time jobs of one worker.
type runtimeRuns struct {
	js onetick.JobStore
	// ws are the workers, one per shard (a job is registered with its
	// shard's, onetick.ShardOf); one without shards.
	ws    []*worker.Worker
	allow config.Allow
	file  *config.File // the allow-list's and the connections' file
	nats  *natsRelays
	log   *slog.Logger
	build func(config.Job, *slog.Logger) (executor.Executor, error)

	mu      sync.Mutex
	read    bool
	version int64
	jobs    map[string]*runtimeJob
	refused map[string]string // job -> the reason logged last
}

// runtimeJob is one run-time job's definitions, newest first.
type runtimeJob struct {
	current  string // version of the definition in the store; "" once removed
	opts     string // the registration's options, to tell when they change
	versions []string
	byVer    map[string]worker.Handler
}

func newRuntimeRuns(f *config.File, js onetick.JobStore, w *worker.Worker, relays *natsRelays, log *slog.Logger) *runtimeRuns {
	return newShardRuntimeRuns(f, js, []*worker.Worker{w}, relays, log)
}

// newShardRuntimeRuns is newRuntimeRuns with a worker per shard (ws[n]
// works shard n's jobs).
func newShardRuntimeRuns(f *config.File, js onetick.JobStore, ws []*worker.Worker, relays *natsRelays, log *slog.Logger) *runtimeRuns {
	a := f.Worker.Allow
	a.Path = f.Path
	return &runtimeRuns{js: js, ws: ws, allow: a, file: f, nats: relays, log: log, build: executorOf,
		jobs: map[string]*runtimeJob{}, refused: map[string]string{}}
}

// run refreshes every second until ctx is done.
func (r *runtimeRuns) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("jobs defined at run time could not be read; the worker keeps what it has", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refresh reads the definitions when their version changed and brings
// the worker's registrations in line.
func (r *runtimeRuns) refresh(ctx context.Context) error {
	v, err := r.js.JobsVersion(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	same := r.read && v == r.version
	r.mu.Unlock()
	if same {
		return nil
	}
	stored, v, err := r.js.StoredJobs(ctx)
	if err != nil {
		return err
	}
	fileJobs := map[string]bool{}
	for _, j := range r.file.Jobs {
		fileJobs[j.Name] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, sj := range stored {
		if fileJobs[sj.Name] {
			continue // the file's definition wins; the scheduler logs the clash
		}
		oj, cj, err := config.JobFromDef(sj.Def)
		if err != nil || (cj.Run == nil && !natsRelayed(cj)) {
			continue // not ours to work (the scheduler logs a definition it cannot use)
		}
		cj.Stream, cj.Prefer = oj.Stream, string(oj.Prefer) // with the defaults the scheduler uses
		if problems := r.check(cj); len(problems) > 0 {
			r.refuseLocked(cj.Name, strings.Join(problems, "; "))
			continue
		}
		ver := config.DefVersion(sj.Def)
		rj := r.jobs[cj.Name]
		if rj == nil {
			rj = &runtimeJob{byVer: map[string]worker.Handler{}}
		}
		if _, ok := rj.byVer[ver]; !ok {
			h, err := r.handler(cj)
			if err != nil {
				r.refuseLocked(cj.Name, err.Error())
				continue
			}
			rj.byVer[ver] = h
			rj.versions = append([]string{ver}, rj.versions...)
			for len(rj.versions) > keptVersions {
				delete(rj.byVer, rj.versions[len(rj.versions)-1])
				rj.versions = rj.versions[:len(rj.versions)-1]
			}
		}
		rj.current = ver
		seen[cj.Name] = true
		delete(r.refused, cj.Name)
		if err := r.registerLocked(cj, rj); err != nil {
			r.refuseLocked(cj.Name, err.Error())
			delete(seen, cj.Name)
			continue
		}
		r.jobs[cj.Name] = rj
	}
	for name, rj := range r.jobs {
		if !seen[name] && rj.current != "" {
			// Removed (or no longer allowed): ticks claimed before still run
			// with the versions kept; none come after.
			rj.current = ""
			r.log.Info("job defined at run time removed; ticks claimed before it still run", "job", name)
		}
	}
	r.version, r.read = v, true
	return nil
}

// natsRelayed reports whether j is relayed to NATS JetStream.
func natsRelayed(j config.Job) bool { return j.Relay != nil && j.Relay.NATS != nil }

// check says, one message per problem, why this worker may not work j:
// a run block outside the allow-list, a relay without a connection (a
// definition in the store never says where or how to connect).
func (r *runtimeRuns) check(j config.Job) []string {
	if j.Run != nil {
		return r.allow.CheckRun(j.Name, j.Run)
	}
	if natsRelayed(j) && j.Relay.NATS.Connection == "" {
		return []string{fmt.Sprintf("job %q: relay.nats names no connection: a job defined at run time names one of relays.nats in %s", j.Name, r.file.Path)}
	}
	return nil
}

// handler builds the handler of one definition of j: its executor, or
// its relay consumer on this replica's connection.
func (r *runtimeRuns) handler(j config.Job) (worker.Handler, error) {
	if j.Run == nil {
		p, err := r.nats.publisher(j)
		if err != nil {
			return nil, fmt.Errorf("relay.nats: %v", err)
		}
		return p, nil
	}
	x, err := r.build(j, r.log)
	if err != nil {
		return nil, err
	}
	return handlerOf(x), nil
}

// registerLocked registers job with the worker, or registers it again
// when the options of its run block (or relay) changed.
func (r *runtimeRuns) registerLocked(j config.Job, rj *runtimeJob) error {
	var opts string
	var options []worker.JobOption
	if ru := j.Run; ru != nil {
		opts = fmt.Sprintf("run|%s|%d|%s|%s|%s|%s|%d", j.Stream, ru.MaxAttempts, ru.Backoff, ru.MaxBackoff, ru.Overlap, j.Prefer, j.MaxCatchup)
		options = runOptions(j)
	} else {
		opts = fmt.Sprintf("nats|%s|%s", j.Stream, j.Prefer)
		options = natsOptions(j)
	}
	if rj.opts == opts {
		return nil
	}
	name := j.Name
	err := r.worker(name).Set(name, worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
		h, err := r.versionHandler(ctx, name, t.Version)
		if err != nil {
			return fmt.Errorf("%w (%w)", err, worker.ErrSkipRetry)
		}
		return h.Work(ctx, t)
	}), options...)
	if err != nil {
		return err
	}
	if rj.opts == "" {
		what := "its worker runs it"
		if j.Run == nil {
			what = "its worker publishes its ticks to jetstream"
		}
		r.log.Info("job defined at run time: "+what, "job", name, "version", rj.current)
	}
	rj.opts = opts
	return nil
}

func (r *runtimeRuns) refuseLocked(job, why string) {
	if r.refused[job] == why {
		return
	}
	r.refused[job] = why
	r.log.Error("a job defined at run time is not run by this worker", "job", job, "reason", why)
}

// errUnknownVersion: a tick's definition is no longer known here.
var errUnknownVersion = errors.New("the definition this tick was claimed under is no longer known to this worker")

// versionHandler returns the handler of job's definition version ver (the
// current one for ""), reading the store once more when it is not known.
func (r *runtimeRuns) versionHandler(ctx context.Context, job, ver string) (worker.Handler, error) {
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		rj := r.jobs[job]
		var x worker.Handler
		if rj != nil {
			want := ver
			if want == "" {
				want = rj.current
			}
			x = rj.byVer[want]
		}
		r.mu.Unlock()
		if x != nil {
			return x, nil
		}
		if attempt > 0 {
			break
		}
		r.mu.Lock()
		r.read = false
		r.mu.Unlock()
		if err := r.refresh(ctx); err != nil {
			return nil, fmt.Errorf("job %s: reading its definition: %w", job, err)
		}
	}
	if ver == "" {
		return nil, fmt.Errorf("job %s is no longer defined (or not allowed on this worker)", job)
	}
	return nil, fmt.Errorf("job %s version %s: %w (changed or removed before the tick ran); `onetick dead replay` runs it with the current definition", job, ver, errUnknownVersion)
}

// runOptions are a job's worker options, from its run block and its
// preference.
func runOptions(j config.Job) []worker.JobOption {
	r := j.Run
	return []worker.JobOption{
		worker.WithStream(j.Stream),
		worker.WithMaxAttempts(r.MaxAttempts),
		worker.WithBackoff(worker.ExponentialBackoff(r.Backoff.D(), r.MaxBackoff.D())),
		worker.WithOverlap(worker.Overlap(r.Overlap)),
		worker.WithPrefer(onetick.Prefer(j.Prefer)),
		worker.WithMaxWaiting(j.MaxCatchup),
	}
}

// versions lists, for tests, each job's known versions, newest first.
func (r *runtimeRuns) versions() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for n, rj := range r.jobs {
		out[n] = append([]string(nil), rj.versions...)
	}
	return out
}

// worker is the worker of job's shard.
func (r *runtimeRuns) worker(job string) *worker.Worker {
	return r.ws[onetick.ShardOf(job, len(r.ws))]
}
