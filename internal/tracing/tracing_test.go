package tracing_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/executor"
	"github.com/onetick/onetick/internal/tracing"
	"github.com/onetick/onetick/internal/tracing/otlptest"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/worker"
)

func TestMain(m *testing.M) {
	// The command executor runs its commands under this binary.
	executor.MaybeSupervise()
	goleak.VerifyTestMain(m)
}

const secret = "s3cret-otlp-token-7f1e"

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTracer(t *testing.T, rc *otlptest.Receiver, instance string, ratio float64, logs *syncBuffer, reg prometheus.Registerer) *tracing.Tracer {
	t.Helper()
	tr, err := tracing.New(tracing.Config{URL: rc.URL(), Headers: map[string]string{"Authorization": "Bearer " + secret},
		SampleRatio: ratio, Instance: instance, Timeout: 5 * time.Second, BatchDelay: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return tr
}

func TestTraceIDsFromTheTick(t *testing.T) {
	a, b := tracing.TraceID("onetick", "j:1000"), tracing.TraceID("onetick", "j:1000")
	if a != b || !a.IsValid() {
		t.Fatalf("trace ids %s and %s", a, b)
	}
	if tracing.TraceID("other", "j:1000") == a || tracing.TraceID("onetick", "j:2000") == a {
		t.Fatal("another service or tick has the same trace id")
	}
	if s := tracing.ClaimSpanID("onetick", "j:1000"); !s.IsValid() || s != tracing.ClaimSpanID("onetick", "j:1000") {
		t.Fatalf("claim span id %s", s)
	}
	// SHA-256("onetick\x00j:1000"), first 16 bytes: the documented
	// derivation, which other tools may reproduce.
	if got := a.String(); got != sha256Prefix("onetick\x00j:1000") {
		t.Fatalf("trace id %s, want %s", got, sha256Prefix("onetick\x00j:1000"))
	}
}

// TestTracePerTick runs a leader and a worker as two tracers, as two
// processes would (each its own provider and instance id), against one
// in-process collector: a command job and an HTTP job whose first
// attempts fail. The claim span and both attempt spans of a tick share
// one trace; the attempts are children of the claim; the command saw its
// attempt's TRACEPARENT and the HTTP target its traceparent header; the
// exports carried the configured header, which no log shows.
func TestTracePerTick(t *testing.T) {
	rc := otlptest.New()
	defer rc.Close()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	leader := newTracer(t, rc, "leader-1", 1, logs, reg)
	wtr := newTracer(t, rc, "worker-1", 1, logs, nil)

	dir := t.TempDir()
	cmd, err := executor.NewCommand(executor.CommandConfig{Argv: []string{"sh", "-c",
		`printf %s "$TRACEPARENT" > "$DIR/$ONETICK_TICK.$ONETICK_ATTEMPT"; [ "$ONETICK_ATTEMPT" -ge 2 ] || exit 3`},
		Env: []string{"DIR=" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hookSeen := map[string]string{} // tick.attempt -> traceparent
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Tick    string `json:"tick"`
			Attempt int    `json:"attempt"`
		}
		_ = jsonDecode(r, &body)
		mu.Lock()
		hookSeen[fmt.Sprintf("%s.%d", body.Tick, body.Attempt)] = r.Header.Get("traceparent")
		mu.Unlock()
		if body.Attempt < 2 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	hook, err := executor.NewHTTP(executor.HTTPConfig{URL: target.URL + "/hook", Secrets: []string{testSecret}, Client: target.Client()})
	if err != nil {
		t.Fatal(err)
	}

	b := memory.New(memory.Options{})
	every, _ := cron.Parse("@every 1s", nil)
	sched, err := onetick.New(onetick.Config{Backend: b, Replica: "leader-1", Sink: leader.Sink(nil),
		Jobs: []onetick.Job{{Name: "cmd", Schedule: every, Stream: "s-cmd"}, {Name: "hook", Schedule: every, Stream: "s-hook"}}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Store: b.WorkerStore(""), Consumer: "worker-1", OnAttempt: wtr.OnAttempt,
		TakeoverIdle: 3 * time.Second, HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fast := worker.WithBackoff(func(int) time.Duration { return 10 * time.Millisecond })
	run := func(x executor.Executor) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
			return x.Execute(ctx, executor.Run{Job: tk.Job, Slot: tk.Slot, Tick: tk.Tick, Epoch: tk.Epoch, Attempt: tk.Attempt, Payload: tk.Payload})
		})
	}
	if err := w.Handle("cmd", run(cmd), worker.WithStream("s-cmd"), worker.WithMaxAttempts(3), fast); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("hook", run(hook), worker.WithStream("s-hook"), worker.WithMaxAttempts(3), fast, worker.WithOverlap(worker.OverlapAllow)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = sched.Run(ctx) }()
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	defer stop()

	// A tick of each job whose claim and both attempts arrived.
	wait, cancelWait := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelWait()
	var found map[string]traceOf
	if _, err := rc.Await(wait, func(spans []otlptest.Span) bool {
		found = completeTicks(spans)
		return found["cmd"].claim != nil && found["hook"].claim != nil
	}); err != nil {
		t.Fatal(err)
	}
	stop()

	for _, job := range []string{"cmd", "hook"} {
		tr := found[job]
		c := tr.claim
		tick := c.Attrs["onetick.tick"].(string)
		if want := tracing.TraceID("onetick", tick).String(); c.TraceID != want {
			t.Errorf("%s: claim trace %s, want %s (derived from the tick)", job, c.TraceID, want)
		}
		if c.SpanID != tracing.ClaimSpanID("onetick", tick).String() || c.ParentSpanID != "" {
			t.Errorf("%s: claim span %s parent %q", job, c.SpanID, c.ParentSpanID)
		}
		if c.Kind != tracepb.Span_SPAN_KIND_PRODUCER || c.Name != "claim "+job || c.Resource["service.instance.id"] != "leader-1" ||
			c.Resource["service.name"] != "onetick" || c.Attrs["onetick.job"] != job || c.Attrs["onetick.replica"] != "leader-1" {
			t.Errorf("%s: claim span %+v", job, c)
		}
		if !c.End.After(c.Start) && !c.End.Equal(c.Start) {
			t.Errorf("%s: claim span ends %s before it starts %s", job, c.End, c.Start)
		}
		for n, a := range tr.attempts {
			if a.TraceID != c.TraceID || a.ParentSpanID != c.SpanID {
				t.Errorf("%s attempt %d: trace %s parent %s, want trace %s parent %s", job, n, a.TraceID, a.ParentSpanID, c.TraceID, c.SpanID)
			}
			if a.Kind != tracepb.Span_SPAN_KIND_CONSUMER || a.Resource["service.instance.id"] != "worker-1" || a.Attrs["onetick.tick"] != tick {
				t.Errorf("%s attempt %d: %+v", job, n, a)
			}
			want := "00-" + a.TraceID + "-" + a.SpanID + "-01"
			var seen string
			if job == "cmd" {
				data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.%d", tick, n)))
				if err != nil {
					t.Fatal(err)
				}
				seen = string(data)
			} else {
				mu.Lock()
				seen = hookSeen[fmt.Sprintf("%s.%d", tick, n)]
				mu.Unlock()
			}
			if seen != want {
				t.Errorf("%s attempt %d: the executor passed traceparent %q, want the attempt span's %q", job, n, seen, want)
			}
		}
		first, second := tr.attempts[1], tr.attempts[2]
		if first.Attrs["onetick.outcome"] != "retried" || first.StatusCode != tracepb.Status_STATUS_CODE_ERROR ||
			second.Attrs["onetick.outcome"] != "succeeded" || second.StatusCode == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("%s: outcomes %v (%v %q), %v (%v)", job, first.Attrs["onetick.outcome"], first.StatusCode, first.StatusMessage,
				second.Attrs["onetick.outcome"], second.StatusCode)
		}
		if job == "cmd" && first.Attrs["process.exit.code"] != int64(3) {
			t.Errorf("cmd attempt 1: exit code %v, want 3", first.Attrs["process.exit.code"])
		}
		if job == "hook" && first.Attrs["http.response.status_code"] != int64(503) {
			t.Errorf("hook attempt 1: status %v, want 503", first.Attrs["http.response.status_code"])
		}
	}
	for _, h := range rc.Requests() {
		if h.Get("Authorization") != "Bearer "+secret || h.Get("Content-Encoding") != "gzip" {
			t.Fatalf("export request headers %v", h.Values("Content-Encoding"))
		}
	}
	if got := testutil.ToFloat64(counterOf(t, reg, "exported")); got < 2 {
		t.Errorf("tracing_spans_total{result=exported} %v", got)
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("the logs show the export header:\n%s", logs)
	}
}

// traceOf is one tick's claim span and attempt spans by number.
type traceOf struct {
	claim    *otlptest.Span
	attempts map[int]otlptest.Span
}

// completeTicks returns, per job, a tick whose claim span and attempts 1
// and 2 (the second ended) arrived.
func completeTicks(spans []otlptest.Span) map[string]traceOf {
	byTick := map[string]*traceOf{}
	get := func(tick string) *traceOf {
		if byTick[tick] == nil {
			byTick[tick] = &traceOf{attempts: map[int]otlptest.Span{}}
		}
		return byTick[tick]
	}
	for i, s := range spans {
		tick, _ := s.Attrs["onetick.tick"].(string)
		switch {
		case strings.HasPrefix(s.Name, "claim "):
			get(tick).claim = &spans[i]
		case strings.HasPrefix(s.Name, "attempt "):
			n, _ := s.Attrs["onetick.attempt"].(int64)
			get(tick).attempts[int(n)] = s
		}
	}
	out := map[string]traceOf{}
	for _, tr := range byTick {
		if tr.claim == nil || len(tr.attempts) < 2 {
			continue
		}
		if _, ok := tr.attempts[1]; !ok {
			continue
		}
		if _, ok := tr.attempts[2]; !ok {
			continue
		}
		out[tr.claim.Attrs["onetick.job"].(string)] = *tr
	}
	return out
}

// TestTracingSamplingIsTheTicks: with a ratio, the leader and a worker decide
// alike for every tick, and a tick not sampled still passes a trace
// context on (flags 00).
func TestTracingSamplingIsTheTicks(t *testing.T) {
	rc := otlptest.New()
	defer rc.Close()
	logs := &syncBuffer{}
	leader := newTracer(t, rc, "a", 0.5, logs, nil)
	wtr := newTracer(t, rc, "b", 0.5, logs, nil)
	var recs []onetick.TickRecord
	unsampled := 0
	for i := range 200 {
		tick := onetick.TickID("j", onetick.Slot(1_000_000+i*1000))
		recs = append(recs, onetick.TickRecord{Job: "j", Slot: onetick.Slot(1_000_000 + i*1000), Tick: tick})
		ctx, end := wtr.OnAttempt(context.Background(), &worker.Task{Job: "j", Tick: tick, Attempt: 1})
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() || sc.TraceID() != tracing.TraceID("onetick", tick) {
			t.Fatalf("attempt context %v", sc)
		}
		if end == nil {
			unsampled++
			if sc.IsSampled() {
				t.Fatal("a span without end function is sampled")
			}
			continue
		}
		end(worker.AttemptEnd{Kind: worker.FinishDone, Recorded: true})
	}
	if err := leader.Sink(nil).Deliver(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := leader.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := wtr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	traces := map[string][]string{}
	for _, s := range rc.Spans() {
		traces[s.TraceID] = append(traces[s.TraceID], s.Name)
	}
	if len(traces) != 200-unsampled || unsampled < 50 || unsampled > 150 {
		t.Fatalf("%d traces, %d ticks not sampled of 200", len(traces), unsampled)
	}
	for id, names := range traces {
		if len(names) != 2 {
			t.Errorf("trace %s: spans %q, want the claim and the attempt", id, names)
		}
	}
}

// TestTracingExportFailureCountedHeadersNotLogged: a collector that refuses
// the export (401, echoing nothing secret): the spans are counted as
// dropped, the failure is logged once at WARN and its recovery at INFO,
// and no log line holds the header's value.
func TestTracingExportFailureCountedHeadersNotLogged(t *testing.T) {
	rc := otlptest.New()
	defer rc.Close()
	rc.FailWith(http.StatusUnauthorized, "bad token")
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	tr := newTracer(t, rc, "a", 1, logs, reg)
	deliver := func(n int) {
		t.Helper()
		var recs []onetick.TickRecord
		for i := range n {
			recs = append(recs, onetick.TickRecord{Job: "j", Slot: onetick.Slot(i), Tick: fmt.Sprintf("j:%d", i)})
		}
		if err := tr.Sink(nil).Deliver(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
		_ = tr.ForceFlush(context.Background()) // the export's error is the counter's
	}
	deliver(3)
	deliver(2)
	if got := testutil.ToFloat64(counterOf(t, reg, "dropped")); got != 5 {
		t.Fatalf("dropped %v, want 5", got)
	}
	rc.FailWith(0, "")
	deliver(1)
	if got := testutil.ToFloat64(counterOf(t, reg, "exported")); got != 1 {
		t.Fatalf("exported %v, want 1", got)
	}
	out := logs.String()
	if strings.Count(out, "level=WARN msg=\"tracing: export failed") != 1 || !strings.Contains(out, "401 Unauthorized") ||
		!strings.Contains(out, "tracing: export works again") {
		t.Errorf("logs:\n%s", out)
	}
	if strings.Contains(out, secret) {
		t.Fatalf("the logs show the export header:\n%s", out)
	}
	for _, h := range rc.Requests() {
		if h.Get("Authorization") != "Bearer "+secret {
			t.Fatalf("an export without the header: %v", h)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

func TestTracingNewRefusesBadURL(t *testing.T) {
	for _, u := range []string{"", "grpc://h:4317", "http://user:" + secret + "@h:4318", "http://"} {
		_, err := tracing.New(tracing.Config{URL: u, SampleRatio: 1})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("%q: %v", u, err)
		}
	}
	if _, err := tracing.New(tracing.Config{URL: "http://h", SampleRatio: 2}); err == nil {
		t.Error("ratio 2 accepted")
	}
}

func counterOf(t *testing.T, reg *prometheus.Registry, result string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tracing_spans_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
				}
			}
		}
	}
	t.Fatalf("no tracing_spans_total{result=%q}", result)
	return nil
}

// TestTracingFileSettingsWinOverEnvironment: the standard OTEL_EXPORTER_OTLP_*
// variables do not move the export the file configures elsewhere, nor
// change its encoding.
func TestTracingFileSettingsWinOverEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/elsewhere")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "false")
	rc := otlptest.New()
	defer rc.Close()
	tr := newTracer(t, rc, "a", 1, &syncBuffer{}, nil)
	if err := tr.Sink(nil).Deliver(context.Background(), []onetick.TickRecord{{Job: "j", Slot: 1000, Tick: "j:1000"}}); err != nil {
		t.Fatal(err)
	}
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rc.Spans(); len(got) != 1 || got[0].TraceID != tracing.TraceID("onetick", "j:1000").String() {
		t.Fatalf("received %+v", got)
	}
}
