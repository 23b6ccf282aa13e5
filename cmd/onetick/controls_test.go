package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

const e2eToken = "e2e-token-0123456789abcdef"

// TestControls: pause, resume, trigger and backfill through the CLI and
// the HTTP API against a real fleet of two replicas, with bad input
// refused (exit 2, one line, nothing changed) and a pause made while the
// leader is being replaced.
func TestControls(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "ctl.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: ctl
lease:
  ttl: 2s
http:
  token: ${ONETICK_TEST_TOKEN}
jobs:
  - {name: a, schedule: "@every 1s", stream: "ctl:a"}
  - {name: b, schedule: "@every 1s", stream: "ctl:b", prefer: duplicate}
`, srv.URL()))
	env := []string{"ONETICK_TEST_TOKEN=" + e2eToken}
	t.Setenv("ONETICK_TEST_TOKEN", e2eToken) // for the replicas started below
	ctx := context.Background()
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "ctl"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	entries := func(stream string) []onetick.TickRecord {
		t.Helper()
		recs, err := be.ReadStream(ctx, stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if seen[r.Tick] {
				t.Fatalf("tick %s twice in %s", r.Tick, stream)
			}
			seen[r.Tick] = true
		}
		return recs
	}
	waitLen := func(stream string, n int) {
		t.Helper()
		for end := time.Now().Add(15 * time.Second); len(entries(stream)) < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s did not reach %d entries", stream, n)
			}
		}
	}
	cli := func(args ...string) (string, string, int) {
		return runCmd(t, env, append(args, "--config", cfg)...)
	}

	r0 := startProc(t, "r0", "--config", cfg)
	addr := <-r0.addr
	r0.waitEvent("became leader", 0, 10*time.Second)
	r1 := startProc(t, "r1", "--config", cfg)
	<-r1.addr
	waitLen("ctl:a", 2)

	// Bad input: exit 2, one line, nothing recorded.
	for _, args := range [][]string{
		{"pause", "nosuch", "--reason", "x"},
		{"pause", "a"},
		{"pause"},
		{"backfill", "a", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"},
		{"backfill", "a", "--from", "yesterday", "--to", "2026-01-01T00:00:00Z"},
		{"backfill", "a", "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-02T00:00:00Z"},
		{"backfill", "a", "--from", "2025-01-01T00:00:00Z", "--to", "2099-01-01T00:00:00Z"},
		{"trigger", "a", "--payload", "{not json"},
		{"trigger", "a", "--key", "has space"},
	} {
		out, stderr, code := cli(args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || out != "" || strings.Contains(stderr, "panic") {
			t.Errorf("%v: code %d, stdout %q, stderr %q: want exit 2 and one line", args, code, out, stderr)
		}
	}
	if recs, _ := be.ControlLog(ctx, 10); len(recs) != 0 {
		t.Fatalf("bad input recorded controls: %+v", recs)
	}

	// Pause a from the CLI: its slots are recorded as paused, not missed.
	out, stderr, code := cli("pause", "a", "--reason", "incident 7", "--who", "alice")
	if code != 0 || !strings.Contains(out, "paused a since") {
		t.Fatalf("pause: %d %q %q", code, out, stderr)
	}
	nA := len(entries("ctl:a"))
	nB := len(entries("ctl:b"))
	waitLen("ctl:b", nB+3)
	if n := len(entries("ctl:a")); n > nA+1 { // a claim already in flight may land
		t.Fatalf("a got %d entries while paused", n-nA)
	}
	if v := r0.metric(t, addr, `scheduler_job_paused_ticks_total{job_name="a"}`); v == "0" {
		t.Fatal("no paused slot counted")
	}
	if v := r0.metric(t, addr, `scheduler_job_missed_ticks_total{job_name="a",prefer="missed"}`); v != "0" {
		t.Fatalf("missed %s: paused slots must not count as missed", v)
	}
	out, _, code = cli("status")
	if code != 0 || !strings.Contains(out, "incident 7") || !strings.Contains(out, "alice") {
		t.Fatalf("status while paused: %d\n%s", code, out)
	}
	out, _, code = cli("jobs")
	if code != 0 || !strings.Contains(out, "paused since") || !strings.Contains(out, "active") {
		t.Fatalf("jobs: %d\n%s", code, out)
	}

	// Resume through the API: without the token refused, with it done.
	post := func(path, auth, body string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("/api/v1/jobs/a/resume", "", `{"reason":"fixed"}`); code != 401 {
		t.Fatalf("resume without the token: %d", code)
	}
	resumedAt := time.Now()
	if code, body := post("/api/v1/jobs/a/resume", e2eToken, `{"reason":"fixed","who":"bob"}`); code != 200 {
		t.Fatalf("resume: %d %s", code, body)
	}
	waitLen("ctl:a", nA+3)
	for _, r := range entries("ctl:a")[nA:] {
		if r.Kind == "" && r.Slot.Time().Before(resumedAt.Add(-1500*time.Millisecond)) {
			t.Fatalf("slot %s fired after the resume: paused slots must not be caught up", r.Slot)
		}
	}

	// Trigger: through the API with an Idempotency-Key, twice; through the
	// CLI with --key, twice. One entry each.
	for i := 0; i < 2; i++ {
		if code, body := post("/api/v1/jobs/b/trigger", e2eToken, `{"payload":{"x":1}}`, "Idempotency-Key", "deploy-42"); code != 200 {
			t.Fatalf("trigger: %d %s", code, body)
		}
		if out, stderr, code := cli("trigger", "b", "--key", "cli-1"); code != 0 {
			t.Fatalf("cli trigger: %d %q %q", code, out, stderr)
		}
	}
	triggers := map[string]int{}
	for _, r := range entries("ctl:b") {
		if r.Kind == onetick.KindTrigger {
			triggers[r.Tick]++
		}
	}
	if len(triggers) != 2 || triggers["b:trigger:deploy-42"] != 1 || triggers["b:trigger:cli-1"] != 1 {
		t.Fatalf("triggers in the stream: %v", triggers)
	}

	// Backfill b over 5 seconds two minutes back, before the fleet ran: a
	// dry run, then twice.
	start := time.Now().Truncate(time.Minute).Add(-2 * time.Minute)
	from := start.UTC().Format(time.RFC3339)
	to := start.Add(4 * time.Second).UTC().Format(time.RFC3339)
	out, _, code = cli("backfill", "b", "--from", from, "--to", to, "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run: 5 slots") {
		t.Fatalf("backfill dry run: %d\n%s", code, out)
	}
	out, _, code = cli("backfill", "b", "--from", from, "--to", to)
	if code != 0 || !strings.Contains(out, "5 slots: 5 enqueued") {
		t.Fatalf("backfill: %d\n%s", code, out)
	}
	out, _, code = cli("backfill", "b", "--from", from, "--to", to)
	if code != 0 || !strings.Contains(out, "5 slots: 0 enqueued, 5 already enqueued") {
		t.Fatalf("repeated backfill: %d\n%s", code, out)
	}

	// A pause made while the leader is being replaced is not lost.
	r0.signal(syscall.SIGTERM)
	out, stderr, code = cli("pause", "b", "--reason", "during the handover")
	if code != 0 {
		t.Fatalf("pause during the handover: %d %q %q", code, out, stderr)
	}
	if code := r0.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("r0 exit %d", code)
	}
	r1.waitEvent("became leader", 0, 10*time.Second)
	nB = len(entries("ctl:b"))
	nA = len(entries("ctl:a"))
	waitLen("ctl:a", nA+3)
	scheduled := 0
	for _, r := range entries("ctl:b")[nB:] {
		if r.Kind == "" {
			scheduled++
		}
	}
	if scheduled > 1 {
		t.Fatalf("the new leader fired %d slots of b, paused during the handover", scheduled)
	}
	recs, err := be.ControlLog(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action+":"+r.Job)
	}
	// The repeated backfill enqueued nothing (the ledger records every
	// slot), so it reached no store and left no control record.
	if got := strings.Join(actions, " "); !strings.HasPrefix(got, "pause:b backfill:b trigger:b") || !strings.HasSuffix(got, "resume:a pause:a") {
		t.Fatalf("control log %s", got)
	}
}
