package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/redistest"
)

// runLog reads the lines "<version> <tick>" the test's commands append.
func runLog(t *testing.T, path string) (byTick map[string][]string, order []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	byTick = map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		byTick[f[1]] = append(byTick[f[1]], f[0])
		order = append(order, l)
	}
	return byTick, order
}

func slotOfTick(t *testing.T, tick string) int64 {
	i := strings.LastIndexByte(tick, ':')
	n, err := strconv.ParseInt(tick[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("tick %q", tick)
	}
	return n
}

// TestRunTimeRunJobs: a job applied at run time with a run block runs on
// the workers of three replicas without a restart, once per tick; a
// change runs from the ticks claimed after it, each tick with the
// definition it was claimed under; a removal stops it. Run blocks outside
// the configuration file's allow-list are refused (exit 2, one line
// naming the setting), and nothing is applied.
func TestRunTimeRunJobs(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	hooks := filepath.Join(dir, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "runs.log")
	for _, v := range []string{"a", "b"} {
		script := fmt.Sprintf("#!/bin/sh\necho \"%s $ONETICK_TICK\" >> %q\n", v, out)
		if err := os.WriteFile(filepath.Join(hooks, "record-"+v), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeFile(t, "rr.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: rr
lease:
  ttl: 2s
worker:
  allow_commands: [%s/]
  allow_http_hosts: [hooks.internal]
jobs:
  - {name: base, schedule: "@every 1h"}
`, srv.URL(), hooks))
	var procs []*proc
	for i := range 3 {
		procs = append(procs, startProc(t, fmt.Sprintf("r%d", i), "--config", cfg))
	}

	for _, bad := range []struct{ body, want string }{
		{"jobs:\n  - {name: t1, schedule: \"@every 1s\", run: {command: [/bin/sh, -c, 'id']}}\n", "worker.allow_commands in " + cfg},
		{"jobs:\n  - {name: t1, schedule: \"@every 1s\", run: {command: [" + hooks + "/../record-a]}}\n", "worker.allow_commands"},
		{"jobs:\n  - {name: t1, schedule: \"@every 1s\", run: {command: {argv: [" + hooks + "/record-a], env: {LD_PRELOAD: /tmp/x.so}}}}\n", "run.command.env"},
		{"jobs:\n  - {name: t1, schedule: \"@every 1s\", run: {http: {url: 'https://169.254.169.254/x', secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=]}}}\n", "worker.allow_http_hosts in " + cfg},
	} {
		p := writeFile(t, "bad.yaml", bad.body)
		_, stderr, code := runCmd(t, nil, "jobs", "apply", "-f", p, "--set", "tenants", "--config", cfg)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(stderr, "bad.yaml:2") || !strings.Contains(stderr, bad.want) {
			t.Errorf("apply of %q: exit %d, stderr %q; want 2 and one line naming %s", bad.body, code, stderr, bad.want)
		}
	}
	if o, _, _ := runCmd(t, nil, "jobs", "--config", cfg); strings.Contains(o, "t1") {
		t.Fatalf("a refused apply applied:\n%s", o)
	}

	apply := func(version string) time.Time {
		t.Helper()
		p := writeFile(t, "tenants.yaml", fmt.Sprintf("jobs:\n  - {name: t1, schedule: \"@every 1s\", run: {command: [%s/record-%s]}}\n", hooks, version))
		at := time.Now()
		if o, e, code := runCmd(t, nil, "jobs", "apply", "-f", p, "--set", "tenants", "--config", cfg); code != 0 {
			t.Fatalf("apply %s: exit %d\n%s%s", version, code, o, e)
		}
		return at
	}
	waitRuns := func(version string, n int) {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			byTick, _ := runLog(t, out)
			got := 0
			for _, vs := range byTick {
				if vs[0] == version {
					got++
				}
			}
			if got >= n {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%d ticks ran with definition %s within 60s, want %d", got, version, n)
			}
		}
	}
	apply("a")
	waitRuns("a", 3)
	apply("b")
	waitRuns("b", 3)
	removed := time.Now()
	if o, e, code := runCmd(t, nil, "jobs", "rm", "t1", "--set", "tenants", "--config", cfg); code != 0 {
		t.Fatalf("rm: exit %d\n%s%s", code, o, e)
	}
	// Stopped: no tick of a slot later than the leader's next read of the
	// jobs (each second) plus one slot runs; wait for the log to be still.
	var order []string
	for prev, still := -1, time.Now(); ; time.Sleep(200 * time.Millisecond) {
		_, order = runLog(t, out)
		if len(order) != prev {
			prev, still = len(order), time.Now()
		}
		if time.Since(still) > 3*time.Second {
			break
		}
		if time.Since(removed) > 60*time.Second {
			t.Fatal("t1 still runs 60s after its removal")
		}
	}
	byTick, _ := runLog(t, out)
	lastA, firstB := int64(0), int64(1<<62)
	for tick, vs := range byTick {
		if len(vs) != 1 {
			t.Errorf("tick %s ran %d times (%v), want once", tick, len(vs), vs)
		}
		s := slotOfTick(t, tick)
		if vs[0] == "a" {
			lastA = max(lastA, s)
		} else {
			firstB = min(firstB, s)
		}
		if s > removed.Add(5*time.Second).UnixMilli() {
			t.Errorf("tick %s ran, %s after the removal", tick, time.UnixMilli(s).Sub(removed))
		}
	}
	if lastA >= firstB {
		t.Errorf("a tick claimed under definition a (slot %d) came after one claimed under b (slot %d): each tick runs with the definition it was claimed under, and the change applies from its next slot", lastA, firstB)
	}
	// Every replica's worker saw the definitions (the job ran wherever it was fetched).
	ran := 0
	for _, p := range procs {
		p.mu.Lock()
		for _, ev := range p.events {
			if strings.Contains(ev.Raw, "job defined at run time: its worker runs it") {
				ran++
				break
			}
		}
		p.mu.Unlock()
	}
	if ran != 3 {
		t.Errorf("%d of 3 replicas registered the job defined at run time", ran)
	}
}
