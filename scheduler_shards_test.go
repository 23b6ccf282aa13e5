package onetick_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/memory"
)

// every fires every d (a whole multiple of d since the epoch).
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(e)).Add(time.Duration(e))
}

// staticSource is a JobSource whose run-time jobs never change.
type staticSource []onetick.Job

func (s staticSource) Jobs(context.Context) ([]onetick.Job, int64, error) { return s, 1, nil }
func (s staticSource) Version(context.Context) (int64, error)             { return 1, nil }

// firings records every tick the replicas' sinks receive, and signals
// each delivery.
type firings struct {
	mu      sync.Mutex
	ticks   map[string][]onetick.TickRecord // by job, in delivery order
	changed chan struct{}
}

func (f *firings) sink() onetick.Sink {
	return onetick.SinkFunc(func(_ context.Context, ticks []onetick.TickRecord) error {
		f.mu.Lock()
		for _, t := range ticks {
			f.ticks[t.Job] = append(f.ticks[t.Job], t)
		}
		f.mu.Unlock()
		select {
		case f.changed <- struct{}{}:
		default:
		}
		return nil
	})
}

// since counts each job's ticks delivered by replica (any: "") after the
// first n of the job's ticks.
func (f *firings) count(job, replica string, after int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := 0
	for i, t := range f.ticks[job] {
		if i >= after && (replica == "" || t.Replica == replica) {
			c++
		}
	}
	return c
}

func (f *firings) lens(jobs []string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int{}
	for _, j := range jobs {
		m[j] = len(f.ticks[j])
	}
	return m
}

