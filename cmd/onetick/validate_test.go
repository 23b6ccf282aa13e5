package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runChecked runs `onetick run` with args until it has started (then
// SIGTERM) or exited, and returns its exit code and its standard error.
func runChecked(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "--log-format", "json", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), `"msg":"onetick started"`) {
				once = true
				close(started)
			}
		}
	}()
	select {
	case <-started:
		_ = cmd.Process.Signal(syscall.SIGTERM)
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		t.Fatalf("run %v neither started nor exited within 30s:\n%s", args, out.String())
	}
	<-done
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// problems are the lines of a command's standard error that report bad
// input ("onetick: FILE:LINE: FIELD: message").
func problems(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "onetick: ") {
			out = append(out, l)
		}
	}
	return out
}

// TestValidateAgreesWithRun: validate accepts exactly what run starts
// with, on every shipped configuration and on every bad case here, and
// says the same about each bad one; run refuses a bad configuration before
// it creates its store (the state file does not exist afterwards).
func TestValidateAgreesWithRun(t *testing.T) {
	const goodSecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u"
	head := "jobs:\n  - name: a\n    schedule: '@every 1s'\n    run:\n"
	cases := []struct {
		name, config string // config: a path, or the file's text
		env          []string
		bad          string // "": valid; else a part of the problem line
	}{
		{name: "examples/hello.yaml", config: "../../examples/hello.yaml"},
		// The shipped Redis files point at a port nothing listens on, so
		// run gets as far as connecting and exits 1.
		{name: "examples/redis.yaml", config: "../../examples/redis.yaml", env: []string{"ONETICK_REDIS_URL=redis://127.0.0.1:1/0?dial_timeout=1s"}},
		{name: "deploy/systemd/onetick.yaml", config: "../../deploy/systemd/onetick.yaml", env: []string{"ONETICK_REDIS_URL=redis://127.0.0.1:1/0?dial_timeout=1s"}},
		{name: "examples/sentinel.yaml", config: "../../examples/sentinel.yaml"},
		{name: "examples/cluster.yaml", config: "../../examples/cluster.yaml"},
		{name: "a command job", config: head + "      command: [/bin/true]\n"},
		{name: "webhook secret not base64", config: head + "      http:\n        url: https://example.invalid/hook\n        secrets: ['whsec_not base64!']\n",
			bad: "bad.yaml:7: jobs[0] (a).run.http.secrets[0]: the part after \"whsec_\" is not standard base64"},
		{name: "header value with a control character", config: head + "      http:\n        url: https://example.invalid/hook\n        secrets: [" + goodSecret + "]\n        headers: {X-Team: \"a\\rInjected: 1\"}\n",
			bad: "bad.yaml:8: jobs[0] (a).run.http.headers.X-Team: value contains a control character"},
		{name: "reserved header", config: head + "      http:\n        url: https://example.invalid/hook\n        secrets: [" + goodSecret + "]\n        headers: {Webhook-Signature: x}\n",
			bad: "bad.yaml:8: jobs[0] (a).run.http.headers.Webhook-Signature: is set by the executor"},
		{name: "method", config: head + "      http: {url: 'https://example.invalid/hook', method: 'GET /', secrets: [" + goodSecret + "]}\n",
			bad: "bad.yaml:5: jobs[0] (a).run.http.method: \"GET /\" is not an HTTP method"},
		{name: "reserved variable", config: head + "      command:\n        argv: [/bin/true]\n        env: {ONETICK_TICK: x}\n",
			bad: "bad.yaml:7: jobs[0] (a).run.command.env.ONETICK_TICK: ONETICK_TICK: names starting with ONETICK_ are set by onetick"},
		{name: "in-process store for a worker", config: "backend: {memory: {}}\nrole: worker\n" + head + "      command: [/bin/true]\n",
			bad: "the in-process store lives inside its one replica"},
		{name: "bad ONETICK_REDIS_URL", config: "../../examples/hello.yaml", env: []string{"ONETICK_REDIS_URL=http://example.invalid"},
			bad: "ONETICK_REDIS_URL: invalid Redis URL"},
		{name: "a URL for a Sentinel topology", config: "../../examples/sentinel.yaml", env: []string{"ONETICK_REDIS_URL=redis://127.0.0.1:1/0"},
			bad: "ONETICK_REDIS_URL: ../../examples/sentinel.yaml names a Redis sentinel (backend.redis.sentinel); a URL does not apply"},
		{name: "credentials in a sentinel address", config: "backend:\n  redis:\n    sentinel:\n      primary: m\n      addrs: ['u:s3cret@127.0.0.1:1']\njobs: []\n",
			bad: "bad.yaml:5: backend.redis.sentinel.addrs[0]: want host:port, got \"xxxxx@127.0.0.1:1\""},
		{name: "missing CA file", config: "backend:\n  redis:\n    url: rediss://127.0.0.1:1\n    tls: {ca_file: /nonexistent/ca.pem}\njobs: []\n",
			bad: "backend.redis.tls.ca_file: cannot read /nonexistent/ca.pem"},
		{name: "shards on the default file store", config: "shards: 2\njobs: []\n",
			bad: "bad.yaml:1: shards: 2 shards need a shared store"},
		{name: "shards on the file store named", config: "backend:\n  file: {path: x.db}\nshards: 3\njobs: []\n",
			bad: "bad.yaml:3: shards: 3 shards need a shared store (backend.redis, backend.postgres or backend.memory): backend.file at line 2 is the file store"},
		{name: "shards on the in-process store", config: "backend: {memory: {}}\nshards: 2\njobs: []\n"},
		{name: "shards on a Redis given by ONETICK_REDIS_URL", config: "backend: {}\nshards: 2\njobs: []\n",
			env: []string{"ONETICK_REDIS_URL=redis://127.0.0.1:1/0?dial_timeout=1s"}},
		{name: "four shards on Redis", config: "backend: {redis: {url: 'redis://127.0.0.1:1/0?dial_timeout=1s'}}\nshards: 4\njobs: []\n"},
		{name: "shards and deadlines", config: "backend: {redis: {url: 'redis://127.0.0.1:1/0'}}\nshards: 4\ndeadlines: {check_every: 5s}\njobs: []\n"},
		{name: "one shard on Redis", config: "backend: {redis: {url: 'redis://127.0.0.1:1/0'}}\nshards: 1\njobs: []\n"},
		{name: "bad schedule", config: "jobs:\n  - {name: a, schedule: '61 * * * *'}\n", bad: "bad.yaml:2: jobs[0] (a).schedule"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := tc.config
			if strings.Contains(tc.config, "\n") {
				path = filepath.Join(dir, "bad.yaml")
				if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			vout, verr, vcode := runCmd(t, tc.env, "validate", "--config", path)
			state := filepath.Join(dir, "state", "onetick.db")
			args := []string{"--config", path}
			if !strings.Contains(string(text), "backend:") { // --data is for the default store, the file
				args = append(args, "--data", state)
			}
			rcode, rerr := runChecked(t, tc.env, args...)
			t.Logf("validate: %d %q %q; run: %d", vcode, vout, verr, rcode)
			if tc.bad == "" {
				if vcode != 0 || rcode == 2 {
					t.Fatalf("validate exit %d (%s), run exit %d:\n%s", vcode, verr, rcode, rerr)
				}
				return
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("run created its store (%v) before refusing the configuration", err)
			}
			if vcode != 2 || rcode != 2 {
				t.Fatalf("validate exit %d, run exit %d, want 2 and 2\nvalidate: %s\nrun: %s", vcode, rcode, verr, rerr)
			}
			if !strings.Contains(verr, tc.bad) {
				t.Errorf("validate says %q, want %q", verr, tc.bad)
			}
			if v, r := problems(verr), problems(rerr); strings.Join(v, "\n") != strings.Join(r, "\n") {
				t.Errorf("validate and run disagree:\nvalidate: %q\nrun:      %q", v, r)
			}
		})
	}
}

