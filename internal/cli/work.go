package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/executor"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/relay/natsrelay"
	"github.com/onetick/onetick/worker"
)

// runJobs are the jobs of f that have a run block.
func runJobs(f *config.File) []config.Job {
	var out []config.Job
	for _, j := range f.Jobs {
		if j.Run != nil {
			out = append(out, j)
		}
	}
	return out
}

// natsJobs are the jobs of f relayed to NATS JetStream: the worker's
// relay consumer publishes their ticks.
func natsJobs(f *config.File) []config.Job {
	var out []config.Job
	for _, j := range f.Jobs {
		if j.Relay != nil && j.Relay.NATS != nil {
			out = append(out, j)
		}
	}
	return out
}

// natsRelays builds a replica's relay consumers (natsrelay.Publisher):
// one connection per connection of the file's relays.nats, shared by
// every job that names it, whether the job is the file's or was applied
// at run time; a connection of its own for a file's job that gives its
// address inline. It is safe for concurrent use.
type natsRelays struct {
	f   *config.File
	reg prometheus.Registerer

	mu    sync.Mutex
	m     *natsrelay.Metrics // registered on first use
	conns map[string]*natsrelay.Conn
	own   []*natsrelay.Publisher
}

func newNATSRelays(f *config.File, reg prometheus.Registerer) *natsRelays {
	return &natsRelays{f: f, reg: reg, conns: map[string]*natsrelay.Conn{}}
}

// publisher returns the relay consumer of j, whose relay is nats. The
// error names the job's connection, never an address or a credential.
func (r *natsRelays) publisher(j config.Job) (*natsrelay.Publisher, error) {
	n, err := r.f.NATSPublish(j.Relay.NATS)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		if r.m, err = natsrelay.NewMetrics(r.reg); err != nil {
			return nil, err
		}
	}
	cfg := natsrelay.Config{Subject: n.Subject, Stream: n.Stream, PerSubject: n.PerSubject, Prefer: onetick.Prefer(j.Prefer), Metrics: r.m}
	if n.Connection == "" {
		cfg.URL, cfg.Token, cfg.Creds = n.URL, n.Token, n.Creds
		p, err := natsrelay.New(cfg)
		if err == nil {
			r.own = append(r.own, p)
		}
		return p, err
	}
	c := r.conns[n.Connection]
	if c == nil {
		if c, err = natsrelay.NewConn(natsrelay.ConnConfig{URL: n.URL, Token: n.Token, Creds: n.Creds}); err != nil {
			return nil, fmt.Errorf("connection %s: %v", n.Connection, err)
		}
		r.conns[n.Connection] = c
	}
	cfg.Conn = c
	return natsrelay.New(cfg)
}

// close closes the connections: call it once the worker stopped.
func (r *natsRelays) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.own {
		p.Close()
	}
	for _, c := range r.conns {
		c.Close()
	}
}

// natsOptions are the worker options of a job relayed to NATS: a publish
// may overlap another (JetStream orders nothing of onetick's).
func natsOptions(j config.Job) []worker.JobOption {
	return []worker.JobOption{worker.WithStream(j.Stream), worker.WithPrefer(onetick.Prefer(j.Prefer)), worker.WithOverlap(worker.OverlapAllow)}
}

// handleNATS registers the relay consumer of each of the file's jobs with w.
func handleNATS(f *config.File, w *worker.Worker, jobs []config.Job, relays *natsRelays) error {
	for _, j := range jobs {
		p, err := relays.publisher(j)
		if err == nil {
			err = w.Handle(j.Name, p, natsOptions(j)...)
		}
		if err != nil {
			return usageError{fmt.Errorf("%s: jobs (%s).relay.nats: %v", f.Path, j.Name, err)}
		}
	}
	return nil
}

// executorOf builds the executor of a job's run block.
func executorOf(j config.Job, log *slog.Logger) (executor.Executor, error) {
	return j.Run.Executor(log)
}

// handlerOf adapts an executor to the worker: a permanent failure is
// dead-lettered at once; a Retry-After passes through; what the attempt
// reports (exit code, status, output) goes to the run ledger.
func handlerOf(x executor.Executor) worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
		err := x.Execute(ctx, executor.Run{Job: t.Job, Slot: t.Slot, Tick: t.Tick, Epoch: t.Epoch, Attempt: t.Attempt, Payload: t.Payload,
			Report: func(r onetick.Result) { worker.Report(ctx, r) }})
		if err != nil && errors.Is(err, executor.ErrPermanent) {
			return fmt.Errorf("%w (%w)", err, worker.ErrSkipRetry)
		}
		return err
	})
}

