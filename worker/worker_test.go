package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/worker"
)

func TestConfigValidate(t *testing.T) {
	store := memory.New(memory.Options{}).WorkerStore("")
	for _, c := range []struct {
		cfg   worker.Config
		field string
	}{
		{worker.Config{}, "worker.store"},
		{worker.Config{Store: store, Concurrency: -1}, "worker.concurrency"},
		{worker.Config{Store: store, ShutdownTimeout: -time.Second}, "worker.shutdown_timeout"},
		{worker.Config{Store: store, TakeoverIdle: time.Millisecond}, "worker.takeover_idle"},
		{worker.Config{Store: store, HeartbeatInterval: -time.Second}, "worker.heartbeat_interval"},
		{worker.Config{Store: store, TakeoverIdle: 3 * time.Second, HeartbeatInterval: 1500 * time.Millisecond}, "worker.heartbeat_interval"},
		{worker.Config{Store: store, HeartbeatInterval: 11 * time.Second}, "worker.heartbeat_interval"},
		{worker.Config{Store: store, DoneRetention: -1}, "worker.done_retention"},
		{worker.Config{Store: store, DoneRetention: time.Second}, "worker.done_retention"},
		{worker.Config{Store: store, MaxDeliveries: -1}, "worker.max_deliveries"},
		{worker.Config{Store: store, HeartbeatInterval: time.Second, LivenessTTL: 1500 * time.Millisecond}, "worker.liveness_ttl"},
		{worker.Config{Store: store, TakeoverIdle: 6 * time.Second, LivenessTTL: 7 * time.Second}, "worker.liveness_ttl"},
	} {
		_, err := worker.New(c.cfg)
		var ce *onetick.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, onetick.ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want an error naming %s", c.cfg, err, c.field)
		}
	}
	if _, err := worker.New(worker.Config{Store: store, TakeoverIdle: 3 * time.Second, HeartbeatInterval: time.Second}); err != nil {
		t.Fatalf("heartbeat at a third of the takeover idle time: %v", err)
	}
}

func TestHandleRejects(t *testing.T) {
	w, err := worker.New(worker.Config{Store: memory.New(memory.Options{}).WorkerStore("")})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, *worker.Task) error { return nil }
	if err := w.HandleFunc("a", ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		job   string
		f     func(context.Context, *worker.Task) error
		opts  []worker.JobOption
		field string
	}{
		{"", ok, nil, "jobs[].name"},
		{"has space", ok, nil, "jobs[has space].name"},
		{"a", ok, nil, "jobs[a].name"},
		{"b", nil, nil, "jobs[b].handler"},
		{"b", ok, []worker.JobOption{worker.WithTimeout(-1)}, "jobs[b].timeout"},
		{"b", ok, []worker.JobOption{worker.WithMaxAttempts(0)}, "jobs[b].max_attempts"},
		{"b", ok, []worker.JobOption{worker.WithBackoff(nil)}, "jobs[b].backoff"},
		{"b", ok, []worker.JobOption{worker.WithOverlap("sometimes")}, "jobs[b].overlap"},
		{"b", ok, []worker.JobOption{worker.WithStream("")}, "jobs[b].stream"},
	} {
		err := w.HandleFunc(c.job, c.f, c.opts...)
		var ce *onetick.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("HandleFunc(%q): %v, want an error naming %s", c.job, err, c.field)
		}
	}
	empty, _ := worker.New(worker.Config{Store: memory.New(memory.Options{}).WorkerStore("")})
	if err := empty.Run(context.Background()); err == nil {
		t.Fatal("Run without handlers succeeded")
	}
}

// env is a memory backend with a worker running on it.
type env struct {
	t     *testing.T
	b     *memory.Backend
	store *memory.WorkerStore
	w     *worker.Worker
	reg   *prometheus.Registry
	logs  chan slog.Record
	slot  map[string]onetick.Slot
	stop  func()
}

func newEnv(t *testing.T, cfg worker.Config) *env {
	b := memory.New(memory.Options{})
	e := &env{t: t, b: b, store: b.WorkerStore(""), reg: prometheus.NewRegistry(),
		logs: make(chan slog.Record, 1000), slot: map[string]onetick.Slot{}}
	cfg.Store, cfg.Registerer = e.store, e.reg
	cfg.Logger = slog.New(recordHandler{e.logs})
	if cfg.TakeoverIdle == 0 {
		cfg.TakeoverIdle, cfg.HeartbeatInterval, cfg.LivenessTTL = time.Second, 100*time.Millisecond, time.Second
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.w = w
	return e
}

func (e *env) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.w.Run(ctx); err != nil {
			e.t.Errorf("run: %v", err)
		}
	}()
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(e.stop)
}

