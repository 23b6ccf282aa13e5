package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "onetick-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "onetick")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building onetick: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// runCmd runs the binary to completion.
func runCmd(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	out, _, code := runCmd(t, nil, "validate", "--config", "../../examples/redis.yaml")
	if code != 0 || !strings.Contains(out, "ok: 2 jobs") {
		t.Fatalf("validate examples/redis.yaml: code %d, %q", code, out)
	}
	// Every configuration the project ships stays valid.
	for _, f := range []string{"../../examples/hello.yaml", "../../examples/sentinel.yaml", "../../examples/cluster.yaml", "../../deploy/systemd/onetick.yaml"} {
		if out, stderr, code := runCmd(t, nil, "validate", "--config", f); code != 0 {
			t.Errorf("validate %s: code %d, %q %q", f, code, out, stderr)
		}
	}
	for _, tc := range []struct {
		name, body string
		want       []string // substrings of stderr
	}{
		{"malformed", "jobs:\n  - name: a\n   schedule: x\n", []string{"bad.yaml:3", "invalid YAML"}},
		{"tab indent", "jobs:\n\t- name: a\n", []string{"bad.yaml:2", "invalid YAML"}},
		{"unknown field", "jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    colour: blue\n", []string{"bad.yaml:4", "colour"}},
		{"bad cron", "jobs:\n  - name: a\n    schedule: \"61 * * * *\"\n", []string{"bad.yaml:3", "jobs[0] (a).schedule", "minute"}},
		{"unknown zone", "jobs:\n  - name: a\n    schedule: \"@daily\"\n    timezone: Mars/Olympus\n", []string{"bad.yaml:4", "timezone", "Mars/Olympus"}},
		{"ttl renew", "lease:\n  ttl: 10s\n  renew: 6s\njobs: []\n", []string{"bad.yaml:3", "lease.renew", "half the ttl"}},
		{"duplicate job", "jobs:\n  - name: a\n    schedule: \"@daily\"\n  - name: a\n    schedule: \"@hourly\"\n", []string{"bad.yaml:4", "duplicate", "line 2"}},
		{"never fires", "jobs:\n  - name: feb30\n    schedule: \"0 0 30 2 *\"\n", []string{"bad.yaml:3", "day-of-month"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "bad.yaml", tc.body)
			stdout, stderr, code := runCmd(t, nil, "validate", "--config", p)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr %q", code, stderr)
			}
			if stdout != "" || strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "panic") {
				t.Fatalf("stdout %q stderr %q", stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not mention %q", stderr, w)
				}
			}
		})
	}
	_, stderr, code := runCmd(t, nil, "validate", "--config", "/nonexistent/onetick.yaml")
	if code != 2 || !strings.Contains(stderr, "/nonexistent/onetick.yaml") {
		t.Fatalf("missing file: code %d, stderr %q", code, stderr)
	}
}

