package main_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The metrics section reaches the daemon: only the listed job gets its own
// series, the fleet totals count every job, the replica says so at start,
// and no series carries a label Prometheus reserves for the target.
func TestRunMetricsSection(t *testing.T) {
	cfg := writeFile(t, "metrics.yaml", `jobs:
  - {name: a, schedule: "@every 1s"}
  - {name: b, schedule: "@every 1s"}
  - {name: c, schedule: "@every 1s"}
metrics:
  per_job: listed
  jobs: [a]
`)
	p := startProc(t, "solo", "--config", cfg)
	addr := <-p.addr
	p.waitEvent("per-job metric series only for the jobs in metrics.jobs (metrics.per_job: listed); the fleet totals count every job", 0, 10*time.Second)
	// Ticks reach stdout after they were counted.
	deadline := time.After(15 * time.Second)
	for {
		p.stdout.mu.Lock()
		n := len(p.stdout.lines)
		p.stdout.mu.Unlock()
		if n >= 3 {
			break
		}
		select {
		case <-p.stdout.wake:
		case <-deadline:
			t.Fatalf("%d ticks on stdout within 15s, want 3", n)
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	reserved := regexp.MustCompile(`[{,](job|instance)="`)
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "#") && reserved.MatchString(line) {
			t.Errorf("series with a reserved label: %s", line)
		}
		if strings.Contains(line, `job_name="b"`) || strings.Contains(line, `job_name="c"`) {
			t.Errorf("series of a job that is not listed: %s", line)
		}
	}
	if v, _ := strconv.ParseFloat(p.metric(t, addr, `scheduler_job_ticks_enqueued_total{job_name="a"}`), 64); v < 1 {
		t.Errorf("a's enqueued ticks %v, want at least 1", v)
	}
	if v, _ := strconv.ParseFloat(p.metric(t, addr, "scheduler_ticks_enqueued_total"), 64); v < 3 {
		t.Errorf("fleet total of enqueued ticks %v, want at least 3", v)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}