// produce claims one tick of job on stream with payload.
func (e *env) produce(job, stream, payload string) string {
	e.t.Helper()
	ctx := context.Background()
	g, err := e.b.Acquire(ctx, "producer", time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = e.b.Release(ctx, g.Lease) }()
	s, ok := e.slot[job]
	if !ok {
		s = onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	}
	e.slot[job] = s + 1000
	tk := onetick.Tick{Job: job, Slot: s, Stream: stream, Payload: payload, Retention: time.Minute}
	if _, err := e.b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil {
		e.t.Fatal(err)
	}
	return tk.ID()
}

// awaitLog waits for a log record whose message starts with msg and whose
// tick attribute is tick.
func (e *env) awaitLog(msg, tick string) slog.Record {
	e.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-e.logs:
			if !strings.HasPrefix(r.Message, msg) {
				continue
			}
			match := tick == ""
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "tick" && a.Value.String() == tick {
					match = true
				}
				return true
			})
			if match {
				return r
			}
		case <-timeout:
			e.t.Fatalf("no log %q for %s", msg, tick)
		}
	}
}

func (e *env) counter(job, outcome string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "worker_runs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["job_name"] == job && l["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	e.t.Fatalf("no worker_runs_total{job_name=%q,outcome=%q}", job, outcome)
	return 0
}

type recordHandler struct{ ch chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Clone():
	default:
	}
	return nil
}
func (h recordHandler) WithAttrs(as []slog.Attr) slog.Handler { return attrHandler{h, as} }
func (h recordHandler) WithGroup(string) slog.Handler         { return h }

type attrHandler struct {
	recordHandler
	as []slog.Attr
}

func (h attrHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.as...)
	return h.recordHandler.Handle(ctx, r)
}
func (h attrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return attrHandler{h.recordHandler, append(append([]slog.Attr(nil), h.as...), as...)}
}

type payload struct {
	N    int    `json:"n"`
	Name string `json:"name"`
}