func TestNextDST(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		// Spring forward in Berlin: 02:30 does not exist on 2026-03-29 and
		// fires once at 03:00.
		{[]string{"next", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28T12:00:00+01:00", "-n", "3"},
			"2026-03-29T03:00:00+02:00\n2026-03-30T02:30:00+02:00\n2026-03-31T02:30:00+02:00\n"},
		// Fall back: 02:30 happens twice on 2026-10-25 and fires once, the
		// first time.
		{[]string{"next", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-10-24T12:00:00+02:00", "-n", "2"},
			"2026-10-25T02:30:00+02:00\n2026-10-26T02:30:00+01:00\n"},
		{[]string{"next", "@every 90m", "--from", "2026-01-01T00:00:00Z", "-n", "2"},
			"2026-01-01T01:30:00Z\n2026-01-01T03:00:00Z\n"},
		// H is hashed from the job's name (package cron's documented
		// example: billing lands at 08:50, nightly-billing at 14:05).
		{[]string{"next", "H H * * *", "--job", "billing", "--from", "2026-01-01T00:00:00Z", "-n", "2"},
			"2026-01-01T08:50:00Z\n2026-01-02T08:50:00Z\n"},
		{[]string{"next", "H H * * *", "--tz", "Europe/Berlin", "--job", "nightly-billing", "--from", "2026-01-01T00:00:00Z", "-n", "1"},
			"2026-01-01T14:05:00+01:00\n"},
		// The last Sunday of March is Berlin's spring-forward day.
		{[]string{"next", "30 2 * * 0L", "--tz", "Europe/Berlin", "--from", "2026-03-01T00:00:00Z", "-n", "2"},
			"2026-03-29T03:00:00+02:00\n2026-04-26T02:30:00+02:00\n"},
	} {
		out, stderr, code := runCmd(t, nil, tc.args...)
		if code != 0 || out != tc.want {
			t.Errorf("%v: code %d, got %q (stderr %q), want %q", tc.args, code, out, stderr, tc.want)
		}
	}
	for _, args := range [][]string{
		{"next", "0 0 30 2 *"},
		{"next", "* * *"},
		{"next", "@daily", "--tz", "Nowhere/City"},
		{"next", "@daily", "--from", "yesterday"},
		{"next", "@daily", "-n", "0"},
		{"next", "@daily", "--job", "two words"},
		{"next", "0 0 * * 5#6"},
		{"next"},
		{"frobnicate"},
		{"run", "--nope"},
	} {
		_, stderr, code := runCmd(t, nil, args...)
		if code != 2 || stderr == "" || strings.Contains(stderr, "goroutine") {
			t.Errorf("%v: code %d stderr %q, want 2 and a message", args, code, stderr)
		}
	}
	// H without --job says what is missing.
	out, stderr, code := runCmd(t, nil, "next", "H * * * *")
	if code != 2 || out != "" || stderr != "onetick: next: \"H * * * *\" uses H, which is hashed from a job's name: add --job NAME\n" {
		t.Errorf("H without --job: code %d, stdout %q, stderr %q", code, out, stderr)
	}
}

func TestVersionAndDemo(t *testing.T) {
	out, _, code := runCmd(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "onetick ") {
		t.Fatalf("version: %d %q", code, out)
	}
	out, stderr, code := runCmd(t, nil, "demo", "--seconds", "4")
	if code != 0 || !strings.Contains(out, ", 0 doubled, 0 lost") || !strings.Contains(out, "handover from") {
		t.Fatalf("demo: code %d\n%s\n%s", code, out, stderr)
	}
}

func TestRunUnreachableRedis(t *testing.T) {
	_, stderr, code := runCmd(t, nil, "run", "--config", "../../examples/hello.yaml", "--listen", "off",
		"--redis", "redis://:hunter2@127.0.0.1:1/0")
	if code != 1 || !strings.Contains(stderr, "cannot reach Redis at redis://:xxxxx@127.0.0.1:1/0") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	if strings.Contains(stderr, "hunter2") {
		t.Fatal("the password appears in the output")
	}
	_, stderr, code = runCmd(t, []string{"ONETICK_REDIS_URL=http://x"}, "run", "--config", "../../examples/hello.yaml")
	if code != 2 || !strings.Contains(stderr, "ONETICK_REDIS_URL") {
		t.Fatalf("bad env URL: code %d, stderr %q", code, stderr)
	}
}

// proc is a running `onetick run`.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	addr   chan string
	mu     sync.Mutex
	events []logEvent
	wake   chan struct{}
	stdout *lineBuf
	done   chan struct{}
	code   int
}

type logEvent struct {
	Time  time.Time `json:"time"`
	Msg   string    `json:"msg"`
	Addr  string    `json:"addr"`
	Epoch int64     `json:"epoch"`
	Raw   string    `json:"-"` // the whole line
}

