package tracing

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type metrics struct {
	exported, dropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) metrics {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracing_spans_total",
		Help: "Spans of sampled ticks by what became of them: exported (the collector took them) or dropped (the export failed after its retries, or 2048 spans were already waiting).",
	}, []string{"result"})
	if reg != nil {
		if err := reg.Register(v); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				v = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return metrics{exported: v.WithLabelValues("exported"), dropped: v.WithLabelValues("dropped")}
}

// gate stands before the batch processor and keeps at most max spans in
// it (waiting, batched or being exported): a span beyond that is dropped
// here and counted, where the batch processor would drop it uncounted.
// The batch processor's queue holds at most what is in flight, so with
// its queue as large as max it never drops one itself.
type gate struct {
	next     sdktrace.SpanProcessor
	max      int64
	inflight atomic.Int64
	closed   atomic.Bool
	dropped  prometheus.Counter
}

func (g *gate) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (g *gate) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if g.closed.Load() {
		g.dropped.Inc() // ended after Shutdown
		return
	}
	if g.inflight.Add(1) > g.max {
		g.inflight.Add(-1)
		g.dropped.Inc()
		return
	}
	g.next.OnEnd(s)
}

func (g *gate) Shutdown(ctx context.Context) error {
	err := g.next.Shutdown(ctx)
	g.closed.Store(true)
	return err
}

func (g *gate) ForceFlush(ctx context.Context) error { return g.next.ForceFlush(ctx) }

// countingExporter counts and logs what each export did.
type countingExporter struct {
	sdktrace.SpanExporter
	gate              *gate
	exported, dropped prometheus.Counter
	log               *slog.Logger
	url               string // without credentials (they are refused)

	mu      sync.Mutex
	failing bool
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.gate.inflight.Add(-int64(len(spans)))
	n := float64(len(spans))
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.dropped.Add(n)
		if !e.failing {
			e.failing = true
			e.log.Warn("tracing: export failed; its spans are dropped (said once until an export succeeds)",
				"url", e.url, "spans", len(spans), "err", err)
		} else {
			e.log.Debug("tracing: export failed", "spans", len(spans), "err", err)
		}
		return err
	}
	e.exported.Add(n)
	if e.failing {
		e.failing = false
		e.log.Info("tracing: export works again", "url", e.url)
	}
	return nil
}
