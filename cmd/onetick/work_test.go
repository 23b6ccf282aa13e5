package main_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick/executor/webhook"
	"github.com/onetick/onetick/internal/redistest"
)

// lines reads a file of lines, failing on a line that appears twice.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l == "" {
			continue
		}
		if seen[l] {
			t.Fatalf("%s: %q appears twice: a tick ran twice", filepath.Base(path), l)
		}
		seen[l] = true
		out = append(out, l)
	}
	return out
}

func waitLines(t *testing.T, path string, n int) []string {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ls := lines(t, path); len(ls) >= n {
			return ls
		}
		if time.Now().After(end) {
			t.Fatalf("%s did not reach %d lines: %q", path, n, lines(t, path))
		}
	}
}

// TestRunCommandAndHTTPJobs: two replicas run a command job and a signed
// HTTP job once per tick; a failing job ends in the dead letters, which
// `onetick dead list` shows and `onetick dead replay` puts back.
func TestRunCommandAndHTTPJobs(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "ran")
	secret := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got = append(got, r.Header.Get("webhook-id"))
		mu.Unlock()
	}))
	defer hook.Close()
	cfg := writeFile(t, "work.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: wk
lease:
  ttl: 2s
worker:
  takeover_idle: 3s
jobs:
  - name: cmd
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'echo "$ONETICK_TICK $ONETICK_ATTEMPT $(cat)" >> "$OUT"']
        env: {OUT: %q}
  - name: hook
    schedule: "@every 1s"
    run:
      http:
        url: %s/hook
        secrets: [%s]
  - name: fails
    schedule: "@every 1h"
    run:
      command: [sh, -c, "echo boom >&2; exit 3"]
      max_attempts: 2
      backoff: 100ms
`, srv.URL(), out, hook.URL, secret))
	r0 := startProc(t, "r0", "--config", cfg)
	<-r0.addr
	r1 := startProc(t, "r1", "--config", cfg)
	<-r1.addr
	ls := waitLines(t, out, 4)
	re := regexp.MustCompile(`^cmd:\d+ 1 \{\}$`)
	for _, l := range ls {
		if !re.MatchString(l) {
			t.Fatalf("command line %q: want the tick id, attempt 1 and the payload from stdin", l)
		}
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the webhook receiver got fewer than 3 verified calls")
		}
	}
	mu.Lock()
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("webhook-id %s delivered twice", id)
		}
		seen[id] = true
	}
	mu.Unlock()

	// The failing job, triggered by hand, goes to the dead letters after
	// two attempts.
	if o, e, code := runCmd(t, nil, "trigger", "fails", "--key", "k1", "--config", cfg); code != 0 {
		t.Fatalf("trigger: %d %s %s", code, o, e)
	}
	var deadID string
	for end := time.Now().Add(15 * time.Second); deadID == ""; time.Sleep(100 * time.Millisecond) {
		o, _, code := runCmd(t, nil, "dead", "list", "--config", cfg)
		if code == 0 && strings.Contains(o, "fails:trigger:k1") {
			if !strings.Contains(o, "code 3") || !strings.Contains(o, "boom") {
				t.Fatalf("dead list: %s", o)
			}
			deadID = strings.Fields(strings.Split(o, "\n")[1])[0]
		}
		if time.Now().After(end) {
			t.Fatal("no dead letter within 15s")
		}
	}
	o, _, code := runCmd(t, nil, "status", "--config", cfg)
	if code != 0 || !regexp.MustCompile(`cmd\s+succeeded`).MatchString(o) || !regexp.MustCompile(`fails\s+dead`).MatchString(o) {
		t.Fatalf("status: %d\n%s", code, o)
	}
	o, e, code := runCmd(t, nil, "dead", "replay", deadID, "--config", cfg)
	if code != 0 || !strings.Contains(o, "fails:trigger:k1") {
		t.Fatalf("replay: %d %s %s", code, o, e)
	}
	if _, e, code := runCmd(t, nil, "dead", "replay", deadID, "--config", cfg); code != 2 || !strings.Contains(e, "no dead letter") {
		t.Fatalf("second replay of the same id: %d %s", code, e)
	}
}

// TestRunEmbeddedCommandJob: the embedded default runs a command job
// with nothing installed.
func TestRunEmbeddedCommandJob(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ran")
	cfg := writeFile(t, "solo.yaml", fmt.Sprintf(`jobs:
  - name: solo
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'echo "$ONETICK_TICK" >> "$OUT"']
        env: {OUT: %q}
`, out))
	p := startProc(t, "solo", "--config", cfg)
	<-p.addr
	ls := waitLines(t, out, 2)
	if !strings.HasPrefix(ls[0], "solo:") {
		t.Fatalf("lines %q", ls)
	}
}

// TestFileStoreCommands: with the default durable file store, the
// operator's commands work from another process while the daemon runs.
func TestFileStoreCommands(t *testing.T) {
	data := filepath.Join(t.TempDir(), "state.db")
	cfg := writeFile(t, "file.yaml", "jobs:\n  - {name: solo, schedule: \"@every 1s\"}\n")
	p := startProc(t, "solo", "--config", cfg, "--data", data)
	<-p.addr
	p.waitEvent("became leader", 0, 10*time.Second)
	out, stderr, code := runCmd(t, nil, "status", "--config", cfg, "--data", data)
	if code != 0 || !strings.Contains(out, "leader: solo") || !strings.Contains(out, "store: embedded (file "+data+")") {
		t.Fatalf("status: %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runCmd(t, nil, "pause", "solo", "--reason", "maintenance", "--config", cfg, "--data", data); code != 0 {
		t.Fatalf("pause: %d %s %s", code, out, stderr)
	}
	out, _, code = runCmd(t, nil, "jobs", "--config", cfg, "--data", data)
	if code != 0 || !strings.Contains(out, "paused since") {
		t.Fatalf("jobs: %d\n%s", code, out)
	}
	_, stderr, code = runCmd(t, nil, "status", "--config", cfg, "--data", filepath.Join(t.TempDir(), "nope.db"))
	if code != 1 || !strings.Contains(stderr, "no onetick state at") {
		t.Fatalf("status of a missing file: %d %s", code, stderr)
	}
}
