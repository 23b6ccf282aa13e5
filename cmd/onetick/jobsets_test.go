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

	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// TestJobsAtRunTime: jobs applied to a running fleet are fired without a
// restart, validated as the file is (bad input changes nothing), refused
// when the file defines the name, applied through the HTTP API too, and a
// change made while the leader is replaced is not lost.
func TestJobsAtRunTime(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "rt.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: rt
lease:
  ttl: 2s
http:
  token: ${ONETICK_TEST_TOKEN}
jobs:
  - {name: base, schedule: "@every 1s"}
`, srv.URL()))
	t.Setenv("ONETICK_TEST_TOKEN", e2eToken)
	env := []string{"ONETICK_TEST_TOKEN=" + e2eToken}
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	count := func(job string) int {
		n, _ := be.Client().XLen(context.Background(), "rt:stream:"+job).Result()
		return int(n)
	}
	waitCount := func(job string, n int) {
		t.Helper()
		for end := time.Now().Add(15 * time.Second); count(job) < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s did not reach %d ticks", job, n)
			}
		}
	}
	r0 := startProc(t, "r0", "--config", cfg)
	addr := <-r0.addr
	r0.waitEvent("became leader", 0, 10*time.Second)
	r1 := startProc(t, "r1", "--config", cfg)
	r1addr := <-r1.addr

	tenants := writeFile(t, "tenants.yaml", "jobs:\n  - {name: t1, schedule: \"@every 1s\"}\n  - {name: t2, schedule: \"H/2 * * * * *\"}\n")
	out, _, code := runCmd(t, env, "jobs", "apply", "-f", tenants, "--set", "tenants", "--dry-run", "--config", cfg)
	if code != 0 || !strings.Contains(out, "dry run") || !strings.Contains(out, "+ t1") {
		t.Fatalf("dry run: %d\n%s", code, out)
	}
	for _, bad := range []string{
		"jobs:\n  - {name: base, schedule: \"@every 1s\"}\n",                 // the file's job
		"jobs:\n  - {name: t3, schedule: \"61 * * * *\"}\n",                  // invalid schedule
		"jobs:\n  - {name: t3, schedule: \"@daily\", run: {command: [x]}}\n", // run block
	} {
		p := writeFile(t, "bad.yaml", bad)
		_, stderr, code := runCmd(t, env, "jobs", "apply", "-f", p, "--set", "tenants", "--config", cfg)
		if code != 2 || !strings.Contains(stderr, "bad.yaml:2") {
			t.Errorf("bad set %q: code %d, stderr %q", bad, code, stderr)
		}
	}
	if v, _ := be.JobsVersion(context.Background()); v != 0 {
		t.Fatalf("the dry run or a refused apply changed the jobs (version %d)", v)
	}
	out, _, code = runCmd(t, env, "jobs", "apply", "-f", tenants, "--set", "tenants", "--config", cfg)
	if code != 0 || !strings.Contains(out, "2 added") {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	waitCount("t1", 2)
	waitCount("t2", 1)

	// Through the API: the set becomes t1 only (t2 removed, t4 added).
	req, _ := http.NewRequest("PUT", "http://"+addr+"/api/v1/jobsets/tenants",
		strings.NewReader("jobs:\n  - {name: t1, schedule: \"@every 1s\"}\n  - {name: t4, schedule: \"@every 1s\"}\n"))
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"removed":["t2"]`) {
		t.Fatalf("PUT jobset: %d %s", resp.StatusCode, body)
	}
	waitCount("t4", 1)
	n2 := count("t2")

	// A change while the leader is replaced.
	r0.signal(syscall.SIGTERM)
	late := writeFile(t, "late.yaml", "jobs:\n  - {name: t1, schedule: \"@every 1s\"}\n  - {name: t4, schedule: \"@every 1s\"}\n  - {name: t5, schedule: \"@every 1s\"}\n")
	if out, stderr, code := runCmd(t, env, "jobs", "apply", "-f", late, "--set", "tenants", "--config", cfg); code != 0 {
		t.Fatalf("apply during the handover: %d %s %s", code, out, stderr)
	}
	r0.wait(t, 10*time.Second)
	r1.waitEvent("became leader", 0, 10*time.Second)
	waitCount("t5", 2)
	if n := count("t2"); n > n2+1 {
		t.Fatalf("t2 fired %d more ticks after its removal", n-n2)
	}

	// A job defined at run time is listed and controlled like a file job.
	out, _, code = runCmd(t, env, "jobs", "--config", cfg)
	if code != 0 || !strings.Contains(out, "base") || !strings.Contains(out, "t4") || !strings.Contains(out, "t5") {
		t.Fatalf("jobs: %d\n%s", code, out)
	}
	if out, stderr, code := runCmd(t, env, "pause", "t4", "--reason", "tenant offboarding", "--config", cfg); code != 0 {
		t.Fatalf("pause of a run-time job: %d %s %s", code, out, stderr)
	}
	out, _, code = runCmd(t, env, "status", "--config", cfg)
	if code != 0 || !strings.Contains(out, "t4") || !strings.Contains(out, "tenant offboarding") {
		t.Fatalf("status after pausing t4: %d\n%s", code, out)
	}
	before := count("t5")
	if out, stderr, code := runCmd(t, env, "trigger", "t5", "--key", "manual-1", "--config", cfg); code != 0 || !strings.Contains(out, "manual-1") {
		t.Fatalf("trigger of a run-time job: %d %s %s", code, out, stderr)
	}
	if n := count("t5"); n <= before {
		t.Fatalf("trigger of t5 enqueued nothing (%d entries before, %d after)", before, n)
	}
	resp, err = http.Get("http://" + r1addr + "/api/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"t5"`) {
		t.Fatalf("GET /api/v1/jobs does not list t5: %d %s", resp.StatusCode, body)
	}
	if _, stderr, code := runCmd(t, env, "pause", "nope", "--reason", "x", "--config", cfg); code != 2 || !strings.Contains(stderr, "t5") {
		t.Fatalf("pause of an unknown job: code %d, stderr %q (want 2 and the known jobs, run-time ones included)", code, stderr)
	}
	out, _, code = runCmd(t, env, "jobs", "rm", "t5", "--set", "tenants", "--config", cfg)
	if code != 0 || !strings.Contains(out, "1 removed") {
		t.Fatalf("jobs rm: %d\n%s", code, out)
	}
}
