package config

import (
	"testing"
	"time"
)

var runErrCases = []errCase{
	{name: "run with both executors", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command: [true]\n      http: {url: 'https://x', secrets: [s]}\n",
		want: []want{{6, "jobs[0] (a).run", "has both command and http"}}},
	{name: "run with neither", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      overlap: skip\n",
		want: []want{{4, "jobs[0] (a).run", "needs a command or an http call"}}},
	{name: "run overlap", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command: [true]\n      overlap: sometimes\n",
		want: []want{{6, "jobs[0] (a).run.overlap", "must be skip, queue or allow"}}},
	{name: "run command empty", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command: []\n",
		want: []want{{5, "jobs[0] (a).run.command", "empty list"}}},
	{name: "run command env reserved", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command:\n        argv: [x]\n        env: {ONETICK_JOB: y}\n",
		want: []want{{7, "jobs[0] (a).run.command.env.ONETICK_JOB", "ONETICK_JOB: names starting with ONETICK_"}}},
	// What the executors refuse when a replica starts is refused here.
	{name: "run http secret not base64", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http:\n        url: 'https://x'\n        secrets:\n          - whsec_%%%%top-s3cret%%%%\n", secret: "top-s3cret",
		want: []want{{8, "jobs[0] (a).run.http.secrets[0]", "is not standard base64"}}},
	{name: "run http secret without prefix", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http: {url: 'https://x', secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u, top-s3cret-raw]}\n", secret: "top-s3cret",
		want: []want{{5, "jobs[0] (a).run.http.secrets[1]", "must start with \"whsec_\""}}},
	{name: "run http header control character", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http:\n        url: 'https://x'\n        secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u]\n        headers:\n          X-Ok: fine\n          X-Team: \"a\\rb\"\n",
		want: []want{{10, "jobs[0] (a).run.http.headers.X-Team", "control character"}}},
	{name: "run http reserved header", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http:\n        url: 'https://x'\n        secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u]\n        headers: {Content-Type: text/plain}\n",
		want: []want{{8, "jobs[0] (a).run.http.headers.Content-Type", "set by the executor"}}},
	{name: "run http method", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http: {url: 'https://x', method: 'PO ST', secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u]}\n",
		want: []want{{5, "jobs[0] (a).run.http.method", "is not an HTTP method"}}},
	{name: "run command NUL in argv", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command:\n        - /bin/echo\n        - \"a\\0b\"\n",
		want: []want{{7, "jobs[0] (a).run.command[1]", "NUL byte"}}},
	{name: "run command NUL in dir", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command:\n        argv: [x]\n        dir: \"/tmp\\0\"\n",
		want: []want{{7, "jobs[0] (a).run.command.dir", "NUL byte"}}},
	{name: "run command kill grace", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command:\n        argv: [x]\n        kill_grace: -1s\n",
		want: []want{{7, "jobs[0] (a).run.command.kill_grace", "must not be negative"}}},
	{name: "run http url", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http: {url: 'ftp://x', secrets: [s]}\n",
		want: []want{{5, "jobs[0] (a).run.http.url", "absolute http:// or https://"}}},
	{name: "run http without secrets", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http: {url: 'https://x'}\n",
		want: []want{{5, "jobs[0] (a).run.http.secrets", "is required"}}},
	{name: "run http secret not in messages", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      http: {url: 'https://x', secrets: [whsec_topsecret], method: [x]}\n",
		secret: "whsec_topsecret", want: []want{{5, "jobs[0] (a).run.http.method", "must be a string"}}},
	{name: "run attempts", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command: [true]\n      max_attempts: 0x\n",
		want: []want{{6, "jobs[0] (a).run.max_attempts", "must be an integer"}}},
	{name: "run backoff order", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    run:\n      command: [true]\n      backoff: 1m\n      max_backoff: 1s\n",
		want: []want{{7, "jobs[0] (a).run.max_backoff", "below backoff"}}},
	{name: "worker heartbeat", yaml: "worker:\n  takeover_idle: 3s\n  heartbeat: 2s\n",
		want: []want{{3, "worker.heartbeat", "at most a third of takeover_idle"}}},
	{name: "worker retention", yaml: "worker:\n  takeover_idle: 1m\n  done_retention: 10s\n",
		want: []want{{3, "worker.done_retention", "at least takeover_idle"}}},
	{name: "role", yaml: "role: manager\n",
		want: []want{{1, "role", "must be both, scheduler or worker"}}},
	{name: "http token too short", yaml: "http:\n  token: ${T}\n", env: map[string]string{"T": "short"},
		secret: "short", want: []want{{2, "http.token", "at least 16 random bytes"}}},
}

func TestRunErrors(t *testing.T) { checkCases(t, runErrCases) }

func TestRunParse(t *testing.T) {
	f, err := parse("ok.yaml", []byte(`role: worker
worker:
  concurrency: 4
  takeover_idle: 6s
jobs:
  - name: report
    schedule: "@hourly"
    run:
      command: [/usr/bin/report, --hourly]
  - name: hook
    schedule: "@hourly"
    run:
      http:
        url: https://example.com/hook
        headers: {X-Env: prod}
        secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u]
      overlap: allow
      max_attempts: 5
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if f.Role != RoleWorker || f.Worker.Concurrency != 4 || f.Worker.Heartbeat.D() != time.Second || f.Worker.Group != DefaultWorkerGroup {
		t.Fatalf("role %q worker %+v", f.Role, f.Worker)
	}
	r := f.Jobs[0].Run
	if r == nil || r.Command == nil || len(r.Command.Argv) != 2 || r.MaxAttempts != DefaultMaxAttempts || r.Overlap != "skip" || r.Timeout != 0 {
		t.Fatalf("report run %+v", r)
	}
	h := f.Jobs[1].Run
	if h == nil || h.HTTP == nil || h.HTTP.Headers["X-Env"] != "prod" || h.Overlap != "allow" || h.MaxAttempts != 5 || h.Timeout.D() != DefaultHTTPTimeout {
		t.Fatalf("hook run %+v", h)
	}
}
