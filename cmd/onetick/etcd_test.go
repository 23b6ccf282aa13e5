package main_test

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/etcdtest"
)

// TestRunOnEtcd: three replicas on a real etcd (backend.etcd), under a
// prefix of their own. One leads; every tick of a command job runs once
// across the fleet, through a SIGTERM handover, and is recorded in the
// run ledger; status, runs and pause work on the same store.
func TestRunOnEtcd(t *testing.T) {
	s := etcdtest.Start(t)
	out := t.TempDir() + "/ran"
	cfg := writeFile(t, "etcd.yaml", fmt.Sprintf(`backend:
  etcd:
    endpoints: [%s]
    prefix: %s
lease:
  ttl: 2s
worker:
  takeover_idle: 3s
jobs:
  - name: cmd
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'echo "$ONETICK_TICK" >> "$OUT"']
        env: {OUT: %q}
  - name: other
    schedule: "@every 1h"
`, s.Endpoint(), etcdtest.Prefix(), out))

	o, e, code := runCmd(t, nil, "validate", "--config", cfg)
	if code != 0 || !strings.Contains(o, "etcd") {
		t.Fatalf("validate: %d %q %q", code, o, e)
	}
	procs := map[string]*proc{}
	for _, n := range []string{"r0", "r1", "r2"} {
		procs[n] = startProc(t, n, "--config", cfg)
		<-procs[n].addr
	}
	leader := ""
	deadline := time.After(15 * time.Second)
	for leader == "" {
		for n, p := range procs {
			p.mu.Lock()
			for _, ev := range p.events {
				if ev.Msg == "became leader" {
					leader = n
				}
			}
			p.mu.Unlock()
		}
		if leader != "" {
			break
		}
		select {
		case <-procs["r0"].wake:
		case <-procs["r1"].wake:
		case <-procs["r2"].wake:
		case <-deadline:
			t.Fatal("no replica became leader within 15s")
		}
	}
	waitLines(t, out, 3)
	procs[leader].signal(syscall.SIGTERM)
	if c := procs[leader].wait(t, 15*time.Second); c != 0 {
		t.Fatalf("%s exited %d after SIGTERM", leader, c)
	}
	before := len(lines(t, out))
	waitLines(t, out, before+3)
	seen := map[string]bool{}
	re := regexp.MustCompile(`^cmd:\d+$`)
	for _, l := range lines(t, out) {
		if !re.MatchString(l) {
			t.Fatalf("command line %q: want a tick id", l)
		}
		if seen[l] {
			t.Fatalf("tick %s ran twice", l)
		}
		seen[l] = true
	}
	// The ticks that ran before the handover have finished long since:
	// their succeeded records are in the run ledger, on etcd.
	first := lines(t, out)[0]
	found := false
	for _, r := range runsPage(t, "cmd", "--fate", "succeeded", "--limit", "1000", "--config", cfg).Runs {
		if !seen[r.Tick] {
			t.Fatalf("a succeeded record of %s, which never ran", r.Tick)
		}
		found = found || r.Tick == first
	}
	if !found {
		t.Fatalf("no succeeded record of the first tick %s", first)
	}
	if o, e, code := runCmd(t, nil, "pause", "other", "--config", cfg, "--reason", "maintenance"); code != 0 {
		t.Fatalf("pause: %d %s %s", code, o, e)
	}
	o, e, code = runCmd(t, nil, "status", "--config", cfg)
	if code != 0 || !strings.Contains(o, "etcd") || !regexp.MustCompile(`other\s.*paused`).MatchString(o) {
		t.Fatalf("status: %d\n%s\n%s", code, o, e)
	}
}
