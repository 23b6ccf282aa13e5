//go:build verify

// Package verify is onetick's fault-injection verification suite: real
// onetick processes against a real redis-server, with crashes, pauses,
// partitions, Redis restarts and clock skew. Run it with `make verify`.
//
// This file is the process harness: building the binary, starting and
// signalling replicas, parsing their JSON logs and scraping /metrics.
package verify

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	otetcd "github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/internal/redistest"
	otpostgres "github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/sqlite"
)

// binPath is the onetick binary built (with the verify tag) by TestMain.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "onetick-verify-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify:", err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "onetick")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goBin, "build", "-tags", "verify", "-o", binPath, "./cmd/onetick")
	build.Dir = ".." // the module root; go test runs in the package directory
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "verify: building onetick:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	report.engine = engineVersion()
	code := m.Run()
	if code == 0 {
		// The processes are external; the suite's own goroutines (log
		// readers, proxies, clients) must all have ended.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "verify: leaked goroutines:", err)
			code = 1
		}
	}
	if err := writeReport(); err != nil {
		fmt.Fprintln(os.Stderr, "verify: writing the report:", err)
		if code == 0 {
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// engineVersion names the commit the binary was built from, and whether
// files outside verify/ and bench/ had uncommitted changes.
func engineVersion() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown commit"
	}
	v := "commit " + strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", ".", ":!verify", ":!bench").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		v += " with uncommitted changes"
	}
	return v
}

// Timing of every scenario (short, so the suite is fast).
const (
	ttl      = 3 * time.Second
	renew    = time.Second
	interval = time.Second // every job fires "@every 1s"
	// slack absorbs scheduling noise on a small, loaded machine.
	slack = time.Second
)

// The jobs every fleet runs: prefer missed with a 1ms grace (a failover
// visibly skips slots), prefer missed with the default grace (2×ttl: a
// failover is caught up) and prefer duplicate (always caught up).
const (
	jobMissed = "sec-missed"
	jobGrace  = "sec-grace"
	jobDup    = "sec-dup"
)

var allJobs = []string{jobMissed, jobGrace, jobDup}

// jobPrefer is each job's preference, as configYAML sets it.
var jobPrefer = map[string]string{jobMissed: "missed", jobGrace: "missed", jobDup: "duplicate"}

const prefix = "verify"

func streamOf(job string) string { return prefix + ":" + job }

// fleetYAML is the configuration every fleet shares, up to its jobs.
const fleetYAML = `backend:
  redis:
    url: redis://127.0.0.1:1/0   # replaced by --redis
    prefix: ` + prefix + `
lease:
  ttl: 3s
  renew: 1s
http:
  listen: 127.0.0.1:0
jobs:
`

const configYAML = fleetYAML + `  - name: sec-missed
    schedule: "@every 1s"
    prefer: missed
    grace: 1ms
    stream: verify:sec-missed
  - name: sec-grace
    schedule: "@every 1s"
    prefer: missed
    stream: verify:sec-grace
  - name: sec-dup
    schedule: "@every 1s"
    prefer: duplicate
    stream: verify:sec-dup
`

// LogLine is one JSON log line of a replica.
type LogLine struct {
	Time  time.Time
	Level string
	Msg   string
	Attrs map[string]any
	Raw   string
}

// Str returns a string attribute.
func (l LogLine) Str(k string) string {
	switch v := l.Attrs[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// Int returns a numeric attribute (0 when absent).
func (l LogLine) Int(k string) int64 {
	switch v := l.Attrs[k].(type) {
	case float64:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

func parseLogLine(raw string) LogLine {
	l := LogLine{Raw: raw, Attrs: map[string]any{}}
	if err := json.Unmarshal([]byte(raw), &l.Attrs); err != nil {
		l.Msg = raw // not JSON: the CLI's own error output
		l.Time = time.Now()
		return l
	}
	l.Msg, _ = l.Attrs["msg"].(string)
	l.Level, _ = l.Attrs["level"].(string)
	if ts, ok := l.Attrs["time"].(string); ok {
		l.Time, _ = time.Parse(time.RFC3339Nano, ts)
	}
	if l.Time.IsZero() {
		l.Time = time.Now()
	}
	return l
}

// bus broadcasts "something changed" (a log line arrived, a process
// exited) to every waiter of a fleet.
type bus struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBus() *bus { return &bus{ch: make(chan struct{})} }

func (b *bus) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *bus) signal() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// Replica is one onetick process.
type Replica struct {
	Name string
	Addr string // bound HTTP address
	cmd  *exec.Cmd
	bus  *bus

	mu       sync.Mutex
	lines    []LogLine
	exited   chan struct{}
	exitCode int
}

// Lines returns a copy of the log lines so far.
func (r *Replica) Lines() []LogLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]LogLine(nil), r.lines...)
}

