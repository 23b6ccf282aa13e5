package workertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Spec describes one fleet member: a worker and what its handlers do. It
// is data, so that a member in another process runs the same thing.
type Spec struct {
	Consumer        string        `json:"consumer"`
	Concurrency     int           `json:"concurrency"`
	TakeoverIdle    time.Duration `json:"takeover_idle"`
	Heartbeat       time.Duration `json:"heartbeat"`
	Liveness        time.Duration `json:"liveness"`
	ShutdownTimeout time.Duration `json:"shutdown_timeout"`
	MaxDeliveries   int           `json:"max_deliveries"`
	Jobs            []JobSpec     `json:"jobs"`
}

// JobSpec is one registered job.
type JobSpec struct {
	Name        string         `json:"name"`
	Overlap     worker.Overlap `json:"overlap"`
	Prefer      onetick.Prefer `json:"prefer"`
	MaxWaiting  int            `json:"max_waiting"`
	MaxAttempts int            `json:"max_attempts"`
	Backoff     time.Duration  `json:"backoff"`
	Do          Behavior       `json:"do"`
}

// Behavior is what a handler does with each attempt.
type Behavior struct {
	// Sleep: run this long (returning the context's cause if cancelled).
	Sleep time.Duration `json:"sleep"`
	// FailFirst: attempts up to this number return an error.
	FailFirst int `json:"fail_first"`
	// FailRuns: the first runs of each tick in this member fail, whatever
	// their attempt number.
	FailRuns int `json:"fail_runs"`
	// SkipRetry: failures wrap worker.ErrSkipRetry.
	SkipRetry bool `json:"skip_retry"`
	// Panic on every attempt.
	Panic bool `json:"panic"`
	// Crash: the member dies at the start of the handler (SIGKILL of its
	// own process; in process: its store is cut off and it is ignored).
	Crash bool `json:"crash"`
	// Block until the context is done, or (in process) until the test
	// opens the tick's gate.
	Block bool `json:"block"`
	// Report: each attempt reports a result (worker.Report) before it
	// returns: Exit 1 when it fails, 0 when it succeeds, and an Output
	// longer than onetick.MaxEventOutput that ends with ReportOutput's
	// line.
	Report bool `json:"report"`
}

// ReportOutput is the last line of the output a Report handler reports
// for attempt n of tick.
func ReportOutput(tick string, n int) string {
	return fmt.Sprintf("attempt %d of %s\n", n, tick)
}

// Event kinds.
const (
	KindStart = "start" // a handler started
	KindEnd   = "end"   // a handler returned
	KindLog   = "log"   // the worker logged (Msg, Tick)
)