// TestTLSWarnings: a TLS connection whose server is not verified
// (insecure_skip_verify, or a PostgreSQL sslmode short of verify-ca to
// another host) is accepted with a warning from validate and a WARN line
// when run starts; a verified one is not warned about.
func TestTLSWarnings(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string // want "": no warning
	}{
		{"redis insecure", "backend:\n  redis:\n    url: rediss://127.0.0.1:1/0?dial_timeout=1s\n    tls: {insecure_skip_verify: true}\njobs: []\n",
			"bad.yaml:4: backend.redis.tls.insecure_skip_verify: warning: is true: the server's certificate is not verified"},
		{"redis verified", "backend:\n  redis:\n    url: rediss://127.0.0.1:1/0?dial_timeout=1s\njobs: []\n", ""},
		{"postgres require", "backend:\n  postgres:\n    url: postgres://u@db.invalid:1/app?sslmode=require&connect_timeout=1\njobs: []\n",
			"bad.yaml:3: backend.postgres.url: warning: sslmode=require does not verify the server"},
		{"postgres default", "backend:\n  postgres:\n    url: postgres://u@db.invalid:1/app?connect_timeout=1\njobs: []\n",
			"bad.yaml:3: backend.postgres.url: warning: no sslmode"},
		{"postgres verify-full", "backend:\n  postgres:\n    url: postgres://u@db.invalid:1/app?sslmode=verify-full&connect_timeout=1\njobs: []\n", ""},
		{"postgres loopback", "backend:\n  postgres:\n    url: postgres://u@127.0.0.1:1/app?sslmode=disable&connect_timeout=1\njobs: []\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, "bad.yaml", tc.yaml)
			_, verr, code := runCmd(t, nil, "validate", "--config", cfg)
			if code != 0 {
				t.Fatalf("validate: exit %d %q", code, verr)
			}
			_, rerr := runChecked(t, nil, "--config", cfg)
			if tc.want == "" {
				if verr != "" || strings.Contains(rerr, `"level":"WARN"`) {
					t.Errorf("a warning where none is due: validate %q, run %q", verr, rerr)
				}
				return
			}
			if !strings.Contains(verr, tc.want) {
				t.Errorf("validate says %q, want %q", verr, tc.want)
			}
			field := tc.want[strings.Index(tc.want, ": ")+2 : strings.Index(tc.want, ": warning")]
			if !strings.Contains(rerr, `"level":"WARN"`) || !strings.Contains(rerr, `"field":"`+field+`"`) {
				t.Errorf("run logs no warning about %s:\n%s", field, rerr)
			}
		})
	}
}