// HandleJSON decodes the payload; a payload that does not decode goes to
// the dead letters at once, with the decode error.
func TestHandleJSON(t *testing.T) {
	e := newEnv(t, worker.Config{})
	got := make(chan payload, 1)
	err := worker.HandleJSON(e.w, "typed", func(_ context.Context, _ *worker.Task, p payload) error {
		got <- p
		return nil
	}, worker.WithMaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	e.run()
	first := e.produce("typed", "onetick:stream:typed", `{"n":7,"name":"x"}`)
	if p := <-got; p != (payload{7, "x"}) {
		t.Fatalf("decoded %+v", p)
	}
	e.awaitLog("tick succeeded", first)
	bad := e.produce("typed", "onetick:stream:typed", `{"n":"seven"}`)
	e.awaitLog("tick failed and went to the dead letters", bad)
	dls, err := e.store.DeadLetters(context.Background(), "", 10)
	if err != nil || len(dls) != 1 || dls[0].Tick != bad || dls[0].Attempts != 1 || !strings.Contains(dls[0].Error, "decoding the payload") {
		t.Fatalf("dead letters %+v, %v: want the decode error after one attempt", dls, err)
	}
}

// An error with a RetryAfter delay postpones the next attempt at least
// that long, whatever the backoff says.
func TestRetryAfter(t *testing.T) {
	e := newEnv(t, worker.Config{})
	var mu sync.Mutex
	var ends []time.Time
	second := make(chan time.Time, 1)
	err := e.w.HandleFunc("ra", func(_ context.Context, tk *worker.Task) error {
		if tk.Attempt == 1 {
			mu.Lock()
			defer func() { ends = append(ends, time.Now()); mu.Unlock() }()
			return worker.RetryAfterError(errors.New("503"), 300*time.Millisecond)
		}
		second <- time.Now()
		return nil
	}, worker.WithBackoff(worker.ConstantBackoff(time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	e.run()
	e.produce("ra", "onetick:stream:ra", "{}")
	at := <-second
	mu.Lock()
	defer mu.Unlock()
	if gap := at.Sub(ends[0]); gap < 290*time.Millisecond {
		t.Fatalf("second attempt %s after the first failed, want at least the 300ms asked for", gap)
	}
}

// A job's timeout cancels the handler's context with cause ErrTimeout and
// counts as a failed attempt.
func TestTimeout(t *testing.T) {
	e := newEnv(t, worker.Config{})
	cause := make(chan error, 1)
	err := e.w.HandleFunc("slow", func(ctx context.Context, _ *worker.Task) error {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, worker.WithTimeout(50*time.Millisecond), worker.WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	e.run()
	tick := e.produce("slow", "onetick:stream:slow", "{}")
	if c := <-cause; !errors.Is(c, worker.ErrTimeout) {
		t.Fatalf("cause %v, want ErrTimeout", c)
	}
	e.awaitLog("tick failed and went to the dead letters", tick)
	e.stop()
	if f, d := e.counter("slow", "failed"), e.counter("slow", "dead"); f != 1 || d != 1 {
		t.Fatalf("failed %v, dead %v", f, d)
	}
}

// A tick of a job with no handler, on a stream the worker reads for
// another job, goes to the dead letters with ErrNoHandler.
func TestNoHandler(t *testing.T) {
	e := newEnv(t, worker.Config{})
	ran := make(chan string, 1)
	if err := e.w.HandleFunc("known", func(_ context.Context, tk *worker.Task) error { ran <- tk.Tick; return nil },
		worker.WithStream("shared")); err != nil {
		t.Fatal(err)
	}
	e.run()
	unknown := e.produce("unknown", "shared", "{}")
	e.awaitLog("tick dead-lettered: no handler", unknown)
	known := e.produce("known", "shared", "{}")
	if got := <-ran; got != known {
		t.Fatalf("ran %s", got)
	}
	dls, err := e.store.DeadLetters(context.Background(), "", 10)
	if err != nil || len(dls) != 1 || dls[0].Tick != unknown || !strings.Contains(dls[0].Error, worker.ErrNoHandler.Error()) {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	e.stop()
	if n := e.counter("_unregistered", "dead"); n != 1 {
		t.Fatalf("dead ticks of unregistered jobs counted %v", n)
	}
}

// The metrics follow the conventions: lint-clean, job_name not job.
func TestMetricsLint(t *testing.T) {
	e := newEnv(t, worker.Config{})
	if err := e.w.HandleFunc("m", func(context.Context, *worker.Task) error { return nil }); err != nil {
		t.Fatal(err)
	}
	e.run()
	tick := e.produce("m", "onetick:stream:m", "{}")
	e.awaitLog("tick succeeded", tick)
	e.stop()
	problems, err := testutil.GatherAndLint(e.reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v, %v", problems, err)
	}
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job" || l.GetName() == "instance" {
					t.Errorf("%s has a label %q", mf.GetName(), l.GetName())
				}
			}
		}
	}
	if n := e.counter("m", "succeeded"); n != 1 {
		t.Fatalf("succeeded %v", n)
	}
}

// failingHeartbeats is a store whose heartbeats fail while cut is set.
type failingHeartbeats struct {
	worker.Store
	cut atomic.Bool
}

func (s *failingHeartbeats) Heartbeat(ctx context.Context, c string, live, hold time.Duration, hs []worker.Hold) ([]int, error) {
	if s.cut.Load() {
		return nil, errors.New("cut off")
	}
	return s.Store.Heartbeat(ctx, c, live, hold, hs)
}

// A worker whose heartbeats stop reaching the store cancels its handler
// (ErrOwnershipLost) one heartbeat interval before the store's liveness of
// it lapses, and gives the tick back; only then, once the liveness
// lapsed, could another worker have taken it. Store and worker share a
// fake clock, so the order is exact.
func TestDistrustBeforeLivenessLapses(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Now())
	b := memory.New(memory.Options{Clock: fc})
	defer b.Close()
	store := &failingHeartbeats{Store: b.WorkerStore("")}
	logs := make(chan slog.Record, 1000)
	w, err := worker.New(worker.Config{Store: store, Clock: fc, Logger: slog.New(recordHandler{logs}), Consumer: "w",
		HeartbeatInterval: time.Second, LivenessTTL: 3 * time.Second, TakeoverIdle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	started, cause := make(chan struct{}), make(chan error, 1)
	if err := w.HandleFunc("j", func(ctx context.Context, _ *worker.Task) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e := &env{t: t, b: b, slot: map[string]onetick.Slot{}}
	e.produce("j", "onetick:stream:j", "{}")
	<-started
	store.cut.Store(true)
	// The last heartbeat that reached the store was the registration, at
	// the fake clock's start: the store keeps w alive until +3s, w trusts
	// its tick until +2s.
	fc.Advance(2 * time.Second)
	select {
	case c := <-cause:
		if !errors.Is(c, worker.ErrOwnershipLost) {
			t.Fatalf("cause %v, want ErrOwnershipLost", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not cancelled at the trust deadline")
	}
	other := b.WorkerStore("")
	for deadline := time.Now().Add(20 * time.Second); ; {
		// Given back, it is taken at once, still inside the liveness.
		got, err := other.Reclaim(context.Background(), "other", []string{"onetick:stream:j"}, time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			if got[0].Attempt != 1 {
				t.Fatalf("taken over %+v: want attempt 1 (no attempt spent)", got[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled tick was not given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