// Mark is the number of log lines so far, for FindLog.
func (r *Replica) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

// FindLog returns the first line at index >= from that matches.
func (r *Replica) FindLog(from int, match func(LogLine) bool) (LogLine, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := from; i < len(r.lines); i++ {
		if match(r.lines[i]) {
			return r.lines[i], true
		}
	}
	return LogLine{}, false
}

// Msg matches a log line by message.
func Msg(msg string) func(LogLine) bool {
	return func(l LogLine) bool { return l.Msg == msg }
}

// MsgPrefix matches a log line whose message starts with p.
func MsgPrefix(p string) func(LogLine) bool {
	return func(l LogLine) bool { return strings.HasPrefix(l.Msg, p) }
}

// Alive reports whether the process is still running.
func (r *Replica) Alive() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// ExitCode is the exit code once the process has exited.
func (r *Replica) ExitCode() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exitCode
}

// Signal sends sig to the process.
func (r *Replica) Signal(sig syscall.Signal) error { return r.cmd.Process.Signal(sig) }

// WaitExit waits up to d for the process to exit.
func (r *Replica) WaitExit(d time.Duration) bool {
	select {
	case <-r.exited:
		return true
	case <-time.After(d):
		return false
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// Get fetches path from the replica's HTTP server.
func (r *Replica) Get(path string) (int, string, error) {
	resp, err := httpClient.Get("http://" + r.Addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Metrics scrapes /metrics.
func (r *Replica) Metrics() (Metrics, error) {
	code, body, err := r.Get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: HTTP %d", r.Name, code)
	}
	return parseMetrics(body), nil
}

// Metrics is a parsed Prometheus text exposition: series -> value, the
// series written as exposed (name{label="v",...}, labels sorted).
type Metrics map[string]float64

func parseMetrics(body string) Metrics {
	m := Metrics{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m
}

// Get returns a series' value (0 when absent).
func (m Metrics) Get(series string) float64 { return m[series] }

// Job returns the value of a per-job metric (scheduler_job_*) for one
// job: its series labelled job_name="job", summed over any other labels
// (the missed ticks' prefer).
func (m Metrics) Job(name, job string) float64 {
	if !strings.HasPrefix(name, "scheduler_job_") {
		panic("Metrics.Job: " + name + " is not a per-job metric")
	}
	want := `job_name="` + job + `"`
	var sum float64
	for series, v := range m {
		labels, ok := strings.CutPrefix(series, name+"{")
		if !ok {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if l == want {
				sum += v
			}
		}
	}
	return sum
}

// Hist is a histogram: cumulative bucket counts by upper bound, with sum
// and count.
type Hist struct {
	Buckets map[float64]float64
	Sum     float64
	Count   float64
}

// Histogram extracts the histogram called name.
func (m Metrics) Histogram(name string) Hist {
	h := Hist{Buckets: map[float64]float64{}}
	for k, v := range m {
		switch {
		case k == name+"_sum":
			h.Sum = v
		case k == name+"_count":
			h.Count = v
		case strings.HasPrefix(k, name+`_bucket{le="`):
			le := strings.TrimSuffix(strings.TrimPrefix(k, name+`_bucket{le="`), `"}`)
			b := math.Inf(1)
			if le != "+Inf" {
				b, _ = strconv.ParseFloat(le, 64)
			}
			h.Buckets[b] = v
		}
	}
	return h
}

// Add merges o into h.
func (h *Hist) Add(o Hist) {
	if h.Buckets == nil {
		h.Buckets = map[float64]float64{}
	}
	for b, v := range o.Buckets {
		h.Buckets[b] += v
	}
	h.Sum += o.Sum
	h.Count += o.Count
}

// Quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear interpolation inside the bucket holding the rank; the
// highest finite bound when the rank falls in the +Inf bucket.
func (h Hist) Quantile(q float64) float64 {
	bounds := make([]float64, 0, len(h.Buckets))
	for b := range h.Buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return math.NaN()
	}
	total := h.Buckets[bounds[len(bounds)-1]]
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	prevB, prevC := 0.0, 0.0
	for i, b := range bounds {
		c := h.Buckets[b]
		if c >= rank {
			if math.IsInf(b, 1) {
				if i == 0 {
					return math.NaN()
				}
				return bounds[i-1]
			}
			if c == prevC {
				return b
			}
			return prevB + (b-prevB)*(rank-prevC)/(c-prevC)
		}
		prevB, prevC = b, c
	}
	return bounds[len(bounds)-1]
}

// Fleet is the replicas of one scenario, against one Redis.
type Fleet struct {
	t        *testing.T
	Scenario string
	// StoreFaults marks a scenario that breaks the replicas' link to Redis
	// (partition, Redis restarts): its failed lease calls are timed too.
	StoreFaults bool
	Redis       *redistest.Server
	cfgPath     string
	bus         *bus
	client      goredis.UniversalClient
	backend     *otredis.Backend
	// pg, when set, is the PostgreSQL the fleet uses (Redis, client and
	// backend are then nil): the streams are read from it.
	pg *otpostgres.Backend
	// filePath, when set, is the file store the fleet's processes share
	// (Redis, client, backend and pg are then nil); file reads it, opened
	// on first use (file_harness_test.go).
	filePath string
	file     *sqlite.Backend
	// etcd, when set, is the etcd the fleet uses (etcd_harness_test.go).
	etcd *otetcd.Backend

	mu       sync.Mutex
	replicas []*Replica
	final    map[*Replica]Metrics // last scrape of each replica
}

// NewFleet prepares a fleet for scenario on srv; every process it starts
// is killed at the end of the test.
func NewFleet(t *testing.T, scenario string, srv *redistest.Server) *Fleet {
	t.Helper()
	return NewFleetWith(t, scenario, srv, configYAML)
}

// NewFleetWith is NewFleet with another configuration file.
func NewFleetWith(t *testing.T, scenario string, srv *redistest.Server, yaml string) *Fleet {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "onetick.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1})
	f := &Fleet{t: t, Scenario: scenario, Redis: srv, cfgPath: cfg, bus: newBus(), client: c,
		backend: otredis.New(c, otredis.Options{Prefix: prefix}), final: map[*Replica]Metrics{}}
	t.Cleanup(f.close)
	return f
}

// NewFleetOn prepares a fleet whose configuration names its Redis
// itself (a Sentinel or Cluster section): its replicas are started
// without --redis, and client (closed with the fleet) reads what they
// write, with the backend's key prefix.
func NewFleetOn(t *testing.T, scenario, yaml string, client goredis.UniversalClient, keyPrefix string) *Fleet {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "onetick.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &Fleet{t: t, Scenario: scenario, StoreFaults: true, cfgPath: cfg, bus: newBus(), client: client,
		backend: otredis.New(client, otredis.Options{Prefix: keyPrefix}), final: map[*Replica]Metrics{}}
	t.Cleanup(f.close)
	return f
}

// close scrapes every live replica, kills it and records its renewal
// latency; on failure it dumps the replicas' logs.
func (f *Fleet) close() {
	for _, r := range f.All() {
		if r.Alive() {
			f.scrape(r)
			_ = r.Signal(syscall.SIGCONT)
			_ = r.Signal(syscall.SIGKILL)
			r.WaitExit(10 * time.Second)
		}
	}
	if f.t.Failed() {
		for _, r := range f.All() {
			lines := r.Lines()
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			var b strings.Builder
			for _, l := range lines {
				b.WriteString(l.Raw + "\n")
			}
			f.t.Logf("log of %s (last %d lines):\n%s", r.Name, len(lines), b.String())
		}
	}
	f.mu.Lock()
	for r, m := range f.final {
		recordRenewal(f.Scenario, f.StoreFaults, r.Name+"@"+strconv.Itoa(r.cmd.Process.Pid), m.Histogram("scheduler_renewal_latency_seconds"))
	}
	f.mu.Unlock()
	if f.client != nil {
		_ = f.client.Close()
	}
	if f.pg != nil {
		_ = f.pg.Close()
	}
	if f.file != nil {
		_ = f.file.Close()
	}
	if f.etcd != nil {
		_ = f.etcd.Close()
	}
}

// StartOpt configures one replica.
type StartOpt func(*startOpts)

type startOpts struct {
	env      []string
	redisURL string
	logLevel string
}

// WithLogLevel runs the replica with --log-level level (debug: also each
// lease renewal, which the chaos run records).
func WithLogLevel(level string) StartOpt { return func(o *startOpts) { o.logLevel = level } }

// WithEnv adds KEY=VALUE to the replica's environment.
func WithEnv(kv string) StartOpt { return func(o *startOpts) { o.env = append(o.env, kv) } }

// WithRedisURL points the replica at url (a proxy) instead of the server.
func WithRedisURL(url string) StartOpt { return func(o *startOpts) { o.redisURL = url } }

// Start starts a replica and waits until its HTTP server listens.
func (f *Fleet) Start(name string, opts ...StartOpt) *Replica {
	f.t.Helper()
	r, err := f.TryStart(name, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// TryStart is Start returning an error instead of failing the test when
// the process does not come up (the chaos run starts replicas while the
// store is down, and a replica exits when it cannot reach its store).
func (f *Fleet) TryStart(name string, opts ...StartOpt) (*Replica, error) {
	f.t.Helper()
	var o startOpts
	if f.Redis != nil {
		o.redisURL = f.Redis.URL()
	}
	for _, fn := range opts {
		fn(&o)
	}
	args := []string{"run", "--config", f.cfgPath, "--replica", name, "--listen", "127.0.0.1:0", "--log-format", "json"}
	if o.logLevel != "" {
		args = append(args, "--log-level", o.logLevel)
	}
	if o.redisURL != "" { // none: the backend of the configuration file
		args = append(args, "--redis", o.redisURL)
	}
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	r := &Replica{Name: name, cmd: cmd, bus: f.bus, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %v", name, err)
	}
	f.mu.Lock()
	f.replicas = append(f.replicas, r)
	f.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			l := parseLogLine(sc.Text())
			r.mu.Lock()
			r.lines = append(r.lines, l)
			r.mu.Unlock()
			r.bus.signal()
		}
		_, _ = io.Copy(io.Discard, stderr)
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		r.mu.Lock()
		r.exitCode = code
		r.mu.Unlock()
		close(r.exited)
		r.bus.signal()
	}()
	var l LogLine
	ok := f.Await(15*time.Second, func() bool {
		var found bool
		l, found = r.FindLog(0, Msg("http listening"))
		return found || !r.Alive()
	})
	if !ok || l.Str("addr") == "" {
		_ = r.Signal(syscall.SIGKILL) // a process that never listened is not left running
		return nil, fmt.Errorf("%s did not start (exited: %v, code %d); log:\n%s", name, !r.Alive(), r.ExitCode(), rawLines(r.Lines()))
	}
	r.Addr = l.Str("addr")
	return r, nil
}

func rawLines(ls []LogLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Raw + "\n")
	}
	return b.String()
}