type lineBuf struct {
	mu    sync.Mutex
	lines []string
	wake  chan struct{}
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "--replica", name, "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	// The embedded file store's default path: one per process, never the
	// user's own.
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	stderr, _ := cmd.StderrPipe()
	stdout, _ := cmd.StdoutPipe()
	p := &proc{t: t, name: name, cmd: cmd, addr: make(chan string, 1), wake: make(chan struct{}, 1),
		stdout: &lineBuf{wake: make(chan struct{}, 1)}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var ev logEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				t.Logf("%s: %s", name, sc.Text())
				continue
			}
			ev.Raw = sc.Text()
			if ev.Msg == "http listening" {
				p.addr <- ev.Addr
			}
			p.mu.Lock()
			p.events = append(p.events, ev)
			p.mu.Unlock()
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.stdout.mu.Lock()
			p.stdout.lines = append(p.stdout.lines, sc.Text())
			p.stdout.mu.Unlock()
			select {
			case p.stdout.wake <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		wg.Wait()
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitEvent waits for a log line with msg after index from, returning it.
func (p *proc) waitEvent(msg string, from int, timeout time.Duration) (logEvent, int) {
	p.t.Helper()
	return p.waitEventFunc(msg, func(m string) bool { return m == msg }, from, timeout)
}

// waitEventFunc is waitEvent for the first message from index from that
// match accepts (what names it in a failure).
func (p *proc) waitEventFunc(what string, match func(msg string) bool, from int, timeout time.Duration) (logEvent, int) {
	p.t.Helper()
	msg := what
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		for i := from; i < len(p.events); i++ {
			if match(p.events[i].Msg) {
				ev := p.events[i]
				p.mu.Unlock()
				return ev, i
			}
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-p.done:
			p.t.Fatalf("%s exited (code %d) before logging %q", p.name, p.code, msg)
		case <-deadline:
			p.t.Fatalf("%s did not log %q within %s", p.name, msg, timeout)
		}
	}
}

func (p *proc) metric(t *testing.T, addr, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	t.Fatalf("metric %s not found", name)
	return ""
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", p.name, timeout)
		return -1
	}
}

