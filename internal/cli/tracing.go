package cli

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/tracing"
	"github.com/onetick/onetick/worker"
)

// replicaTracer is the replica's tracer, nil when the file has no tracing
// section; its methods are safe on nil.
type replicaTracer struct {
	t   *tracing.Tracer
	log *slog.Logger
}

// startTracing starts the tracer of the file's tracing section (nil
// without one). It connects to nothing yet.
func startTracing(f *config.File, replica string, log *slog.Logger, reg prometheus.Registerer) (*replicaTracer, error) {
	tc := f.Tracing
	if !tc.Enabled() {
		return nil, nil
	}
	t, err := tracing.New(tracing.Config{URL: tc.ExportURL(), Headers: tc.Headers, SampleRatio: tc.SampleRatio,
		ServiceName: tc.ServiceName, Instance: replica, Version: version(), Timeout: tc.Timeout.D(),
		Logger: log, Registerer: reg})
	if err != nil {
		return nil, usageError{err}
	}
	// The URL holds no credentials (config refuses them); headers are
	// named, never shown.
	log.Info("tracing: a trace per tick", "url", tc.ExportURL(), "sample_ratio", tc.SampleRatio,
		"service_name", tc.ServiceName, "headers", len(tc.Headers))
	return &replicaTracer{t: t, log: log}, nil
}

// sink wraps the scheduler's sink with the claim spans.
func (r *replicaTracer) sink(s onetick.Sink) onetick.Sink {
	if r == nil {
		return s
	}
	return r.t.Sink(s)
}

// opsSink gives the claim spans of triggers and backfills (Ops.Sink),
// nil without tracing.
func (r *replicaTracer) opsSink() onetick.Sink {
	if r == nil {
		return nil
	}
	return r.t.Sink(nil)
}

// onAttempt is the worker's hook, nil without tracing.
func (r *replicaTracer) onAttempt() func(context.Context, *worker.Task) (context.Context, func(worker.AttemptEnd)) {
	if r == nil {
		return nil
	}
	return r.t.OnAttempt
}

// stop exports what is left, within the section's timeout.
func (r *replicaTracer) stop() {
	if r == nil {
		return
	}
	if err := r.t.Shutdown(context.Background()); err != nil {
		r.log.Warn("tracing: the last spans were not all exported", "err", err)
	}
}
