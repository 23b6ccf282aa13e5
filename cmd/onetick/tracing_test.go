package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/tracing"
	"github.com/onetick/onetick/internal/tracing/otlptest"
)

// TestTracingAcrossReplicas: a scheduler replica and a worker replica,
// two processes on one store (the file store, Redis, PostgreSQL), export
// to an in-process OTLP collector.
// For a tick of a command job and of an HTTP job, each failing its first
// attempt, the leader's claim span and the worker's two attempt spans
// share the trace id derived from the tick; the command got its attempt's
// TRACEPARENT and the HTTP target its traceparent header; the exports
// carried the configured header, whose value no log line shows.
func TestTracingAcrossReplicas(t *testing.T) {
	const token = "otlp-token-5b9d2e71c4"
	t.Setenv("ONETICK_TEST_OTLP_TOKEN", token)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // the SDK's batch delay, in ms
	for _, st := range daemonStores {
		t.Run(st.name, func(t *testing.T) { testTracingAcrossReplicas(t, st, token) })
	}
}

func testTracingAcrossReplicas(t *testing.T, st daemonStore, token string) {
	backend, args := st.open(t)
	rc := otlptest.New()
	defer rc.Close()
	out := t.TempDir()
	secret := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var mu sync.Mutex
	hookSeen := map[string]string{} // tick.attempt -> traceparent
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Tick    string `json:"tick"`
			Attempt int    `json:"attempt"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		hookSeen[body.Tick+"."+strconv.Itoa(body.Attempt)] = r.Header.Get("traceparent")
		mu.Unlock()
		if body.Attempt < 2 {
			http.Error(w, "try again", http.StatusInternalServerError)
		}
	}))
	defer hook.Close()
	cfg := writeFile(t, "tracing.yaml", backend+fmt.Sprintf(`lease:
  ttl: 2s
worker:
  takeover_idle: 3s
tracing:
  otlp_endpoint: %s
  headers: {authorization: "Bearer ${ONETICK_TEST_OTLP_TOKEN}"}
  service_name: tracetest
jobs:
  - name: cmd
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'printf %%s "$TRACEPARENT" > "$OUT/$ONETICK_TICK.$ONETICK_ATTEMPT"; [ "$ONETICK_ATTEMPT" -ge 2 ] || exit 4']
        env: {OUT: %q}
      max_attempts: 3
      backoff: 100ms
  - name: hook
    schedule: "@every 1s"
    run:
      http:
        url: %s/hook
        secrets: [%s]
      max_attempts: 3
      backoff: 100ms
`, rc.Endpoint(), out, hook.URL, secret))
	sched := startProc(t, "sched", append([]string{"--config", cfg, "--role", "scheduler"}, args...)...)
	<-sched.addr
	work := startProc(t, "work", append([]string{"--config", cfg, "--role", "worker"}, args...)...)
	workAddr := <-work.addr
	sched.waitEvent("tracing: a trace per tick", 0, 10*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type story struct {
		claim    *otlptest.Span
		attempts map[int64]otlptest.Span
	}
	var done map[string]story
	if _, err := rc.Await(ctx, func(spans []otlptest.Span) bool {
		byTick := map[string]*story{}
		for i, s := range spans {
			tick, _ := s.Attrs["onetick.tick"].(string)
			if byTick[tick] == nil {
				byTick[tick] = &story{attempts: map[int64]otlptest.Span{}}
			}
			if strings.HasPrefix(s.Name, "claim ") {
				byTick[tick].claim = &spans[i]
			} else if n, ok := s.Attrs["onetick.attempt"].(int64); ok {
				byTick[tick].attempts[n] = s
			}
		}
		done = map[string]story{}
		for _, st := range byTick {
			if _, two := st.attempts[2]; st.claim != nil && two && len(st.attempts) == 2 {
				done[st.claim.Attrs["onetick.job"].(string)] = *st
			}
		}
		return len(done) == 2
	}); err != nil {
		t.Fatal(err)
	}
	for job, st := range done {
		tick := st.claim.Attrs["onetick.tick"].(string)
		trace := tracing.TraceID("tracetest", tick).String()
		if st.claim.TraceID != trace || st.claim.Resource["service.instance.id"] != "sched" || st.claim.Resource["service.name"] != "tracetest" {
			t.Errorf("%s: claim span %+v, want trace %s from sched", job, st.claim, trace)
		}
		for n, a := range st.attempts {
			if a.TraceID != trace || a.ParentSpanID != st.claim.SpanID || a.Resource["service.instance.id"] != "work" {
				t.Errorf("%s attempt %d: %+v, want trace %s, parent %s, from work", job, n, a, trace, st.claim.SpanID)
			}
			var seen string
			key := tick + "." + strconv.FormatInt(n, 10)
			if job == "cmd" {
				data, _ := os.ReadFile(filepath.Join(out, key))
				seen = string(data)
			} else {
				mu.Lock()
				seen = hookSeen[key]
				mu.Unlock()
			}
			if want := "00-" + trace + "-" + a.SpanID + "-01"; seen != want {
				t.Errorf("%s attempt %d: traceparent %q, want %q", job, n, seen, want)
			}
		}
		if o := st.attempts[1].Attrs["onetick.outcome"]; o != "retried" {
			t.Errorf("%s attempt 1: outcome %v", job, o)
		}
		if o := st.attempts[2].Attrs["onetick.outcome"]; o != "succeeded" {
			t.Errorf("%s attempt 2: outcome %v", job, o)
		}
	}
	if v := work.metric(t, workAddr, `tracing_spans_total{result="exported"}`); v == "0" {
		t.Errorf("worker exported %s spans", v)
	}
	for _, h := range rc.Requests() {
		if h.Get("Authorization") != "Bearer "+token {
			t.Fatalf("an export without the configured header")
		}
	}
	for _, p := range []*proc{sched, work} {
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Errorf("%s exited %d", p.name, code)
		}
		p.mu.Lock()
		for _, ev := range p.events {
			if strings.Contains(ev.Raw, token) {
				t.Errorf("%s logged the header's value: %s", p.name, ev.Raw)
			}
		}
		p.mu.Unlock()
	}
}