func TestRunEmbedded(t *testing.T) {
	cfg := writeFile(t, "hello.yaml", "jobs:\n  - name: fast\n    schedule: \"@every 1s\"\n    payload: {k: v}\n")
	p := startProc(t, "solo", "--config", cfg)
	addr := <-p.addr
	p.waitEvent("became leader", 0, 10*time.Second)
	deadline := time.After(10 * time.Second)
	var line string
	for line == "" {
		p.stdout.mu.Lock()
		if len(p.stdout.lines) > 0 {
			line = p.stdout.lines[0]
		}
		p.stdout.mu.Unlock()
		if line != "" {
			break
		}
		select {
		case <-p.stdout.wake:
		case <-deadline:
			t.Fatal("no tick on stdout within 10s")
		}
	}
	var tick struct {
		Job     string          `json:"job"`
		Slot    int64           `json:"slot"`
		Tick    string          `json:"tick"`
		Epoch   int64           `json:"epoch"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal([]byte(line), &tick); err != nil || tick.Job != "fast" || tick.Slot%1000 != 0 ||
		tick.Tick != fmt.Sprintf("fast:%d", tick.Slot) || tick.Epoch < tick.Slot-60000 || string(tick.Payload) != `{"k":"v"}` {
		t.Fatalf("tick line %q: %+v %v", line, tick, err)
	}
	if v := p.metric(t, addr, "scheduler_is_leader"); v != "1" {
		t.Fatalf("scheduler_is_leader %s", v)
	}
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Leader   *struct{ Holder string } `json:"leader"`
		IsLeader bool                     `json:"is_leader"`
		Jobs     []struct{ Name string }  `json:"jobs"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Leader == nil || st.Leader.Holder != "solo" || !st.IsLeader || len(st.Jobs) != 1 {
		t.Fatalf("/status: %+v, %v", st, err)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

// Three replicas against one redis-server: one leader; SIGTERM on it hands
// over in under a second; the 1-second job's stream holds every slot
// exactly once across the handover.
func TestRunThreeReplicasHandover(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "three.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: e2e
lease:
  ttl: 5s
jobs:
  - name: sec
    schedule: "@every 1s"
    stream: e2e:sec
`, srv.URL()))
	procs := map[string]*proc{}
	addrs := map[string]string{}
	for _, n := range []string{"r0", "r1", "r2"} {
		procs[n] = startProc(t, n, "--config", cfg)
		addrs[n] = <-procs[n].addr
	}
	// Wait until someone leads.
	var leader string
	deadline := time.Now().Add(10 * time.Second)
	for leader == "" && time.Now().Before(deadline) {
		for n, p := range procs {
			p.mu.Lock()
			for _, ev := range p.events {
				if ev.Msg == "became leader" {
					leader = n
				}
			}
			p.mu.Unlock()
		}
		if leader == "" {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if leader == "" {
		t.Fatal("no leader within 10s")
	}
	leaders := 0
	for n, a := range addrs {
		v := procs[n].metric(t, a, "scheduler_is_leader")
		if v == "1" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d replicas report scheduler_is_leader 1", leaders)
	}
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	waitEntries := func(n int) {
		t.Helper()
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			recs, _ := be.ReadStream(context.Background(), "e2e:sec", 0)
			if len(recs) >= n {
				return
			}
		}
		t.Fatalf("stream did not reach %d entries", n)
	}
	waitEntries(3)
	marks := map[string]int{}
	for n, p := range procs {
		p.mu.Lock()
		marks[n] = len(p.events)
		p.mu.Unlock()
	}
	sent := time.Now()
	procs[leader].signal(syscall.SIGTERM)
	// The first standby to log "became leader" after the signal.
	type got struct {
		name string
		at   time.Time
	}
	ch := make(chan got, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for n, p := range procs {
		if n == leader {
			continue
		}
		go func(n string, p *proc) {
			for {
				p.mu.Lock()
				for _, ev := range p.events[marks[n]:] {
					if ev.Msg == "became leader" {
						p.mu.Unlock()
						ch <- got{n, ev.Time}
						return
					}
				}
				p.mu.Unlock()
				select {
				case <-p.wake:
				case <-ctx.Done():
					return
				}
			}
		}(n, p)
	}
	var next got
	select {
	case next = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no standby took over within 10s of SIGTERM")
	}
	cancel()
	handover := next.at.Sub(sent)
	t.Logf("handover from %s to %s: %s", leader, next.name, handover)
	if handover > time.Second {
		t.Errorf("handover took %s, want under 1s", handover)
	}
	if code := procs[leader].wait(t, 15*time.Second); code != 0 {
		t.Errorf("old leader exited with %d", code)
	}
	recs, _ := be.ReadStream(context.Background(), "e2e:sec", 0)
	waitEntries(len(recs) + 3)
	recs, err = be.ReadStream(context.Background(), "e2e:sec", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[onetick.Slot]bool{}
	epochs := map[onetick.Epoch]bool{}
	for i, r := range recs {
		if seen[r.Slot] {
			t.Fatalf("slot %s appears twice", r.Slot)
		}
		seen[r.Slot] = true
		epochs[r.Epoch] = true
		if i > 0 && r.Slot != recs[i-1].Slot+1000 {
			t.Fatalf("slot %s follows %s: a slot was lost or reordered", r.Slot, recs[i-1].Slot)
		}
	}
	if len(epochs) != 2 {
		t.Errorf("ticks from %d epochs, want 2 (before and after the handover)", len(epochs))
	}
	// status from outside the fleet.
	out, stderr, code := runCmd(t, nil, "status", "--config", cfg)
	if code != 0 || !strings.Contains(out, "leader: "+next.name) || !strings.Contains(out, "released") || !strings.Contains(out, "sec") {
		t.Fatalf("status: code %d\n%s\n%s", code, out, stderr)
	}
	out, _, code = runCmd(t, nil, "status", "--config", cfg, "--json")
	var st onetick.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Leader == nil || len(st.Jobs) != 1 || st.Jobs[0].LastFired == nil {
		t.Fatalf("status --json: %d %q", code, out)
	}
	for n, p := range procs {
		if n != leader {
			p.signal(syscall.SIGTERM)
			if code := p.wait(t, 15*time.Second); code != 0 {
				t.Errorf("%s exited with %d", n, code)
			}
		}
	}
}
