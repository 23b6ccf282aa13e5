package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/redistest"
)

// The tests of this file run `onetick run` in this process (Main, the
// code path of the command) and talk to the listener it starts.

const daemonToken = "listener-test-token-0123456789"

// daemon is a running `onetick run`.
type daemon struct {
	addr string
	logs *logLines
	sigs chan os.Signal
	done chan int
}

// logLines collects the JSON log lines a daemon writes.
type logLines struct {
	mu    sync.Mutex
	buf   []byte
	lines []map[string]any
	raw   []string
	wake  chan struct{}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		l.lines = append(l.lines, m)
		l.raw = append(l.raw, line)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// wait returns the first log line with msg, waiting up to 30 s.
func (l *logLines) wait(t *testing.T, msg string, done <-chan int) map[string]any {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		for _, m := range l.lines {
			if m["msg"] == msg {
				l.mu.Unlock()
				return m
			}
		}
		l.mu.Unlock()
		select {
		case <-l.wake:
		case code := <-done:
			t.Fatalf("onetick run exited (%d) before logging %q:\n%s", code, msg, l.text())
		case <-deadline:
			t.Fatalf("onetick run did not log %q within 30s:\n%s", msg, l.text())
		}
	}
}

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.raw, "\n") + string(l.buf)
}

// writeConfig writes a configuration file into a new directory.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "onetick.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startDaemon runs `onetick run --memory` on the configuration file cfg
// (its http section as written: give listen with port 0) and returns once
// it listens. It is stopped with SIGTERM at the end of the test.
func startDaemon(t *testing.T, cfg string, args ...string) *daemon {
	t.Helper()
	return startRun(t, append([]string{"run", "--config", cfg, "--memory", "--log-format", "json", "--replica", "t"}, args...)...)
}

