package main

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func benchEnv(b *testing.B) *env {
	b.Helper()
	srv, err := startRedis()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = c.Close() })
	return &env{srv: srv, adm: admin{c: c}, ot: otLogs{c: &logCounter{}}}
}

func benchLease(b *testing.B, crash bool) {
	e := benchEnv(b)
	b.ResetTimer()
	ds, err := e.leaseRounds(context.Background(), b.N, time.Second, crash)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	ds = sortedCopy(ds)
	b.ReportMetric(float64(pct(ds, 50))/1e6, "p50-ms")
	b.ReportMetric(float64(pct(ds, 99))/1e6, "p99-ms")
	// ns/op includes starting each round's standby and letting it settle
	// (about 150 ms); the latency itself is p50-ms / p99-ms.
}

// BenchmarkHandover: onetick leader cancelled (it releases the lease) until
// a standby leads, TTL 1 s.
func BenchmarkHandover(b *testing.B) { benchLease(b, false) }

// BenchmarkTakeover: onetick leader stopped without releasing (a crash)
// until a standby leads, TTL 1 s.
func BenchmarkTakeover(b *testing.B) { benchLease(b, true) }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAsynqConsumer: the relays-faults consumer (a real asynq Server)
// counts the tasks of a onetick replica relaying to asynq through the
// gated backend (which must pass the store's Relayer through) and of an
// asynq Scheduler, each with the slot it was enqueued for.
func TestAsynqConsumer(t *testing.T) {
	srv, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	e := &env{srv: srv, adm: admin{c: c}, ot: otLogs{c: &logCounter{}}}
	ctx := context.Background()
	enq := newRecorder(64)
	cons, err := e.asynqConsumer(ctx, "", enq)
	if err != nil {
		t.Fatal(err)
	}
	var insts []instance
	for _, s := range e.relayFaultSystems() {
		in, err := s.start(0, 2, dupTTL, enq, nil)
		if err != nil {
			cons.close()
			stopInstances(insts)
			t.Fatal(err)
		}
		insts = append(insts, in)
	}
	// Wait until the relay's tasks were worked and the Scheduler enqueued.
	scheduled := func() int {
		enq.mu.Lock()
		defer enq.mu.Unlock()
		return len(enq.ids)
	}
	for deadline := time.Now().Add(30 * time.Second); len(cons.r.snapshot()) < 2 || scheduled() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cons.close()
			stopInstances(insts)
			t.Fatalf("after 30 s: %d relayed tasks worked, %d Scheduler tasks enqueued", len(cons.r.snapshot()), scheduled())
		}
	}
	stopInstances(insts)
	recs, err := cons.collect(nil)
	if err != nil {
		t.Fatal(err)
	}
	var relayed, sched int
	for _, x := range recs {
		if x.job < 0 || x.job > 1 || x.slot%1000 != 0 || x.slot <= 0 {
			t.Errorf("worked task with job %d, slot %d: want job 0 or 1 and a whole-second slot", x.job, x.slot)
		}
		if x.inst < 0 {
			relayed++
		} else {
			sched++
		}
	}
	if relayed < 2 || sched < 2 {
		t.Errorf("worked %d relayed and %d Scheduler tasks, want at least 2 of each", relayed, sched)
	}
	if s := e.ot.c.String(); s != "" {
		t.Errorf("onetick logged: %s", s)
	}
}

// TestShardsBurst: one burst of the shards part on a Cluster of three
// primaries, 3 shards and 2 replicas: every tick of the measured slot is
// counted once, each primary holds one shard and claims its share, and
// the leaders settled with every shard led.
func TestShardsBurst(t *testing.T) {
	srv, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	e := &env{srv: srv, adm: admin{c: c}, ot: otLogs{c: &logCounter{}}}
	cl, err := startCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	const k = 3000
	b := e.shardBurstRun(context.Background(), cl, k, 3, 2, 5)
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.ticks != k {
		t.Errorf("%d ticks of the slot, want %d", b.ticks, k)
	}
	sum := 0
	for i, n := range b.primaryTicks {
		sum += n
		if n == 0 || b.primaryShards[i] != 1 {
			t.Errorf("primary %d: %d shards, %d ticks; want one shard and some ticks", i, b.primaryShards[i], n)
		}
		if b.primary[i].scriptCalls == 0 || b.primary[i].cpu <= 0 {
			t.Errorf("primary %d: %d script calls, %s CPU over the burst", i, b.primary[i].scriptCalls, b.primary[i].cpu)
		}
	}
	led := 0
	for _, n := range b.replicaLed {
		led += n
		if n > 2 {
			t.Errorf("a replica leads %d of 3 shards with 2 replicas", n)
		}
	}
	if sum != k || led != 3 {
		t.Errorf("ticks over the primaries %d (want %d), shards led %d (want 3)", sum, k, led)
	}
	md := shardsMarkdown([]shardBurst{b}, shardMem{}, k, "", "", "", time.Second)
	if !strings.Contains(md, "| 3-primary Cluster | 3 | 2 | 1 / 1 / 1 |") {
		t.Errorf("markdown:\n%s", md)
	}
	if s := e.ot.c.String(); s != "" {
		t.Errorf("onetick logged: %s", s)
	}
}
