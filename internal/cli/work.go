package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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

// handleNATS registers the relay consumer of each of jobs with w; close
// closes their connections once w stopped.
func handleNATS(f *config.File, w *worker.Worker, jobs []config.Job, reg prometheus.Registerer) (close func(), err error) {
	var pubs []*natsrelay.Publisher
	close = func() {
		for _, p := range pubs {
			p.Close()
		}
	}
	if len(jobs) == 0 {
		return close, nil
	}
	m, err := natsrelay.NewMetrics(reg)
	if err != nil {
		return close, err
	}
	for _, j := range jobs {
		n := j.Relay.NATS
		p, err := natsrelay.New(natsrelay.Config{URL: n.URL, Token: n.Token, Creds: n.Creds, Subject: n.Subject, Stream: n.Stream,
			PerSubject: n.PerSubject, Prefer: onetick.Prefer(j.Prefer), Metrics: m})
		if err == nil {
			pubs = append(pubs, p)
			err = w.Handle(j.Name, p, worker.WithStream(j.Stream), worker.WithPrefer(onetick.Prefer(j.Prefer)),
				worker.WithOverlap(worker.OverlapAllow))
		}
		if err != nil {
			return close, usageError{fmt.Errorf("%s: jobs (%s).relay.nats: %v", f.Path, j.Name, err)}
		}
	}
	return close, nil
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

// buildWorker returns the replica's worker for the jobs that have a run
// block or a NATS relay, and, when the file allows run blocks in jobs defined at run time
// (worker.allow_commands, worker.allow_http_hosts) and the store keeps
// such jobs, what keeps the worker's registrations in line with them; nil
// when there is nothing to run. closeRelays closes the relay consumers'
// connections: call it once the worker stopped.
func buildWorker(f *config.File, h *stores.Handle, replica string, log *slog.Logger, reg prometheus.Registerer,
	onAttempt func(context.Context, *worker.Task) (context.Context, func(worker.AttemptEnd))) (*worker.Worker, *runtimeRuns, func(), error) {
	none := func() {}
	jobs, relayed := runJobs(f), natsJobs(f)
	js, keeps := h.Backend().(onetick.JobStore)
	dynamic := keeps && (len(f.Worker.Allow.Commands) > 0 || len(f.Worker.Allow.HTTPHosts) > 0)
	if len(jobs) == 0 && len(relayed) == 0 && !dynamic {
		return nil, nil, none, nil
	}
	store, err := h.WorkStore(f.Worker.Group)
	if err != nil {
		return nil, nil, none, err
	}
	w, err := worker.New(worker.Config{Store: store, Consumer: replica, Logger: log, Registerer: reg,
		Concurrency: f.Worker.Concurrency, ShutdownTimeout: f.Worker.ShutdownTimeout.D(), TakeoverIdle: f.Worker.TakeoverIdle.D(),
		HeartbeatInterval: f.Worker.Heartbeat.D(), DoneRetention: f.Worker.DoneRetention.D(), MaxDeliveries: f.Worker.MaxDeliveries,
		Dynamic: dynamic, OnAttempt: onAttempt})
	if err != nil {
		return nil, nil, none, usageError{err}
	}
	for _, j := range jobs {
		x, err := executorOf(j, log)
		if err == nil {
			err = w.Handle(j.Name, handlerOf(x), runOptions(j)...)
		}
		if err != nil {
			return nil, nil, none, usageError{fmt.Errorf("%s:%d: jobs (%s).run: %v", f.Path, j.Run.Line, j.Name, err)}
		}
	}
	closeRelays, err := handleNATS(f, w, relayed, reg)
	if err != nil {
		closeRelays()
		return nil, nil, none, err
	}
	var rt *runtimeRuns
	if dynamic {
		rt = newRuntimeRuns(f, js, w, log)
	}
	return w, rt, closeRelays, nil
}
