package main_test

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/pgtest"
)

// TestRunOnPostgres: three replicas on PostgreSQL (backend.postgres), one
// schema of their own. One leads; every tick of a command job runs once
// across the fleet, through a SIGTERM handover, and has its succeeded
// record in the run ledger; the commands from outside (status, pause,
// jobs apply, runs, why) work on the same database; the URL's password
// never reaches a log.
func TestRunOnPostgres(t *testing.T) {
	schema := pgtest.Schema(t)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	const password = "pg-secret-7f3a" // trust authentication ignores it
	if _, has := u.User.Password(); !has {
		u.User = url.UserPassword(u.User.Username(), password)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "ran")
	cfg := writeFile(t, "pg.yaml", fmt.Sprintf(`backend:
  postgres:
    url: %s
    schema: %s
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
`, u.String(), schema, out))

	o, e, code := runCmd(t, nil, "validate", "--config", cfg)
	if code != 0 || !strings.Contains(o, "backend postgres") || strings.Contains(o+e, password) {
		t.Fatalf("validate: %d %q %q", code, o, e)
	}
	procs := map[string]*proc{}
	for _, n := range []string{"r0", "r1", "r2"} {
		procs[n] = startProc(t, n, "--config", cfg)
		<-procs[n].addr
	}
	leader := ""
	for end := time.Now().Add(15 * time.Second); leader == ""; time.Sleep(20 * time.Millisecond) {
		for n, p := range procs {
			p.mu.Lock()
			for _, ev := range p.events {
				if ev.Msg == "became leader" {
					leader = n
				}
			}
			p.mu.Unlock()
		}
		if time.Now().After(end) {
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

	// Every tick that ran has its story in the ledger, whichever replica
	// claimed and ran it (a record is noted when its run has finished).
	var story onetick.Run
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ok := map[string]onetick.Run{}
		for _, r := range runsPage(t, "cmd", "--fate", "succeeded", "--limit", "1000", "--config", cfg).Runs {
			ok[r.Tick] = r
		}
		missing := ""
		for tk := range seen {
			if _, found := ok[tk]; !found {
				missing = tk
			}
		}
		if missing == "" {
			for _, r := range ok {
				story = r
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("tick %s ran but has no succeeded record in the ledger within 30s", missing)
		}
	}
	if ev := story.Events; len(ev) < 3 || ev[0].What != onetick.EventEnqueued || ev[len(ev)-1].What != onetick.EventSucceeded {
		t.Fatalf("record %+v: want enqueued ... succeeded", story)
	}
	if o, e, code := runCmd(t, nil, "why", "cmd", strconv.FormatInt(int64(story.Slot), 10), "--config", cfg); code != 0 ||
		!strings.Contains(o, "fate: succeeded") || !strings.Contains(o, "started") {
		t.Fatalf("why: %d\n%s\n%s", code, o, e)
	}

	o, e, code = runCmd(t, nil, "pause", "other", "--config", cfg, "--reason", "maintenance")
	if code != 0 {
		t.Fatalf("pause: %d %s %s", code, o, e)
	}
	o, e, code = runCmd(t, nil, "status", "--config", cfg)
	if code != 0 || !strings.Contains(o, "postgres") || !regexp.MustCompile(`other\s.*paused`).MatchString(o) ||
		!regexp.MustCompile(`cmd\s+succeeded`).MatchString(o) || strings.Contains(o+e, password) {
		t.Fatalf("status: %d\n%s\n%s", code, o, e)
	}
	jobs := writeFile(t, "more.yaml", "jobs:\n  - name: added\n    schedule: \"@every 1s\"\n")
	if o, e, code := runCmd(t, nil, "jobs", "apply", "-f", jobs, "--set", "extra", "--config", cfg); code != 0 || !strings.Contains(o, "1 added") {
		t.Fatalf("jobs apply: %d %s %s", code, o, e)
	}
	for n, p := range procs {
		p.mu.Lock()
		for _, ev := range p.events {
			if strings.Contains(ev.Raw, password) {
				t.Errorf("%s logged the password: %s", n, ev.Raw)
			}
		}
		p.mu.Unlock()
	}
}

// TestMigrateCommand: the operator's commands never migrate a PostgreSQL
// schema (a newer CLI must not change it under a running fleet): they
// refuse one that is not at this onetick's version and name the command
// that migrates it; `onetick migrate` does, once.
func TestMigrateCommand(t *testing.T) {
	schema := pgtest.Schema(t)
	cfg := writeFile(t, "pg.yaml", fmt.Sprintf("backend:\n  postgres:\n    url: %s\n    schema: %s\njobs:\n  - {name: a, schedule: \"@hourly\"}\n", pgtest.URL(), schema))
	if _, e, code := runCmd(t, nil, "status", "--config", cfg); code != 1 || !strings.Contains(e, "version 0") || !strings.Contains(e, "onetick migrate --config") {
		t.Fatalf("status on an empty schema: code %d, stderr %q", code, e)
	}
	o, e, code := runCmd(t, nil, "migrate", "--config", cfg)
	if code != 0 || !strings.Contains(o, "migrated to version") {
		t.Fatalf("migrate: %d %q %q", code, o, e)
	}
	if o, e, code = runCmd(t, nil, "migrate", "--config", cfg); code != 0 || !strings.Contains(o, "nothing to do") {
		t.Fatalf("second migrate: %d %q %q", code, o, e)
	}
	if o, e, code = runCmd(t, nil, "jobs", "--config", cfg); code != 0 || !strings.Contains(o, "a") {
		t.Fatalf("jobs after migrate: %d %q %q", code, o, e)
	}
	redisCfg := writeFile(t, "r.yaml", "backend:\n  redis:\n    url: redis://127.0.0.1:1/0\njobs:\n  - {name: a, schedule: \"@hourly\"}\n")
	if o, e, code = runCmd(t, nil, "migrate", "--config", redisCfg); code != 0 || !strings.Contains(o, "nothing to migrate") {
		t.Fatalf("migrate on Redis: %d %q %q", code, o, e)
	}
}
