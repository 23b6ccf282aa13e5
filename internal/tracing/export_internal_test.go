package tracing

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// held is a span processor that keeps what it gets, as a batch processor
// whose export hangs would.
type held struct{ spans []sdktrace.ReadOnlySpan }

func (h *held) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (h *held) OnEnd(s sdktrace.ReadOnlySpan)                   { h.spans = append(h.spans, s) }
func (h *held) Shutdown(context.Context) error                  { return nil }
func (h *held) ForceFlush(context.Context) error                { return nil }

type fakeExporter struct{ err error }

func (f fakeExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return f.err }
func (f fakeExporter) Shutdown(context.Context) error                             { return nil }

// TestTracingGateDropsBeyondTheQueue: with max spans in flight, the next one is
// dropped and counted; an export (done or failed) makes room again.
func TestTracingGateDropsBeyondTheQueue(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	next := &held{}
	g := &gate{next: next, max: 2, dropped: m.dropped}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(g))
	tr := tp.Tracer("t")
	end := func(n int) {
		for range n {
			_, s := tr.Start(context.Background(), "s")
			s.End()
		}
	}
	end(3)
	if len(next.spans) != 2 || testutil.ToFloat64(m.dropped) != 1 {
		t.Fatalf("passed %d, dropped %v; want 2 and 1", len(next.spans), testutil.ToFloat64(m.dropped))
	}
	ok := &countingExporter{SpanExporter: fakeExporter{}, gate: g, exported: m.exported, dropped: m.dropped, log: slog.New(slog.DiscardHandler)}
	if err := ok.ExportSpans(context.Background(), next.spans[:1]); err != nil {
		t.Fatal(err)
	}
	bad := &countingExporter{SpanExporter: fakeExporter{errors.New("down")}, gate: g, exported: m.exported, dropped: m.dropped, log: slog.New(slog.DiscardHandler)}
	if err := bad.ExportSpans(context.Background(), next.spans[1:2]); err == nil {
		t.Fatal("no error")
	}
	end(2)
	if len(next.spans) != 4 || testutil.ToFloat64(m.exported) != 1 || testutil.ToFloat64(m.dropped) != 2 {
		t.Fatalf("passed %d, exported %v, dropped %v; want 4, 1, 2", len(next.spans), testutil.ToFloat64(m.exported), testutil.ToFloat64(m.dropped))
	}
	_ = tp.Shutdown(context.Background())
}
