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
	"github.com/onetick/onetick/memory"
	otpostgres "github.com/onetick/onetick/postgres"
	"github.com/onetick/onetick/sqlite"
	"github.com/onetick/onetick/worker"
)

// workStore is a backend's worker store: the worker's half and the
// inspection the CLI uses (dead letters, last runs).
type workStore interface {
	worker.Store
	worker.Inspector
}

// workStoreOf returns b's worker store for group.
func workStoreOf(b onetick.Backend, group string) (workStore, error) {
	switch x := b.(type) {
	case ownedRedis:
		return x.Backend.WorkerStore(group), nil
	case *memory.Backend:
		return x.WorkerStore(group), nil
	case *sqlite.Backend:
		return x.WorkerStore(group), nil
	case *otpostgres.Backend:
		return x.WorkerStore(group), nil
	}
	return nil, fmt.Errorf("the %T backend has no worker store", b)
}

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

// executorOf builds the executor of a job's run block.
func executorOf(j config.Job, log *slog.Logger) (executor.Executor, error) {
	return j.Run.Executor(log)
}

// handlerOf adapts an executor to the worker: a permanent failure is
// dead-lettered at once; a Retry-After passes through.
func handlerOf(x executor.Executor) worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
		err := x.Execute(ctx, executor.Run{Job: t.Job, Slot: t.Slot, Tick: t.Tick, Epoch: t.Epoch, Attempt: t.Attempt, Payload: t.Payload})
		if err != nil && errors.Is(err, executor.ErrPermanent) {
			return fmt.Errorf("%w (%w)", err, worker.ErrSkipRetry)
		}
		return err
	})
}

// buildWorker returns the replica's worker for the jobs that have a run
// block, or nil when none has.
func buildWorker(f *config.File, b onetick.Backend, replica string, log *slog.Logger, reg prometheus.Registerer) (*worker.Worker, error) {
	jobs := runJobs(f)
	if len(jobs) == 0 {
		return nil, nil
	}
	store, err := workStoreOf(b, f.Worker.Group)
	if err != nil {
		return nil, err
	}
	w, err := worker.New(worker.Config{Store: store, Consumer: replica, Logger: log, Registerer: reg,
		Concurrency: f.Worker.Concurrency, ShutdownTimeout: f.Worker.ShutdownTimeout.D(), TakeoverIdle: f.Worker.TakeoverIdle.D(),
		HeartbeatInterval: f.Worker.Heartbeat.D(), DoneRetention: f.Worker.DoneRetention.D(), MaxDeliveries: f.Worker.MaxDeliveries})
	if err != nil {
		return nil, usageError{err}
	}
	for _, j := range jobs {
		x, err := executorOf(j, log)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s:%d: jobs (%s).run: %v", f.Path, j.Run.Line, j.Name, err)}
		}
		r := j.Run
		err = w.Handle(j.Name, handlerOf(x),
			worker.WithStream(j.Stream),
			worker.WithMaxAttempts(r.MaxAttempts),
			worker.WithBackoff(worker.ExponentialBackoff(r.Backoff.D(), r.MaxBackoff.D())),
			worker.WithOverlap(worker.Overlap(r.Overlap)),
			worker.WithPrefer(onetick.Prefer(j.Prefer)),
			worker.WithMaxWaiting(j.MaxCatchup))
		if err != nil {
			return nil, usageError{fmt.Errorf("%s:%d: jobs (%s).run: %v", f.Path, j.Run.Line, j.Name, err)}
		}
	}
	return w, nil
}