// Event is something a member's worker did.
type Event struct {
	Member     string `json:"member"`
	Kind       string `json:"kind"`
	Job        string `json:"job,omitempty"`
	Tick       string `json:"tick,omitempty"`
	Entry      string `json:"entry,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Deliveries int    `json:"deliveries,omitempty"`
	Err        string `json:"err,omitempty"`
	Cause      string `json:"cause,omitempty"`
	Msg        string `json:"msg,omitempty"`
	// Attrs are a log event's attributes, as text.
	Attrs map[string]string `json:"attrs,omitempty"`
	At    time.Time         `json:"at"`
}

// fleet runs members and collects their events in order of arrival.
type fleet struct {
	t   *testing.T
	env Env

	mu      sync.Mutex
	events  []Event
	killed  map[string]bool
	gates   map[string]chan struct{}
	changed chan struct{}
}

func newFleet(t *testing.T, env Env) *fleet {
	return &fleet{t: t, env: env, killed: map[string]bool{}, gates: map[string]chan struct{}{},
		changed: make(chan struct{}, 1)}
}

func (f *fleet) record(e Event) {
	f.mu.Lock()
	if f.killed[e.Member] {
		f.mu.Unlock()
		return // a dead process says nothing
	}
	f.events = append(f.events, e)
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fleet) snapshot() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event(nil), f.events...)
}

// await waits until cond holds for the events so far.
func (f *fleet) await(what string, cond func([]Event) bool) []Event {
	f.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		evs := f.snapshot()
		if cond(evs) {
			return evs
		}
		select {
		case <-f.changed:
		case <-deadline.C:
			for _, e := range evs {
				f.t.Logf("event: %+v", e)
			}
			f.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// awaitEvent waits for an event that satisfies pred and returns it.
func (f *fleet) awaitEvent(what string, pred func(Event) bool) Event {
	f.t.Helper()
	var found Event
	f.await(what, func(evs []Event) bool {
		for _, e := range evs {
			if pred(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// gate returns the channel a Block handler of tick waits on (in process).
func (f *fleet) gate(tick string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.gates[tick]
	if !ok {
		g = make(chan struct{})
		f.gates[tick] = g
	}
	return g
}

func (f *fleet) open(tick string) { close(f.gate(tick)) }

// member is a worker in this process or in a child process.
type member struct {
	f    *fleet
	name string
	reg  *prometheus.Registry // in process only
	cut  atomic.Bool          // in process: the store is cut off
	stop func()
	kill func()
}

// start runs a member in this process.
func (f *fleet) start(spec Spec) *member {
	f.t.Helper()
	m := &member{f: f, name: spec.Consumer, reg: prometheus.NewRegistry()}
	store := &severable{Store: f.env.Store(f.t), cut: &m.cut}
	logger := slog.New(&eventLog{member: spec.Consumer, emit: f.record, t: f.t})
	w, err := build(spec, store, m.reg, logger, f.record, f.gate, func() { m.kill() })
	if err != nil {
		f.t.Fatalf("member %s: %v", spec.Consumer, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var once sync.Once
	// stop and kill exist before the worker runs: a handler may crash the
	// member as soon as Run starts.
	m.stop = func() { once.Do(func() { cancel(); <-done }) }
	m.kill = func() {
		f.mu.Lock()
		f.killed[spec.Consumer] = true
		f.mu.Unlock()
		m.cut.Store(true)
		// The worker goroutines wind down on their own: every store call
		// fails, so heartbeats lapse; the cleanup stops them.
		go m.stop()
	}
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			f.t.Errorf("member %s: run: %v", spec.Consumer, err)
		}
	}()
	f.t.Cleanup(m.stop)
	return m
}

// spawn runs a member in its own OS process (Env.Command must be set).
func (f *fleet) spawn(spec Spec) *member {
	f.t.Helper()
	cmd := f.env.Command(f.t)
	js, err := json.Marshal(spec)
	if err != nil {
		f.t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, envSpec+"="+string(js))
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	var stderr tail
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("spawn %s: %v", spec.Consumer, err)
	}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Kind != "" {
				f.record(e)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	m := &member{f: f, name: spec.Consumer}
	m.kill = func() {
		f.mu.Lock()
		f.killed[spec.Consumer] = true
		f.mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	m.stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			f.t.Errorf("member %s did not exit after SIGTERM", spec.Consumer)
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	f.t.Cleanup(func() {
		m.stop()
		if f.t.Failed() {
			f.t.Logf("stderr of %s:\n%s", spec.Consumer, stderr.String())
		}
	})
	return m
}

// member runs spec in a child process when the backend can, else here.
func (f *fleet) member(spec Spec, inProcess bool) *member {
	if inProcess || f.env.Command == nil {
		return f.start(spec)
	}
	return f.spawn(spec)
}

// counter reads a counter of an in-process member.
func (m *member) counter(name string, labels map[string]string) float64 {
	m.f.t.Helper()
	if m.reg == nil {
		m.f.t.Fatalf("member %s runs in another process: no metrics here", m.name)
	}
	mfs, err := m.reg.Gather()
	if err != nil {
		m.f.t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, x := range mf.GetMetric() {
			for _, lp := range x.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			sum += x.GetCounter().GetValue()
		}
	}
	return sum
}

// build makes a worker that runs spec.
func build(spec Spec, store worker.Store, reg prometheus.Registerer, logger *slog.Logger, emit func(Event),
	gate func(string) chan struct{}, crash func()) (*worker.Worker, error) {
	w, err := worker.New(worker.Config{Store: store, Consumer: spec.Consumer, Logger: logger, Registerer: reg,
		Concurrency: spec.Concurrency, ShutdownTimeout: spec.ShutdownTimeout, TakeoverIdle: spec.TakeoverIdle,
		HeartbeatInterval: spec.Heartbeat, LivenessTTL: spec.Liveness, MaxDeliveries: spec.MaxDeliveries})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	runs := map[string]int{}
	for _, js := range spec.Jobs {
		do := js.Do
		h := func(ctx context.Context, t *worker.Task) error {
			mu.Lock()
			runs[t.Tick]++
			run := runs[t.Tick]
			mu.Unlock()
			ev := Event{Member: spec.Consumer, Job: t.Job, Tick: t.Tick, Entry: t.EntryID, Attempt: t.Attempt,
				Deliveries: t.Deliveries}
			start := ev
			start.Kind, start.At = KindStart, time.Now()
			emit(start)
			err := behave(ctx, do, t, run, gate, crash)
			if do.Report {
				code := 0
				if err != nil {
					code = 1
				}
				worker.Report(ctx, onetick.Result{Exit: &code,
					Output: strings.Repeat("x", onetick.MaxEventOutput) + ReportOutput(t.Tick, t.Attempt)})
			}
			end := ev
			end.Kind, end.At = KindEnd, time.Now()
			if err != nil {
				end.Err = err.Error()
			}
			if c := context.Cause(ctx); c != nil {
				end.Cause = c.Error()
			}
			emit(end)
			if do.Panic {
				panic("workertest: panic on attempt " + fmt.Sprint(t.Attempt))
			}
			return err
		}
		opts := []worker.JobOption{worker.WithStream(streamOf(js.Name))}
		if js.Overlap != "" {
			opts = append(opts, worker.WithOverlap(js.Overlap))
		}
		if js.Prefer != "" {
			opts = append(opts, worker.WithPrefer(js.Prefer))
		}
		if js.MaxWaiting != 0 {
			opts = append(opts, worker.WithMaxWaiting(js.MaxWaiting))
		}
		if js.MaxAttempts != 0 {
			opts = append(opts, worker.WithMaxAttempts(js.MaxAttempts))
		}
		if js.Backoff != 0 {
			opts = append(opts, worker.WithBackoff(worker.ConstantBackoff(js.Backoff)))
		}
		if err := w.HandleFunc(js.Name, h, opts...); err != nil {
			return nil, err
		}
	}
	return w, nil
}

var errBehavior = errors.New("workertest: failing as told")

func behave(ctx context.Context, do Behavior, t *worker.Task, run int, gate func(string) chan struct{}, crash func()) error {
	if do.Crash {
		crash()
		<-ctx.Done()
		return context.Cause(ctx)
	}
	if do.Block {
		var g chan struct{}
		if gate != nil {
			g = gate(t.Tick)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-g:
		}
	}
	if do.Sleep > 0 {
		tm := time.NewTimer(do.Sleep)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tm.C:
		}
	}
	if t.Attempt <= do.FailFirst || run <= do.FailRuns {
		if do.SkipRetry {
			return fmt.Errorf("attempt %d: %w: %w", t.Attempt, errBehavior, worker.ErrSkipRetry)
		}
		return fmt.Errorf("attempt %d: %w", t.Attempt, errBehavior)
	}
	return nil
}

// severable cuts an in-process member off its store, which is what a
// killed process looks like from the store's side.
type severable struct {
	worker.Store
	cut *atomic.Bool
}

var errCut = errors.New("workertest: member killed")

func (s *severable) err() error {
	if s.cut.Load() {
		return errCut
	}
	return nil
}

func (s *severable) Fetch(ctx context.Context, c string, st []string, max int, block time.Duration) ([]*worker.Delivery, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	ds, err := s.Store.Fetch(ctx, c, st, max, block)
	if s.err() != nil {
		return nil, errCut // taken by the store, never seen by the dead member
	}
	return ds, err
}

func (s *severable) Reclaim(ctx context.Context, c string, st []string, idle time.Duration, max int) ([]*worker.Delivery, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Reclaim(ctx, c, st, idle, max)
}

func (s *severable) Begin(ctx context.Context, c string, hold time.Duration, sts []worker.Start) (worker.BeginResult, error) {
	if err := s.err(); err != nil {
		return worker.BeginResult{}, err
	}
	return s.Store.Begin(ctx, c, hold, sts)
}

func (s *severable) Register(ctx context.Context, c string, st []string, live time.Duration) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.Register(ctx, c, st, live)
}

func (s *severable) Heartbeat(ctx context.Context, c string, live, hold time.Duration, hs []worker.Hold) ([]int, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Heartbeat(ctx, c, live, hold, hs)
}

func (s *severable) Finish(ctx context.Context, c string, fs []worker.Finish) ([]bool, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Finish(ctx, c, fs)
}

func (s *severable) PromoteDue(ctx context.Context, max int) (worker.Promoted, error) {
	if err := s.err(); err != nil {
		return worker.Promoted{}, err
	}
	return s.Store.PromoteDue(ctx, max)
}

// eventLog turns a member's log records into events (and test log lines).
type eventLog struct {
	member string
	emit   func(Event)
	t      *testing.T
	attrs  []slog.Attr
}

func (h *eventLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *eventLog) Handle(_ context.Context, r slog.Record) error {
	e := Event{Member: h.member, Kind: KindLog, Msg: r.Message, At: r.Time, Attrs: map[string]string{}}
	var b strings.Builder
	b.WriteString(h.member + ": " + r.Level.String() + " " + r.Message)
	each := func(a slog.Attr) bool {
		if a.Key == "tick" {
			e.Tick = a.Value.String()
		}
		e.Attrs[a.Key] = a.Value.String()
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	}
	for _, a := range h.attrs {
		each(a)
	}
	r.Attrs(each)
	if h.t != nil {
		h.t.Log(b.String())
	} else {
		fmt.Fprintln(os.Stderr, b.String())
	}
	h.emit(e)
	return nil
}

func (h *eventLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &eventLog{member: h.member, emit: h.emit, t: h.t, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *eventLog) WithGroup(string) slog.Handler { return h }

// tail keeps the last 64 KiB written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if n := len(t.b); n > 64<<10 {
		t.b = t.b[n-64<<10:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

const envSpec = "ONETICK_WORKERTEST_SPEC"

// RunChildIfAsked runs a fleet member and exits when the process was
// started by the suite as one (its environment holds a specification);
// otherwise it returns at once. Call it first thing in TestMain. open
// returns a store of the backend named by the harness's Command (through
// its environment) and a function that closes it.
func RunChildIfAsked(open func() (worker.Store, func())) {
	js := os.Getenv(envSpec)
	if js == "" {
		return
	}
	var spec Spec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "workertest child: bad spec:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
	store, closeStore := open()
	logger := slog.New(&eventLog{member: spec.Consumer, emit: emit})
	crash := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	w, err := build(spec, store, nil, logger, emit, nil, crash)
	if err != nil {
		fmt.Fprintln(os.Stderr, "workertest child:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err = w.Run(ctx)
	stop()
	closeStore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "workertest child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