// startRun runs Main with argv, a `run` command whose listener logs
// "http listening", and returns once it listens; it is stopped as
// startDaemon's.
func startRun(t *testing.T, argv ...string) *daemon {
	t.Helper()
	d := &daemon{logs: &logLines{wake: make(chan struct{}, 1)}, sigs: make(chan os.Signal, 2), done: make(chan int, 1)}
	env := Env{Stdout: io.Discard, Stderr: d.logs, Signals: d.sigs}
	go func() {
		d.done <- Main(context.Background(), argv, env)
	}()
	d.addr = d.logs.wait(t, "http listening", d.done)["addr"].(string)
	t.Cleanup(func() {
		d.sigs <- syscall.SIGTERM
		select {
		case code := <-d.done:
			if code != 0 {
				t.Errorf("onetick run exited %d after SIGTERM:\n%s", code, d.logs.text())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("onetick run did not stop within 30s after SIGTERM")
		}
	})
	return d
}

// call makes one request with Host host ("" for the address itself) and
// returns the status and body.
func (d *daemon) call(t *testing.T, method, path, host, auth string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// controls returns the control log as the API lists it.
func (d *daemon) controls(t *testing.T) []map[string]any {
	t.Helper()
	code, body := d.call(t, "GET", "/api/v1/controls", "", "", nil)
	if code != 200 {
		t.Fatalf("GET /api/v1/controls: %d %s", code, body)
	}
	var out []map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// jobNames returns the names the API lists.
func (d *daemon) jobNames(t *testing.T) []string {
	t.Helper()
	code, body := d.call(t, "GET", "/api/v1/jobs", "", "", nil)
	if code != 200 {
		t.Fatalf("GET /api/v1/jobs: %d %s", code, body)
	}
	var jobs []struct{ Name string }
	if err := json.Unmarshal([]byte(body), &jobs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	return names
}

const daemonConfig = `http:
  listen: 127.0.0.1:0
  token: ` + daemonToken + `
jobs:
  - {name: a, schedule: "@every 1h"}
`

// hiddenLen hides a reader's length, so the client sends it chunked.
type hiddenLen struct{ io.Reader }

// TestListenerBodies: every body has its endpoint's limit (413, nothing
// applied, whether the length is announced or the body is chunked), is
// exactly one JSON object or one YAML document, and is never empty; a
// set is emptied only by an explicit jobs: []; a set's body reads no
// environment variable; the bearer scheme is matched in any case; a
// client's over-long key comes back cut.
func TestListenerBodies(t *testing.T) {
	t.Setenv("ONETICK_LISTENER_SECRET", "s3cr3t-from-the-daemon-env")
	d := startDaemon(t, writeConfig(t, daemonConfig))
	bearer := "Bearer " + daemonToken
	post := func(path, body string) (int, string) {
		return d.call(t, "POST", path, "", bearer, strings.NewReader(body))
	}
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"garbage after the object", "/api/v1/jobs/a/pause", `{"reason":"x"} GARBAGE`, 400},
		{"two objects", "/api/v1/jobs/a/pause", `{"reason":"x"}{"reason":"y"}`, 400},
		{"empty", "/api/v1/jobs/a/pause", "", 400},
		{"blank", "/api/v1/jobs/a/resume", " \n", 400},
		{"null", "/api/v1/jobs/a/pause", "null", 400},
		{"a list", "/api/v1/jobs/a/pause", `[{"reason":"x"}]`, 400},
		{"past 64 KiB", "/api/v1/jobs/a/pause", `{"reason":"` + strings.Repeat("x", 64<<10) + `"}`, 413},
		{"backfill past 64 KiB", "/api/v1/jobs/a/backfill", `{"reason":"` + strings.Repeat("x", 64<<10) + `"}`, 413},
		{"trigger past its limit", "/api/v1/jobs/a/trigger", `{"payload":"` + strings.Repeat("x", triggerBodyLimit) + `"}`, 413},
		{"trigger garbage", "/api/v1/jobs/a/trigger", `{"key":"k1"} x`, 400},
	} {
		code, body := post(tc.path, tc.body)
		if code != tc.want || !strings.Contains(body, `"error"`) || !strings.Contains(body, "nothing was changed") {
			t.Errorf("%s: %d %s, want %d with an error saying nothing was changed", tc.name, code, body, tc.want)
		}
	}
	// Chunked, the length unknown up front: the same 413.
	code, body := d.call(t, "POST", "/api/v1/jobs/a/pause", "", bearer,
		hiddenLen{strings.NewReader(`{"reason":"` + strings.Repeat("x", 64<<10) + `"}`)})
	if code != 413 {
		t.Errorf("chunked body past the limit: %d %s", code, body)
	}
	if c := d.controls(t); len(c) != 0 {
		t.Fatalf("refused bodies changed something: %v", c)
	}

	// The scheme in any case; a key of 10 KB comes back cut, its control
	// characters escaped.
	if code, body := d.call(t, "POST", "/api/v1/jobs/a/pause", "", "bearer "+daemonToken, strings.NewReader(`{"reason":"lower-case scheme"}`)); code != 200 {
		t.Fatalf("bearer in lower case: %d %s", code, body)
	}
	long := "\x1b[31m" + strings.Repeat("k", 10<<10)
	code, body = post("/api/v1/jobs/a/trigger", `{"key":`+jsonString(long)+`}`)
	var e apiError
	if code != 400 || json.Unmarshal([]byte(body), &e) != nil || len(e.Error) > 300 || strings.Contains(e.Error, "\x1b") ||
		!strings.Contains(e.Error, `\x1b[31m`) || !strings.Contains(e.Error, "(10245 bytes)") {
		t.Fatalf("over-long key: %d %q", code, body)
	}

	// Job sets: applied, then refused bodies change nothing.
	put := func(body io.Reader) (int, string) {
		return d.call(t, "PUT", "/api/v1/jobsets/tenants", "", bearer, body)
	}
	two := "jobs:\n  - {name: b1, schedule: \"@every 1h\"}\n  - {name: b2, schedule: \"@every 1h\"}\n"
	if code, body := put(strings.NewReader(two)); code != 200 || !strings.Contains(body, `"added":["b1","b2"]`) {
		t.Fatalf("apply: %d %s", code, body)
	}
	// The body: b1, 64 MiB of comment, then a third job. Announced
	// and chunked.
	big := "jobs:\n  - {name: b1, schedule: \"@every 1h\"}\n#" + strings.Repeat("x", jobSetBodyLimit) + "\n  - {name: b3, schedule: \"@every 1h\"}\n"
	for _, r := range []io.Reader{strings.NewReader(big), hiddenLen{strings.NewReader(big)}} {
		if code, body := put(r); code != 413 || !strings.Contains(body, "64 MiB") {
			t.Errorf("a set past 64 MiB: %d %.200s", code, body)
		}
	}
	for _, bad := range []string{
		"",                          // empty
		"# only a comment\n",        // no document
		"jobs:\n",                   // null
		"{}",                        // no jobs key
		"jobs: []\n---\njobs: []\n", // two documents
		"jobs:\n  - {name: b1, schedule: \"@every 1h\", payload: {k: \"${ONETICK_LISTENER_SECRET}\"}}\n", // the daemon's environment
	} {
		code, body := put(strings.NewReader(bad))
		if code != 400 || strings.Contains(body, "s3cr3t") {
			t.Errorf("set body %q: %d %s, want 400", bad, code, body)
		}
	}
	if got := strings.Join(d.jobNames(t), ","); got != "a,b1,b2" {
		t.Fatalf("after the refused sets the jobs are %s, want a,b1,b2", got)
	}
	code, body = put(strings.NewReader("jobs: []\n"))
	if code != 200 || !strings.Contains(body, `"removed":["b1","b2"]`) {
		t.Fatalf("jobs: []: %d %s", code, body)
	}
	if got := strings.Join(d.jobNames(t), ","); got != "a" {
		t.Fatalf("after jobs: [] the jobs are %s", got)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestListenerTimeouts: a body sent at a byte a second, headers sent at
// a byte a second, and an idle keep-alive connection are closed by the
// server within the configured bounds; past max_connections a request
// waits until a connection closes.
func TestListenerTimeouts(t *testing.T) {
	d := startDaemon(t, writeConfig(t, `http:
  listen: 127.0.0.1:0
  token: `+daemonToken+`
  read_timeout: 2s
  write_timeout: 4s
  idle_timeout: 1s
jobs:
  - {name: a, schedule: "@every 1h"}
`))
	// closedWithin sends head, then a byte a second, until the server
	// closes the connection; it returns how long that took.
	closedWithin := func(head string) time.Duration {
		t.Helper()
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		}()
		defer func() { close(stop); wg.Wait() }()
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.Copy(io.Discard, c) // until the server closes
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%q: the server kept the connection 30s", head)
		}
		return time.Since(start)
	}
	slowBody := "POST /api/v1/jobs/a/pause HTTP/1.1\r\nHost: " + d.addr + "\r\nAuthorization: Bearer " + daemonToken +
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"reason\":\""
	if took := closedWithin(slowBody); took > 20*time.Second {
		t.Errorf("a body at 1 byte/s was held %s (read_timeout 2s)", took)
	}
	if c := d.controls(t); len(c) != 0 {
		t.Fatalf("the dribbled request changed something: %v", c)
	}
	if took := closedWithin("GET /status HTTP/1.1\r\nHo"); took > 20*time.Second {
		t.Errorf("headers at 1 byte/s were held %s", took)
	}

	// Idle keep-alive: one request answered, then nothing.
	c, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+d.addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("keep-alive request: %v %+v", err, resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	answered := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = br.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("an idle keep-alive connection was kept 30s (idle_timeout 1s)")
	}
	if err == nil {
		t.Fatal("the server sent bytes on an idle connection")
	}
	if idle := time.Since(answered); idle < 900*time.Millisecond {
		t.Fatalf("the idle connection was closed after %s, before idle_timeout", idle)
	}
}

func TestListenerConnectionCap(t *testing.T) {
	d := startDaemon(t, writeConfig(t, `http:
  listen: 127.0.0.1:0
  max_connections: 2
  idle_timeout: 60s
jobs:
  - {name: a, schedule: "@every 1h"}
`))
	// Two keep-alive connections, each answered once, hold the two slots.
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", d.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+d.addr+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("held connection: %v", err)
		}
		resp.Body.Close()
		held = append(held, c)
	}
	get := func(timeout time.Duration) error {
		cl := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := cl.Get("http://" + d.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(2 * time.Second); err == nil {
		t.Fatal("a third connection was served while max_connections (2) were open")
	}
	held[0].Close()
	if err := get(20 * time.Second); err != nil {
		t.Fatalf("after one held connection closed: %v", err)
	}
}

// TestListenerHostAndToken: the status, the page and the API answer only
// to a Host that names the listener (421 otherwise, also with the token);
// probes and metrics to any; a listener off loopback without a token
// serves no reads, and says so at start and in validate.
func TestListenerHostAndToken(t *testing.T) {
	d := startDaemon(t, writeConfig(t, `http:
  listen: 127.0.0.1:0
  token: `+daemonToken+`
  allowed_hosts: [onetick.internal]
jobs:
  - {name: a, schedule: "@every 1h"}
`))
	_, port, _ := net.SplitHostPort(d.addr)
	for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "10.0.0.1:" + port, "onetick.internal.attacker.example"} {
		for _, path := range []string{"/status", "/", "/api/v1/jobs", "/api/v1/controls"} {
			code, body := d.call(t, "GET", path, host, "", nil)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "http.allowed_hosts") {
				t.Errorf("GET %s, Host %s: %d %.200s, want 421", path, host, code, body)
			}
		}
		if code, body := d.call(t, "POST", "/api/v1/jobs/a/pause", host, "Bearer "+daemonToken, strings.NewReader(`{"reason":"x"}`)); code != 421 {
			t.Errorf("POST with Host %s: %d %s", host, code, body)
		}
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			if code, body := d.call(t, "GET", path, host, "", nil); code != 200 {
				t.Errorf("GET %s, Host %s: %d %.200s, want 200", path, host, code, body)
			}
		}
	}
	if c := d.controls(t); len(c) != 0 {
		t.Fatalf("a request with a foreign Host changed something: %v", c)
	}
	for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "localhost:" + port, "LOCALHOST", "[::1]:" + port, "onetick.internal", "onetick.internal:443"} {
		if code, body := d.call(t, "GET", "/status", host, "", nil); code != 200 {
			t.Errorf("GET /status, Host %s: %d %.200s", host, code, body)
		}
	}

	// Off loopback without a token.
	cfg := writeConfig(t, "http:\n  listen: 0.0.0.0:0\njobs:\n  - {name: a, schedule: \"@every 1h\"}\n")
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"validate", "--config", cfg}, Env{Stdout: &out, Stderr: &errOut}); code != 0 ||
		!strings.Contains(errOut.String(), cfg+":2: http.listen: warning:") || !strings.Contains(errOut.String(), "http.token is not set") {
		t.Fatalf("validate: %d %q %q", code, out.String(), errOut.String())
	}
	open := startDaemon(t, cfg)
	_, port, _ = net.SplitHostPort(open.addr)
	open.addr = "127.0.0.1:" + port
	for _, path := range []string{"/status", "/", "/api/v1/jobs", "/api/v1/controls"} {
		code, body := open.call(t, "GET", path, "", "", nil)
		if code != 403 || !strings.Contains(body, "http.token") {
			t.Errorf("GET %s off loopback without a token: %d %.200s, want 403 naming http.token", path, code, body)
		}
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _ := open.call(t, "GET", path, "", "", nil); code != 200 {
			t.Errorf("GET %s off loopback without a token: %d, want 200", path, code)
		}
	}
	if !strings.Contains(open.logs.text(), "is not a loopback address and http.token is not set") {
		t.Error("run did not log the open listener")
	}
}