// All returns every replica started, dead or alive.
func (f *Fleet) All() []*Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Replica(nil), f.replicas...)
}

// Live returns the replicas still running.
func (f *Fleet) Live() []*Replica {
	var out []*Replica
	for _, r := range f.All() {
		if r.Alive() {
			out = append(out, r)
		}
	}
	return out
}

// Await waits up to d for cond, re-evaluating it whenever a log line
// arrives or a process exits (and at least every 50ms, for conditions on
// other state). It reports whether cond became true.
func (f *Fleet) Await(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ch := f.bus.wait()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
}

// Poll evaluates cond every period until it is true or d has passed; for
// conditions that only /metrics or HTTP can tell.
func Poll(d, period time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(period)
	}
}

// scrape scrapes r and keeps the result as its latest.
func (f *Fleet) scrape(r *Replica) (Metrics, error) {
	m, err := r.Metrics()
	if err == nil {
		f.mu.Lock()
		f.final[r] = m
		f.mu.Unlock()
	}
	return m, err
}

// Scrape scrapes r, failing the test on error.
func (f *Fleet) Scrape(r *Replica) Metrics {
	f.t.Helper()
	m, err := f.scrape(r)
	if err != nil {
		f.t.Fatalf("scraping %s: %v", r.Name, err)
	}
	return m
}

