package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	otredis "github.com/onetick/onetick/redis"
)

// One burst of the "shards" part: k jobs due together every period
// seconds on a topology, spread over shards shards, run by replicas
// in-process schedulers (distinct Replica names). Once the shards' leaders
// have settled, the next slot is the measured burst: every primary's INFO
// commandstats and INFO cpu before and after it, the ticks of that slot
// by shard (hence by primary) and by replica, and their delivery times.

// shPrefix is the key prefix of the part's fleet: hash-tagged, so that on
// a Cluster every shard's keys are in one slot of its range
// (redis.ShardPrefix) and a claim is one script on one primary.
const shPrefix = "{sh}"

// shLease is the fleet's lease: shorter than the default 15 s so that
// three replicas settle in seconds (the balancer runs a round every renew
// period); the renewals cost a few scripts a second, nothing next to a
// burst.
var shLease = onetick.LeaseConfig{TTL: 6 * time.Second}

// shardStream is the stream of job's ticks: one per shard, under the
// shard's prefix (on a Cluster a job's stream must carry its view's tag).
func shardStream(job string, shards int) string {
	return otredis.ShardPrefix(shPrefix, onetick.ShardOf(job, shards), shards) + ":s"
}

type shardBurst struct {
	round            int
	topo             string
	primaries        int
	k                int
	shards, replicas int
	settle           time.Duration // start to settled (every shard led, each replica ≤ fair share)
	slot             time.Time
	ticks            int           // ticks of the slot delivered
	first, last      time.Duration // first and last delivery after the slot
	primary          []work        // per primary, over the burst
	primaryTicks     []int
	primaryShards    []int // shards whose keys are on each primary
	replicaTicks     []int
	replicaLed       []int // shards each replica led at the slot
	clientCPU        time.Duration
	err              error
}

func (b shardBurst) rate() float64 {
	if b.last <= 0 {
		return 0
	}
	return float64(b.ticks) / b.last.Seconds()
}

// maxCPU is the busiest primary's CPU time over the burst.
func (b shardBurst) maxCPU() time.Duration {
	var m time.Duration
	for _, w := range b.primary {
		m = max(m, w.cpu)
	}
	return m
}

func (b shardBurst) maxScript() int64 {
	var m int64
	for _, w := range b.primary {
		m = max(m, w.scriptUsec)
	}
	return m
}

func (b shardBurst) totalCPU() (d time.Duration) {
	for _, w := range b.primary {
		d += w.cpu
	}
	return d
}

// burstSink counts the ticks of the measured slot.
type burstSink struct {
	slot        atomic.Int64 // Unix ms of the measured slot; 0 before it is chosen
	since       time.Time
	byShard     []atomic.Int64
	byReplica   []atomic.Int64
	total       atomic.Int64
	first, last atomic.Int64 // ns since since
	lastAny     atomic.Int64 // ns since since of the last delivery of any slot
	shards      int
}

func (s *burstSink) sink(replica int) onetick.Sink {
	return onetick.SinkFunc(func(_ context.Context, ticks []onetick.TickRecord) error {
		now := int64(time.Since(s.since))
		s.lastAny.Store(now)
		want := s.slot.Load()
		n := 0
		for _, t := range ticks {
			if int64(t.Slot) != want {
				continue
			}
			n++
			s.byShard[onetick.ShardOf(t.Job, s.shards)].Add(1)
		}
		if n == 0 {
			return nil
		}
		s.byReplica[replica].Add(int64(n))
		s.total.Add(int64(n))
		s.first.CompareAndSwap(0, now)
		for {
			l := s.last.Load()
			if now <= l || s.last.CompareAndSwap(l, now) {
				break
			}
		}
		return nil
	})
}

// shardJobs returns k jobs due every period seconds at whole multiples
// of it, sharing one parsed schedule (the burst's cost is the claims',
// not the schedules').
func shardJobs(k, shards, period int) ([]onetick.Job, error) {
	sch, err := cron.Parse(fmt.Sprintf("*/%d * * * * *", period), nil)
	if err != nil {
		return nil, err
	}
	jobs := make([]onetick.Job, k)
	for i := range jobs {
		name := fmt.Sprintf("t%07d", i)
		jobs[i] = onetick.Job{Name: name, Schedule: sch, Stream: shardStream(name, shards)}
	}
	return jobs, nil
}

