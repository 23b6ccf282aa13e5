package onetick_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/memory"
	otredis "github.com/onetick/onetick/redis"
)

// shardFleet runs replicas a and b, each with its own registry, over one
// store with shards shards and a job in each shard, until the shards are
// spread evenly.
type shardFleet struct {
	t     *testing.T
	s     map[string]*onetick.Scheduler
	reg   map[string]*prometheus.Registry
	stops []func() error
}

func startShardFleet(t *testing.T, b onetick.SchedulerBackend, shards int) *shardFleet {
	t.Helper()
	var jobs []onetick.Job
	var names []string
	for _, n := range shardtest.Names("m", shards, 1) {
		jobs = append(jobs, onetick.Job{Name: n, Schedule: every(200 * time.Millisecond)})
		names = append(names, n)
	}
	fired := &firings{ticks: map[string][]onetick.TickRecord{}, changed: make(chan struct{}, 1)}
	log := slog.New(slog.NewTextHandler(tWriter{t}, nil))
	f := &shardFleet{t: t, s: map[string]*onetick.Scheduler{}, reg: map[string]*prometheus.Registry{}}
	for _, name := range []string{"a", "b"} {
		reg := prometheus.NewRegistry()
		s, err := onetick.New(onetick.Config{Backend: b, Replica: name, Jobs: jobs, Shards: shards, Sink: fired.sink(),
			Lease:  onetick.LeaseConfig{TTL: 3 * time.Second, Renew: 500 * time.Millisecond},
			Logger: log.With("test_replica", name), Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		f.s[name], f.reg[name] = s, reg
		f.stops = append(f.stops, sync.OnceValue(func() error { cancel(); return <-done }))
	}
	t.Cleanup(f.stop)
	fired.await(t, "every job fired and the shards spread evenly", func() bool {
		for _, n := range names {
			if fired.count(n, "", 0) == 0 {
				return false
			}
		}
		return len(f.s["a"].Balancer().Led()) == shards/2 && len(f.s["b"].Balancer().Led()) == shards/2
	})
	return f
}

func (f *shardFleet) stop() {
	for _, s := range f.stops {
		if err := s(); err != nil {
			f.t.Errorf("a replica's Run: %v", err)
		}
	}
}

// series returns the values of a metric's series on reg, by their labels
// (name=value, sorted, comma-separated; "" for none).
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			if m.GetHistogram() != nil {
				v = float64(m.GetHistogram().GetSampleCount())
			}
			out[strings.Join(ls, ",")] = v
		}
	}
	return out
}

// With shards, the lease series carry the shard: each replica exports
// scheduler_is_leader, scheduler_lease_epoch, the clock offset, the
// renewal latency, store_damaged and standby time of every shard, fed by
// the shard's elector, and scheduler_shards_led; no unlabeled lease
// series is left. Over memory and a real Redis.
func TestShardedMetrics(t *testing.T) {
	const shards = 4
	mem := memory.New(memory.Options{})
	defer mem.Close()
	prefix := fmt.Sprintf("shardmetrics-%d", time.Now().UnixNano())
	rb, err := otredis.Open("redis://127.0.0.1:6379/0", otredis.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	shardtest.DropRedisKeys(t, prefix)
	for _, tc := range []struct {
		name string
		b    onetick.SchedulerBackend
	}{{"memory", mem}, {"redis", rb}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startShardFleet(t, tc.b, shards)
			leaders := map[string][]string{} // shard=N: the replicas that lead it
			for _, r := range []string{"a", "b"} {
				reg := f.reg[r]
				if got := series(t, reg, "scheduler_shards_led"); len(got) != 1 || got[""] != shards/2 {
					t.Errorf("%s: scheduler_shards_led = %v, want %d", r, got, shards/2)
				}
				isLeader := series(t, reg, "scheduler_is_leader")
				epoch := series(t, reg, "scheduler_lease_epoch")
				offset := series(t, reg, "scheduler_store_clock_offset_seconds")
				latency := series(t, reg, "scheduler_renewal_latency_seconds")
				standby := series(t, reg, "scheduler_standby_seconds_total")
				damaged := series(t, reg, "scheduler_store_damaged")
				if len(isLeader) != shards || len(epoch) != shards || len(offset) != shards ||
					len(latency) != shards || len(standby) != shards || len(damaged) != 3*shards {
					t.Fatalf("%s: series per shard: is_leader %v, epoch %v, offset %v, latency %v, standby %v, damaged %v",
						r, isLeader, epoch, offset, latency, standby, damaged)
				}
				for _, n := range f.s[r].Balancer().Led() {
					if isLeader[fmt.Sprintf("shard=%d", n)] != 1 {
						t.Errorf("%s leads shard %d: scheduler_is_leader = %v", r, n, isLeader)
					}
				}
				for i := range shards {
					k := fmt.Sprintf("shard=%d", i)
					if isLeader[k] == 1 {
						leaders[k] = append(leaders[k], r)
						// The leader's own terms: an epoch, round trips.
						if epoch[k] < 1 || latency[k] < 1 {
							t.Errorf("%s leads shard %d: epoch %v, renewals %v", r, i, epoch[k], latency[k])
						}
					}
				}
			}
			for i := range shards {
				if k := fmt.Sprintf("shard=%d", i); len(leaders[k]) != 1 {
					t.Errorf("shard %d: led by %v, want one replica", i, leaders[k])
				}
			}
			f.stop()
			for _, r := range []string{"a", "b"} {
				if got := series(t, f.reg[r], "scheduler_shards_led"); got[""] != 0 {
					t.Errorf("%s stopped: scheduler_shards_led = %v", r, got)
				}
				for k, v := range series(t, f.reg[r], "scheduler_is_leader") {
					if v != 0 {
						t.Errorf("%s stopped: scheduler_is_leader{%s} = %v", r, k, v)
					}
				}
			}
		})
	}
}

// One shard: the lease series stay unlabeled and there is no
// scheduler_shards_led.
func TestUnshardedMetricsUnchanged(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	reg := prometheus.NewRegistry()
	if _, err := onetick.New(onetick.Config{Backend: mem, Registerer: reg,
		Jobs: []onetick.Job{{Name: "a", Schedule: every(time.Minute)}}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scheduler_is_leader", "scheduler_lease_epoch", "scheduler_store_clock_offset_seconds",
		"scheduler_renewal_latency_seconds", "scheduler_standby_seconds_total"} {
		if got := series(t, reg, name); len(got) != 1 || got[""] != 0 {
			t.Errorf("%s = %v, want one unlabeled series at 0", name, got)
		}
	}
	if got := series(t, reg, "scheduler_shards_led"); len(got) != 0 {
		t.Errorf("scheduler_shards_led with one shard: %v", got)
	}
}

// A Metrics made by the caller backs one sharded Scheduler; a second one
// would register the same shard series twice, and New says so.
func TestShardedMetricsRegisteredOnce(t *testing.T) {
	mem := memory.New(memory.Options{})
	defer mem.Close()
	m, err := onetick.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := onetick.Config{Backend: mem, Metrics: m, Shards: 2, Jobs: []onetick.Job{{Name: "a", Schedule: every(time.Minute)}}}
	if _, err := onetick.New(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := onetick.New(cfg); err == nil {
		t.Error("a second sharded scheduler on one Metrics: want a registration error")
	}
}