// TestListenerTLS: the listener serves its certificate; a new pair
// written over the files is served without a restart; a pair that does
// not load is logged and the previous certificate kept; validate reads
// the files.
func TestListenerTLS(t *testing.T) {
	a, b := newTestCerts(t), newTestCerts(t)
	cfg := writeConfig(t, "http:\n  listen: 127.0.0.1:0\n  tls: {cert_file: server.crt, key_file: server.key}\njobs:\n  - {name: a, schedule: \"@every 1h\"}\n")
	dir := filepath.Dir(cfg)
	install := func(c testCerts) {
		t.Helper()
		// Each file replaced at once (a rename), the key first.
		for _, f := range [][2]string{{c.key, "server.key"}, {c.cert, "server.crt"}} {
			data, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(dir, f[1]+".tmp")
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, f[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(a)
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"validate", "--config", cfg}, Env{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("validate: %d %s", code, errOut.String())
	}
	d := startDaemon(t, cfg)
	pool := a.pool()
	pool.AppendCertsFromPEM(b.caPEM(t))
	served := func() (string, error) {
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		resp, err := cl.Get("https://" + d.addr + "/healthz")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("status %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName + "/" + resp.TLS.PeerCertificates[0].SerialNumber.String(), nil
	}
	first, err := served()
	if err != nil || first != a.id(t) {
		t.Fatalf("first certificate: %q %v, want %s", first, err, a.id(t))
	}
	if code, _ := d.call(t, "GET", "/healthz", "", "", nil); code != 400 {
		t.Errorf("plain HTTP to the TLS listener: %d", code)
	}
	// A broken certificate file: logged, the previous one kept.
	if err := os.WriteFile(filepath.Join(dir, "server.crt"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := served(); err != nil || got != first {
		t.Fatalf("with a broken file: %q %v, want the previous certificate", got, err)
	}
	d.logs.wait(t, "http.tls: the certificate files changed but do not load; serving the previous certificate", d.done)
	install(b)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := served()
		if err == nil && got == b.id(t) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate was not served within 20s: %q %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.logs.wait(t, "http.tls: certificate reloaded", d.done)

	// validate: a missing key, a file that is no certificate.
	for _, tc := range []struct{ tls, want string }{
		{"{cert_file: server.crt, key_file: nope.key}", "http.tls.key_file: cannot read " + filepath.Join(dir, "nope.key")},
		{"{cert_file: onetick.yaml, key_file: server.key}", "http.tls.cert_file"},
		{"{cert_file: server.crt}", "http.tls.key_file: is required with cert_file"},
	} {
		bad := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(bad, []byte("http:\n  tls: "+tc.tls+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		errOut.Reset()
		if code := Main(context.Background(), []string{"validate", "--config", bad}, Env{Stdout: &out, Stderr: &errOut}); code != 2 ||
			!strings.Contains(errOut.String(), tc.want) || !strings.Contains(errOut.String(), "bad.yaml:2") {
			t.Errorf("validate with tls %s: %d %q, want exit 2 naming %q", tc.tls, code, errOut.String(), tc.want)
		}
		// run refuses it alike, before it creates the store.
		db := filepath.Join(dir, "never.db")
		errOut.Reset()
		if code := Main(context.Background(), []string{"run", "--config", bad, "--data", db}, Env{Stdout: &out, Stderr: &errOut}); code != 2 ||
			!strings.Contains(errOut.String(), tc.want) {
			t.Errorf("run with tls %s: %d %q, want exit 2 naming %q", tc.tls, code, errOut.String(), tc.want)
		}
		if _, err := os.Stat(db); err == nil {
			t.Errorf("run with tls %s created the store before refusing", tc.tls)
		}
	}
}

// testCerts are a CA and a server certificate it signs for 127.0.0.1.
type testCerts struct {
	cert, key string
	c         *redistest.Certs
}

func newTestCerts(t *testing.T) testCerts {
	c := redistest.NewCerts(t)
	return testCerts{cert: c.ServerCertFile, key: c.ServerKeyFile, c: c}
}

func (c testCerts) pool() *x509.CertPool { return c.c.CAPool() }

func (c testCerts) caPEM(t *testing.T) []byte {
	data, err := os.ReadFile(c.c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// id names the server certificate as served() does.
func (c testCerts) id(t *testing.T) string {
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf.Subject.CommonName + "/" + pair.Leaf.SerialNumber.String()
}