func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// shardBurstRun runs one burst case.
func (e *env) shardBurstRun(ctx context.Context, t *topology, k, shards, replicas, period int) (res shardBurst) {
	res = shardBurst{topo: t.name, primaries: len(t.nodes), k: k, shards: shards, replicas: replicas}
	if err := t.flush(ctx); err != nil {
		res.err = err
		return res
	}
	res.primaryShards = make([]int, len(t.nodes))
	for n := range shards {
		res.primaryShards[t.primaryOf(otredis.Slot(otredis.ShardPrefix(shPrefix, n, shards)+":leader"))]++
	}
	jobs, err := shardJobs(k, shards, period)
	if err != nil {
		res.err = err
		return res
	}
	sk := &burstSink{since: time.Now(), byShard: make([]atomic.Int64, shards), byReplica: make([]atomic.Int64, replicas), shards: shards}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	scheds := make([]*onetick.Scheduler, replicas)
	started := time.Now()
	for r := range replicas {
		s, err := onetick.New(onetick.Config{
			Backend: otredis.New(t.client, otredis.Options{Prefix: shPrefix}),
			Replica: fmt.Sprintf("r%d", r), Jobs: jobs, Lease: shLease, Shards: shards,
			Logger: slog.New(e.ot.c), Sink: sk.sink(r),
		})
		if err != nil {
			res.err = err
			return res
		}
		scheds[r] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			runEnded(runCtx, s.Run(runCtx), e.ot.c)
		}()
	}
	jobs = nil
	led := func() []int {
		out := make([]int, replicas)
		for r, s := range scheds {
			if b := s.Balancer(); b != nil {
				out[r] = len(b.Led())
			} else if s.Elector().IsLeader() {
				out[r] = 1
			}
		}
		return out
	}
	settled := func(l []int) bool {
		sum := 0
		for _, n := range l {
			sum += n
			if n > onetick.FairShare(shards, replicas) {
				return false
			}
		}
		return sum == shards
	}
	// Settled: every shard led, nobody above its fair share, the same
	// for two renew periods.
	var stableSince time.Time
	var last []int
	for {
		l := led()
		switch {
		case !settled(l):
			stableSince = time.Time{}
		case stableSince.IsZero() || fmt.Sprint(l) != fmt.Sprint(last):
			stableSince = time.Now()
		}
		last = l
		if !stableSince.IsZero() && time.Since(stableSince) >= 2*shLease.WithDefaults().Renew {
			break
		}
		if time.Since(started) > 2*time.Minute {
			res.err = fmt.Errorf("the shards' leaders did not settle within 2 minutes: shards led by each replica %v", l)
			return res
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.settle = time.Since(started)
	res.replicaLed = last
	// The next slot at least 2 s away, with no tick delivered in the
	// second before it (an earlier burst is over).
	p := time.Duration(period) * time.Second
	slot := time.Now().Add(2 * time.Second).Truncate(p).Add(p)
	for {
		sleepUntil(slot.Add(-500 * time.Millisecond))
		if time.Since(sk.since)-time.Duration(sk.lastAny.Load()) > time.Second {
			break
		}
		slot = slot.Add(p)
		if time.Since(started) > 3*time.Minute {
			res.err = fmt.Errorf("ticks never stopped for a second before a slot: the bursts overlap (period %s)", p)
			return res
		}
	}
	res.slot = slot
	sk.slot.Store(slot.UnixMilli())
	before, err := t.snapshot(ctx)
	if err != nil {
		res.err = err
		return res
	}
	cpu0 := cpuSelf()
	deadline := slot.Add(90 * time.Second)
	for sk.total.Load() < int64(k) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	after, err := t.snapshot(ctx)
	res.clientCPU = cpuSelf() - cpu0
	if err != nil {
		res.err = err
		return res
	}
	res.ticks = int(sk.total.Load())
	if res.ticks < k {
		res.err = fmt.Errorf("%d of %d ticks of the slot delivered within 90 s", res.ticks, k)
	}
	at := func(ns int64) time.Duration { return sk.since.Add(time.Duration(ns)).Sub(slot) }
	res.first, res.last = at(sk.first.Load()), at(sk.last.Load())
	res.primary = make([]work, len(t.nodes))
	for i := range t.nodes {
		res.primary[i] = diffStats(before[i], after[i])
	}
	res.primaryTicks = make([]int, len(t.nodes))
	for n := range shards {
		res.primaryTicks[t.primaryOf(otredis.Slot(otredis.ShardPrefix(shPrefix, n, shards)+":leader"))] += int(sk.byShard[n].Load())
	}
	res.replicaTicks = make([]int, replicas)
	for r := range replicas {
		res.replicaTicks[r] = int(sk.byReplica[r].Load())
	}
	if l := led(); fmt.Sprint(l) != fmt.Sprint(res.replicaLed) && res.err == nil {
		res.err = fmt.Errorf("the shards' leaders moved during the burst: %v before, %v after", res.replicaLed, l)
	}
	return res
}
