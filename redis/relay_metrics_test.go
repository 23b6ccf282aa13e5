package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// signalHandler is a slog.Handler that signals each record on news.
type signalHandler struct{ news chan struct{} }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(context.Context, slog.Record) error {
	select {
	case h.news <- struct{}{}:
	default:
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// TestRelayMetricsAsynq: a scheduler relaying to asynq counts each
// relayed tick by relay and queue, exactly as many as asynq's pending list
// holds; ticks of a queue whose pending list was damaged under it count
// as failures; triggers and backfills count through Ops (a repeated
// trigger key as a duplicate, a failed enqueue call as a failure).
func TestRelayMetricsAsynq(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	rc := b.Client()
	every, err := cron.Parse("@every 100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	news := make(chan struct{}, 1)
	signal := func() {
		select {
		case news <- struct{}{}:
		default:
		}
	}
	jobs := []onetick.Job{
		{Name: "report", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "q1"}},
		{Name: "fragile", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "bad"}},
	}
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "one", Lease: onetick.LeaseConfig{TTL: 2 * time.Second},
		Logger: slog.New(signalHandler{news}), Jobs: jobs,
		Sink: onetick.SinkFunc(func(context.Context, []onetick.TickRecord) error { signal(); return nil })})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Metrics()
	relayed := func(q string) float64 {
		return testutil.ToFloat64(m.RelayedTicks.WithLabelValues(onetick.RelayAsynq, q))
	}
	dups := func(q string) float64 {
		return testutil.ToFloat64(m.RelayDuplicates.WithLabelValues(onetick.RelayAsynq, q))
	}
	fails := func(q string) float64 {
		return testutil.ToFloat64(m.RelayFailures.WithLabelValues(onetick.RelayAsynq, q))
	}
	await := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for !cond() {
			select {
			case <-news:
			case <-timeout:
				t.Fatalf("not within 60s: %s", what)
			}
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
		}
	}
	defer stop()
	await("3 ticks relayed to each queue", func() bool { return relayed("q1") >= 3 && relayed("bad") >= 3 })
	// asynq's pending list of queue bad turns into a string under the
	// running scheduler: its ticks are Broken, counted as failures, while
	// q1's go on.
	if err := rc.Del(ctx, "asynq:{bad}:pending").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, "asynq:{bad}:pending", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := relayed("q1")
	await("failures of queue bad, and q1 still relayed", func() bool { return fails("bad") >= 2 && relayed("q1") >= before+3 })
	stop()
	if got, want := relayed("q1"), float64(llen(t, rc, "asynq:{q1}:pending")); got != want {
		t.Errorf("relayed{q1} = %v, asynq's pending list holds %v", got, want)
	}
	if dups("q1") != 0 || fails("q1") != 0 || dups("bad") != 0 {
		t.Errorf("duplicates q1 %v, failures q1 %v, duplicates bad %v; want 0", dups("q1"), fails("q1"), dups("bad"))
	}

	// Triggers and backfills through Ops with the scheduler's metrics.
	ops := &onetick.Ops{Backend: b, Jobs: jobs, Metrics: m}
	who := onetick.Actor{Who: "test"}
	r0, f0 := relayed("q1"), fails("bad")
	for range 2 {
		if _, err := ops.Trigger(ctx, "report", "k1", "", who); err != nil {
			t.Fatal(err)
		}
	}
	if relayed("q1") != r0+1 || dups("q1") != 1 {
		t.Errorf("a trigger twice: relayed +%v, duplicates %v; want +1 and 1", relayed("q1")-r0, dups("q1"))
	}
	now, err := b.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from := now.Truncate(time.Second).Add(-time.Hour)
	if _, err := ops.Backfill(ctx, "fragile", onetick.BackfillRequest{From: from, To: from.Add(250 * time.Millisecond)}, who); err != nil {
		t.Fatal(err)
	}
	if got := fails("bad"); got != f0+3 {
		t.Errorf("a backfill of 3 slots to a damaged queue: failures +%v, want +3", got-f0)
	}
	// An enqueue call that fails (the store's connection closed) counts
	// each of its relayed ticks as a failure.
	closed, err := redis.Open(srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	ops = &onetick.Ops{Backend: closed, Jobs: jobs, Metrics: m}
	f1 := fails("q1")
	if _, err := ops.Trigger(ctx, "report", "k2", "", who); err == nil {
		t.Fatal("a trigger on a closed store succeeded")
	}
	if fails("q1") != f1+1 {
		t.Errorf("a failed trigger call: failures{q1} +%v, want +1", fails("q1")-f1)
	}
}

// TestRelayMetricsClaimFails: while Redis is down the scheduler's claim
// calls fail, and each relayed tick in them counts as a failure; after a
// restart (AOF) the relay goes on, and asynq holds no task the counters
// cannot account for.
func TestRelayMetricsClaimFails(t *testing.T) {
	srv := redistest.Start(t, redistest.AppendOnly())
	ctx := context.Background()
	b := relayBackend(t, srv)
	every, err := cron.Parse("@every 100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	news := make(chan struct{}, 1)
	signal := func() {
		select {
		case news <- struct{}{}:
		default:
		}
	}
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "one", Lease: onetick.LeaseConfig{TTL: 2 * time.Second},
		Logger: slog.New(signalHandler{news}),
		Jobs:   []onetick.Job{{Name: "report", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "q"}}},
		Sink:   onetick.SinkFunc(func(context.Context, []onetick.TickRecord) error { signal(); return nil })})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Metrics()
	relayed := func() float64 { return testutil.ToFloat64(m.RelayedTicks.WithLabelValues(onetick.RelayAsynq, "q")) }
	fails := func() float64 { return testutil.ToFloat64(m.RelayFailures.WithLabelValues(onetick.RelayAsynq, "q")) }
	await := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for !cond() {
			select {
			case <-news:
			case <-timeout:
				t.Fatalf("not within 60s: %s", what)
			}
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	await("3 ticks relayed", func() bool { return relayed() >= 3 })
	srv.Kill()
	// Each failed claim attempt is logged ("claim failed; retrying"), after
	// it is counted.
	await("a failed claim counted", func() bool { return fails() >= 1 })
	srv.Restart()
	before := relayed()
	await("3 more ticks relayed after the restart", func() bool { return relayed() >= before+3 })
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("run: %v", err)
	}
	// A claim applied whose answer was lost is a failure with a task.
	n := float64(llen(t, b.Client(), "asynq:{q}:pending"))
	if n < relayed() || n > relayed()+fails() {
		t.Errorf("asynq holds %v tasks; relayed %v, failures %v", n, relayed(), fails())
	}
}
