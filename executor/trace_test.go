package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/onetick/onetick/executor"
)

// spanCtx is a context carrying a sampled remote span, as the worker's
// attempt span puts one there.
func spanCtx(t *testing.T) (context.Context, string) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState("onetick=1")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
}

func TestTraceparentInCommandEnvironment(t *testing.T) {
	ctx, want := spanCtx(t)
	c, rec := newCommand(t, executor.CommandConfig{
		Argv: sh(`echo "tp=$TRACEPARENT"; echo "ts=$TRACESTATE"`),
		Env:  []string{"TRACEPARENT=from-config"}, // the attempt's wins
	})
	if err := c.Execute(ctx, testRun()); err != nil {
		t.Fatalf("Execute: %v\n%s", err, rec)
	}
	got := strings.Join(rec.Lines("stdout"), "\n")
	if !strings.Contains(got, "tp="+want) || !strings.Contains(got, "ts=onetick=1") {
		t.Fatalf("command saw %q, want TRACEPARENT=%s and TRACESTATE=onetick=1", got, want)
	}
	// Without a span in the context: no variable.
	c, rec = newCommand(t, executor.CommandConfig{Argv: sh(`echo "tp=${TRACEPARENT-unset}"`)})
	if err := c.Execute(context.Background(), testRun()); err != nil {
		t.Fatalf("Execute: %v\n%s", err, rec)
	}
	if got := strings.Join(rec.Lines("stdout"), "\n"); got != "tp=unset" {
		t.Fatalf("without a span the command saw %q", got)
	}
}

func TestTraceparentHeaderOnHTTPCall(t *testing.T) {
	ctx, want := spanCtx(t)
	rc := newReceiver(t, time.Now, nil)
	h := newHTTP(t, rc, executor.HTTPConfig{Headers: map[string]string{"Traceparent": "from-config"}})
	if err := h.Execute(ctx, testRun()); err != nil {
		t.Fatal(err)
	}
	req := <-rc.arrived
	if got := req.Header.Values("traceparent"); len(got) != 1 || got[0] != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}
	if got := req.Header.Get("tracestate"); got != "onetick=1" {
		t.Fatalf("tracestate %q", got)
	}
	if req.Verified[secretNew] != nil {
		t.Fatalf("signature: %v", req.Verified[secretNew])
	}
	// Without a span the header is the configured one, if any.
	h = newHTTP(t, rc, executor.HTTPConfig{})
	if err := h.Execute(context.Background(), testRun()); err != nil {
		t.Fatal(err)
	}
	if req := <-rc.arrived; req.Header.Get("traceparent") != "" {
		t.Fatalf("traceparent %q without a span", req.Header.Get("traceparent"))
	}
}
