package main_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick/executor/webhook"
)

// A daemon on the file store judges its jobs' deadlines: a job whose
// ticks no worker runs misses its start deadline, which the leader logs,
// counts and posts, signed, to the configured webhook; a job whose runs
// start at once does not.
func TestRunDeadlines(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the daemon test's secret, 32 b.."))
	type notice struct{ ID, Job, Status, Deadline string }
	notices := make(chan notice, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, time.Minute, time.Now()); err != nil {
			t.Errorf("receiver: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var n notice
		if err := json.Unmarshal(body, &n); err != nil {
			t.Errorf("receiver: %v in %s", err, body)
		}
		n.ID = r.Header.Get(webhook.HeaderID)
		notices <- n
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	cfg := writeFile(t, "deadlines.yaml", fmt.Sprintf(`deadlines:
  check_every: 1s
  notify: {url: %q, secrets: [%q]}
jobs:
  - name: unworked
    schedule: "@every 1s"
    deadline: {start: 1s}
  - name: worked
    schedule: "@every 1s"
    deadline: {start: 30s, finish: 60s}
    run:
      command: {argv: ["true"]}
`, srv.URL, secret))
	p := startProc(t, "d1", "--config", cfg, "--data", filepath.Join(t.TempDir(), "state.db"))
	addr := <-p.addr
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	var n notice
	select {
	case n = <-notices:
	case <-timeout.C:
		t.Fatal("no deadline notice within 60s")
	}
	if n.Job != "unworked" || n.Status != "late" || n.Deadline != "start" || !strings.HasPrefix(n.ID, "unworked:start:late:") {
		t.Fatalf("notice %+v", n)
	}
	ev, _ := p.waitEvent("job is late: it missed a deadline", 0, 10*time.Second)
	if !strings.Contains(ev.Raw, `"job":"unworked"`) {
		t.Fatalf("log line %s", ev.Raw)
	}
	if v := p.metric(t, addr, "scheduler_late_jobs"); v != "1" {
		p.mu.Lock()
		for _, e := range p.events {
			t.Log(e.Raw)
		}
		p.mu.Unlock()
		t.Fatalf("scheduler_late_jobs %s", v)
	}
}