// await waits, re-checking at every delivery, until cond holds.
func (f *firings) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-f.changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// Two replicas with four shards over one memory store: the shards spread
// two and two, each job (of the file, or defined at run time) fires in
// its own shard's view, every slot once;
// when one replica stops, the other leads all four shards and every job
// keeps firing, still every slot once.
func TestShardedSchedulersShareTheShards(t *testing.T) {
	const shards = 4
	const period = 200 * time.Millisecond
	mem := memory.New(memory.Options{})
	defer mem.Close()
	var jobs, dyn []onetick.Job
	for _, n := range shardtest.Names("job", shards, 2) {
		jobs = append(jobs, onetick.Job{Name: n, Schedule: every(period)})
	}
	for _, n := range shardtest.Names("dyn", shards, 1) {
		dyn = append(dyn, onetick.Job{Name: n, Schedule: every(period)})
	}
	var names []string
	for _, j := range append(slices.Clone(jobs), dyn...) {
		names = append(names, j.Name)
	}
	fired := &firings{ticks: map[string][]onetick.TickRecord{}, changed: make(chan struct{}, 1)}
	log := slog.New(slog.NewTextHandler(tWriter{t}, nil))
	type replica struct {
		s    *onetick.Scheduler
		stop func() error // cancels Run and returns its error; idempotent
	}
	start := func(name string) replica {
		s, err := onetick.New(onetick.Config{
			Backend: mem, Replica: name, Jobs: jobs, Source: staticSource(dyn), Shards: shards, Sink: fired.sink(),
			// Generous against a loaded machine: a slot is lost only past
			// the grace, twice the TTL.
			Lease:  onetick.LeaseConfig{TTL: 3 * time.Second, Renew: 500 * time.Millisecond},
			Logger: log.With("test_replica", name), Registerer: prometheus.NewRegistry(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if s.Balancer() == nil || s.Elector() != nil {
			t.Fatalf("%d shards: want a balancer and no single elector", shards)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		return replica{s, sync.OnceValue(func() error { cancel(); return <-done })}
	}
	a, b := start("a"), start("b")
	defer func() { _ = a.stop(); _ = b.stop() }()

	fired.await(t, "the shards spread 2/2 and every job fired", func() bool {
		for _, n := range names {
			if fired.count(n, "", 0) == 0 {
				return false
			}
		}
		return len(a.s.Balancer().Led()) == 2 && len(b.s.Balancer().Led()) == 2
	})
	if got := testutil.ToFloat64(a.s.Metrics().IsLeader); got != 1 {
		t.Errorf("a leads 2 shards: scheduler_is_leader = %v, want 1", got)
	}
	// Each replica keeps firing its shards' jobs.
	mark := fired.lens(names)
	fired.await(t, "every job fired three more times", func() bool {
		for _, n := range names {
			if fired.count(n, "", mark[n]) < 3 {
				return false
			}
		}
		return true
	})
	ledA, ledB := a.s.Balancer().Led(), b.s.Balancer().Led()
	for _, s := range ledA {
		if slices.Contains(ledB, s) {
			t.Fatalf("shard %d led by both: a %v, b %v", s, ledA, ledB)
		}
	}

	if err := a.stop(); err != nil {
		t.Fatalf("a: %v", err)
	}
	if got := testutil.ToFloat64(a.s.Metrics().IsLeader); got != 0 {
		t.Errorf("a stopped: scheduler_is_leader = %v, want 0", got)
	}
	mark = fired.lens(names)
	fired.await(t, "b leads every shard and every job fired three times from b", func() bool {
		for _, n := range names {
			if fired.count(n, "b", mark[n]) < 3 {
				return false
			}
		}
		return len(b.s.Balancer().Led()) == shards
	})
	if err := b.stop(); err != nil {
		t.Fatalf("b: %v", err)
	}

	ctx := context.Background()
	views := make([]onetick.Backend, shards)
	for i := range views {
		v, err := mem.Shard(i, shards)
		if err != nil {
			t.Fatal(err)
		}
		views[i] = v
	}
	fired.mu.Lock()
	defer fired.mu.Unlock()
	for _, n := range names {
		ticks := fired.ticks[n]
		slots := make([]onetick.Slot, len(ticks))
		for i, tk := range ticks {
			slots[i] = tk.Slot
		}
		slices.Sort(slots)
		for i := 1; i < len(slots); i++ {
			if slots[i] == slots[i-1] {
				t.Errorf("job %s: slot %s claimed twice", n, slots[i])
			} else if want := slots[i-1] + onetick.Slot(period.Milliseconds()); slots[i] != want {
				t.Errorf("job %s: slots %s to %s not claimed", n, want, slots[i]-1)
			}
		}
		home := onetick.ShardOf(n, shards)
		for i, v := range views {
			last, err := v.LastFired(ctx, []string{n})
			if err != nil {
				t.Fatal(err)
			}
			switch got, ok := last[n]; {
			case i == home && (!ok || got != slots[len(slots)-1]):
				t.Errorf("job %s: last fired in its shard %d's view %v (%v), want %s", n, i, got, ok, slots[len(slots)-1])
			case i != home && ok:
				t.Errorf("job %s of shard %d: last fired %s in shard %d's view", n, home, got, i)
			}
		}
	}
}

// Shards above 1 need a store that shards: New names the setting.
func TestShardsNeedASharder(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	jobs := []onetick.Job{{Name: "a", Schedule: every(time.Second)}}
	for _, tc := range []struct {
		name    string
		backend onetick.SchedulerBackend
		shards  int
	}{
		{"not a Sharder", struct{ onetick.SchedulerBackend }{mem}, 4},
		{"no membership", struct {
			onetick.SchedulerBackend
			onetick.Sharder
		}{mem, mem}, 2},
		{"no layout", struct {
			onetick.SchedulerBackend
			onetick.Sharder
			onetick.Members
		}{mem, mem, mem}, 2},
		{"too many", mem, onetick.MaxShards + 1},
		{"negative", mem, -1},
	} {
		_, err := onetick.New(onetick.Config{Backend: tc.backend, Jobs: jobs, Shards: tc.shards})
		var ce *onetick.ConfigError
		if !errors.As(err, &ce) || ce.Field != "shards" {
			t.Errorf("%s: New = %v, want a configuration error naming shards", tc.name, err)
		}
	}
	// One shard is today's path, on any store.
	for _, n := range []int{0, 1} {
		s, err := onetick.New(onetick.Config{Backend: struct{ onetick.SchedulerBackend }{mem}, Jobs: jobs, Shards: n})
		if err != nil {
			t.Fatalf("shards %d: %v", n, err)
		}
		if s.Elector() == nil || s.Balancer() != nil {
			t.Errorf("shards %d: want the single elector, no balancer", n)
		}
	}
}