// buildWorker returns the replica's workers for the jobs that have a run
// block or a NATS relay, and, when the store keeps jobs defined at run
// time and the file allows them work here (run blocks: worker.allow_commands,
// worker.allow_http_hosts; NATS relays: a connection of relays.nats), what
// keeps the workers' registrations in line with them; none when there is
// nothing to run. closeRelays closes the relay consumers' connections:
// call it once the workers stopped.
//
// One worker with one shard. With `shards:` above 1 a job's ticks are in
// its shard's view of the store, so there is a worker per shard that has
// jobs here (every shard when jobs may come at run time), over the
// shard's worker store (stores.Handle.ShardWorkStore), handling the jobs
// onetick.ShardOf puts there; each has worker.concurrency slots, and its
// metrics carry a shard label.
func buildWorker(f *config.File, h *stores.Handle, replica string, log *slog.Logger, reg prometheus.Registerer,
	onAttempt func(context.Context, *worker.Task) (context.Context, func(worker.AttemptEnd))) ([]*worker.Worker, *runtimeRuns, func(), error) {
	none := func() {}
	jobs, relayed := runJobs(f), natsJobs(f)
	js, keeps := h.Backend().(onetick.JobStore)
	dynamic := keeps && (len(f.Worker.Allow.Commands) > 0 || len(f.Worker.Allow.HTTPHosts) > 0 || len(f.Relays.NATS) > 0)
	if len(jobs) == 0 && len(relayed) == 0 && !dynamic {
		return nil, nil, none, nil
	}
	shards := h.Shards()
	ws := make([]*worker.Worker, shards)
	relays := newNATSRelays(f, reg)
	fail := func(err error) ([]*worker.Worker, *runtimeRuns, func(), error) {
		relays.close()
		return nil, nil, none, err
	}
	for n := range shards {
		mine := func(js []config.Job) []config.Job {
			if shards == 1 {
				return js
			}
			var out []config.Job
			for _, j := range js {
				if onetick.ShardOf(j.Name, shards) == n {
					out = append(out, j)
				}
			}
			return out
		}
		jobs, relayed := mine(jobs), mine(relayed)
		if len(jobs) == 0 && len(relayed) == 0 && !dynamic {
			continue
		}
		store, err := h.ShardWorkStore(n, f.Worker.Group)
		if err != nil {
			return fail(err)
		}
		wlog, wreg := log, reg
		if shards > 1 {
			wlog = log.With("shard", n)
			if reg != nil {
				wreg = prometheus.WrapRegistererWith(prometheus.Labels{"shard": strconv.Itoa(n)}, reg)
			}
		}
		w, err := worker.New(worker.Config{Store: store, Consumer: replica, Logger: wlog, Registerer: wreg,
			Concurrency: f.Worker.Concurrency, ShutdownTimeout: f.Worker.ShutdownTimeout.D(), TakeoverIdle: f.Worker.TakeoverIdle.D(),
			HeartbeatInterval: f.Worker.Heartbeat.D(), DoneRetention: f.Worker.DoneRetention.D(), MaxDeliveries: f.Worker.MaxDeliveries,
			Dynamic: dynamic, OnAttempt: onAttempt})
		if err != nil {
			return fail(usageError{err})
		}
		for _, j := range jobs {
			x, err := executorOf(j, log)
			if err == nil {
				err = w.Handle(j.Name, handlerOf(x), runOptions(j)...)
			}
			if err != nil {
				return fail(usageError{fmt.Errorf("%s:%d: jobs (%s).run: %v", f.Path, j.Run.Line, j.Name, err)})
			}
		}
		if err := handleNATS(f, w, relayed, relays); err != nil {
			return fail(err)
		}
		ws[n] = w
	}
	var rt *runtimeRuns
	if dynamic {
		rt = newShardRuntimeRuns(f, js, ws, relays, log)
	}
	var out []*worker.Worker
	for _, w := range ws {
		if w != nil {
			out = append(out, w)
		}
	}
	return out, rt, relays.close, nil
}