// LastMetrics is the last scrape of r (also of replicas no longer alive).
func (f *Fleet) LastMetrics(r *Replica) Metrics {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.final[r]
}

// Leaders scrapes every live replica and returns those reporting
// scheduler_is_leader 1.
func (f *Fleet) Leaders() ([]*Replica, error) {
	var out []*Replica
	for _, r := range f.Live() {
		m, err := f.scrape(r)
		if err != nil {
			if !r.Alive() {
				continue
			}
			return nil, err
		}
		if m.Get("scheduler_is_leader") == 1 {
			out = append(out, r)
		}
	}
	return out, nil
}

// WaitLeader waits up to d until exactly one live replica reports it
// leads, and returns it.
func (f *Fleet) WaitLeader(d time.Duration) *Replica {
	f.t.Helper()
	var leader *Replica
	var last []*Replica
	ok := Poll(d, 50*time.Millisecond, func() bool {
		ls, err := f.Leaders()
		last = ls
		if err == nil && len(ls) == 1 {
			leader = ls[0]
			return true
		}
		return false
	})
	if !ok {
		f.t.Fatalf("no single leader within %s (last seen leading: %v)", d, names(last))
	}
	return leader
}

func names(rs []*Replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// Kill scrapes r (for its counters and renewal latency) and kills it
// with SIGKILL; it returns the instant of the kill.
func (f *Fleet) Kill(r *Replica) time.Time {
	f.t.Helper()
	_, _ = f.scrape(r)
	at := time.Now()
	if err := r.Signal(syscall.SIGKILL); err != nil {
		f.t.Fatalf("kill %s: %v", r.Name, err)
	}
	if !r.WaitExit(10 * time.Second) {
		f.t.Fatalf("%s still running 10s after SIGKILL", r.Name)
	}
	return at
}

// Stop scrapes r, sends SIGTERM and asserts that it exits 0 within the
// CLI's shutdown bound (10s); it returns the instant of the signal.
func (f *Fleet) Stop(r *Replica) time.Time {
	f.t.Helper()
	if _, err := f.scrape(r); err != nil {
		f.t.Errorf("scraping %s before stopping it: %v", r.Name, err)
	}
	at := time.Now()
	if err := r.Signal(syscall.SIGTERM); err != nil {
		f.t.Fatalf("SIGTERM %s: %v", r.Name, err)
	}
	if !r.WaitExit(10 * time.Second) {
		f.t.Fatalf("%s still running 10s after SIGTERM", r.Name)
	}
	if c := r.ExitCode(); c != 0 {
		f.t.Errorf("%s exited %d after SIGTERM, want 0", r.Name, c)
	}
	return at
}

// AwaitBecameLeader waits up to d for a "became leader" line logged by
// any replica other than except (may be nil) with an epoch different
// from notEpoch, at or after the given per-replica marks (replicas
// without a mark: from their first line).
func (f *Fleet) AwaitBecameLeader(d time.Duration, marks map[*Replica]int, except *Replica, notEpoch int64) (*Replica, LogLine, bool) {
	var who *Replica
	var line LogLine
	ok := f.Await(d, func() bool {
		for _, r := range f.All() {
			if r == except {
				continue
			}
			l, found := r.FindLog(marks[r], func(l LogLine) bool {
				return l.Msg == "became leader" && l.Int("epoch") != notEpoch
			})
			if found {
				who, line = r, l
				return true
			}
		}
		return false
	})
	return who, line, ok
}

// Marks returns the current log mark of every replica.
func (f *Fleet) Marks() map[*Replica]int {
	m := map[*Replica]int{}
	for _, r := range f.All() {
		m[r] = r.Mark()
	}
	return m
}

// Epoch is the epoch of r's newest "became leader" line (0 if none).
func (r *Replica) Epoch() int64 {
	var e int64
	for _, l := range r.Lines() {
		if l.Msg == "became leader" {
			e = l.Int("epoch")
		}
	}
	return e
}

// SumCounter sums a per-job counter over the last scrape of every
// replica started (killed replicas were scraped just before the kill).
func (f *Fleet) SumCounter(name, job string) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s float64
	for _, m := range f.final {
		s += m.Job(name, job)
	}
	return s
}

