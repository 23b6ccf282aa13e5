package main_test

import (
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/internal/redistest"
)

// noSecret fails the test when text holds one of secrets.
func noSecret(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s reveals %q:\n%s", where, s, text)
		}
	}
}

// everyPath runs a replica on cfg and reads what it shows of its store on
// every path (its log, /readyz, /status, the status page, the API), then
// what validate, status and migrate print, and checks that none of it
// holds a secret; want is what /readyz and status must still say.
func everyPath(t *testing.T, cfg, want string, secrets ...string) {
	t.Helper()
	o, e, code := runCmd(t, nil, "validate", "--config", cfg)
	if code != 0 || !strings.Contains(o, want) {
		t.Fatalf("validate: %d %q %q, want %q", code, o, e, want)
	}
	noSecret(t, "validate", o+e, secrets...)
	p := startProc(t, "r0", "--config", cfg)
	addr := <-p.addr
	p.waitEvent("became leader", 0, 15*time.Second)
	code, body := getURL(t, "http://"+addr+"/readyz")
	if code != 200 || !strings.Contains(body, want) {
		t.Fatalf("/readyz %d %q, want %q", code, body, want)
	}
	noSecret(t, "/readyz", body, secrets...)
	for _, path := range []string{"/status", "/", "/api/v1/jobs", "/api/v1/controls"} {
		code, body := getURL(t, "http://"+addr+path)
		if code != 200 {
			t.Fatalf("%s: %d %q", path, code, body)
		}
		noSecret(t, path, body, secrets...)
	}
	o, e, code = runCmd(t, nil, "status", "--config", cfg)
	if code != 0 || !strings.Contains(o, want) {
		t.Fatalf("status: %d %q %q, want %q", code, o, e, want)
	}
	noSecret(t, "status", o+e, secrets...)
	o, e, _ = runCmd(t, nil, "migrate", "--config", cfg)
	noSecret(t, "migrate", o+e, secrets...)
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	p.mu.Lock()
	var log strings.Builder
	for _, ev := range p.events {
		log.WriteString(ev.Raw + "\n")
	}
	p.mu.Unlock()
	if !strings.Contains(log.String(), want) {
		t.Errorf("the start-up log does not name the store (%q):\n%s", want, log.String())
	}
	noSecret(t, "the log", log.String(), secrets...)
}

// TestSecretsOnPostgres: a PostgreSQL URL carrying a password in its user
// information and in its query (password= and sslpassword=, which pgx
// accepts) never shows it: not in validate, the log, /readyz, /status,
// the page, status, migrate, nor in "cannot reach PostgreSQL at".
func TestSecretsOnPostgres(t *testing.T) {
	schema := pgtest.Schema(t)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	// Trust authentication ignores the passwords; sslmode=disable ignores
	// sslpassword.
	secrets := []string{"pg-user-s3cret", "pg-query-s3cret", "pg-sslpw-s3cret"}
	u.User = url.UserPassword(u.User.Username(), secrets[0])
	q := u.Query()
	q.Set("password", secrets[1])
	q.Set("sslpassword", secrets[2])
	u.RawQuery = q.Encode()
	yaml := "backend:\n  postgres:\n    url: %s\n    schema: %s\nlease: {ttl: 2s}\njobs:\n  - {name: hb, schedule: \"@every 1s\"}\n"
	cfg := writeFile(t, "pg.yaml", fmt.Sprintf(yaml, u.String(), schema))
	everyPath(t, cfg, "postgres://"+u.User.Username()+":xxxxx@"+u.Host, secrets...)

	// Unreachable: the error names the masked URL.
	u.Host = "127.0.0.1:1"
	cfg = writeFile(t, "pg-down.yaml", fmt.Sprintf(yaml, u.String(), schema))
	for _, args := range [][]string{{"run", "--listen", "off"}, {"status"}, {"migrate"}} {
		cmd := args[0]
		_, e, code := runCmd(t, nil, append(args, "--config", cfg)...)
		if code != 1 || !strings.Contains(e, "cannot reach PostgreSQL at postgres://postgres:xxxxx@127.0.0.1:1/") {
			t.Errorf("%s on an unreachable PostgreSQL: %d %q", cmd, code, e)
		}
		noSecret(t, cmd+" on an unreachable PostgreSQL", e, secrets...)
	}
	// A keyword/value string is refused without its value.
	cfg = writeFile(t, "pg-kv.yaml", fmt.Sprintf(yaml, "'host=db password=pg-kv-s3cret'", schema))
	_, e, code := runCmd(t, nil, "validate", "--config", cfg)
	if code != 2 || !strings.Contains(e, "backend.postgres.url") {
		t.Errorf("keyword/value URL: %d %q", code, e)
	}
	noSecret(t, "validate of a keyword/value URL", e, "pg-kv-s3cret")
}

// TestSecretsOnRedis: a Redis password in the URL (the server requires
// it) never shows, on any path; neither does one in a URL that does not
// parse (url.Parse's error repeats the URL whole).
func TestSecretsOnRedis(t *testing.T) {
	const pw = "r3dis-s3cret-pw"
	srv := redistest.Start(t, redistest.RequirePass(pw))
	cfg := writeFile(t, "redis.yaml", fmt.Sprintf(
		"backend:\n  redis:\n    url: redis://:%s@%s/0?dial_timeout=3s\n    prefix: sec\nlease: {ttl: 2s}\njobs:\n  - {name: hb, schedule: \"@every 1s\"}\n", pw, srv.Addr()))
	everyPath(t, cfg, "redis://:xxxxx@"+srv.Addr()+"/0?dial_timeout=3s", pw)

	for _, bad := range []string{"redis://:hun#ter2-s3cret@127.0.0.1:1/0", "redis://:hunter2-s3cret@127.0.0.1:1/0?password=hunter2-s3cret",
		"redis://:hunter2-s3cret%zz@127.0.0.1:1/0", "unix://:hunter2-s3cret@/nonexistent/redis.sock?password=hunter2-s3cret"} {
		_, e, code := runCmd(t, nil, "run", "--config", "../../examples/hello.yaml", "--listen", "off", "--redis", bad)
		if code == 0 || e == "" {
			t.Errorf("--redis %q: exit %d %q", bad, code, e)
		}
		noSecret(t, "--redis "+bad, e, "hunter2", "ter2-s3cret")
	}
}