// SumSeries sums one series (as exposed: name{label="v",...}) over the
// last scrape of every replica started.
func (f *Fleet) SumSeries(series string) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s float64
	for _, m := range f.final {
		s += m.Get(series)
	}
	return s
}

// WaitPhase waits (wall time) until the given offset into the current or
// next second, so a fault lands between two slots of the 1-second jobs
// rather than racing one.
func WaitPhase(off time.Duration) {
	now := time.Now()
	sec := now.Truncate(time.Second)
	at := sec.Add(off)
	if !at.After(now) {
		at = at.Add(time.Second)
	}
	time.Sleep(time.Until(at))
}

// Settle lets wall time pass so that ticks accumulate.
func Settle(d time.Duration) { time.Sleep(d) }

// ctxFor returns a context bounded by d, cancelled at the end of the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// StartRedis starts a redis-server with keyspace events for expiry.
func StartRedis(t *testing.T, opts ...redistest.Option) *redistest.Server {
	return redistest.Start(t, append([]redistest.Option{redistest.KeyspaceEvents()}, opts...)...)
}

// LeadershipChanges sums scheduler_leadership_changes_total over the live
// replicas: it grows by one with every term any of them begins.
func (f *Fleet) LeadershipChanges() float64 {
	var s float64
	for _, r := range f.Live() {
		s += f.Scrape(r).Get("scheduler_leadership_changes_total")
	}
	return s
}
