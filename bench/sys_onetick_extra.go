package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"github.com/onetick/onetick"
	otredis "github.com/onetick/onetick/redis"
)

// bigResult is the outcome of the 100,000-job onetick scenario.
type bigResult struct {
	jobs        int
	run         time.Duration
	firstSlot   int64
	firstCount  int
	firstSpan   time.Duration // slot to the last claim of the first slot
	firstFirst  time.Duration // slot to the first claim of the first slot
	thr         float64       // firstCount / firstSpan
	slots       []slotSpan    // every slot after the first
	ds          []time.Duration
	cmdsPerTick float64
	rtPerTick   float64
	ticks       int
	redisPerJob float64 // used_memory delta / jobs
	statePerJob float64 // MEMORY USAGE of <prefix>:last and the tick-record buckets / jobs
	heapPerJob  float64 // Go heap delta / jobs
	heapBytes   int64
	cfgPerJob   float64       // Go heap of the []onetick.Job with parsed schedules / jobs
	newPerJob   float64       // Go heap retained by onetick.New (job state, metric series) / jobs
	setup       time.Duration // building the jobs and onetick.New
	streamBytes int64         // MEMORY USAGE of one job's stream
	streamLen   int64         // its entries
	err         error
}

type slotSpan struct {
	slot  int64
	count int
	span  time.Duration // slot to the last claim of that slot
}

// scenarioBig: one onetick replica (default lease) with n "@every 1s" jobs,
// all due in the same slot every second, for about run. Throughput is
// measured on the first slot (all n due at once, from the slot to the last
// claim); delay over the later slots; Redis memory and Go heap per job at
// the end while the scheduler still runs.
func (e *env) scenarioBig(ctx context.Context, n int, run time.Duration) bigResult {
	res := bigResult{jobs: n, run: run}
	if err := e.adm.flush(ctx); err != nil {
		return bigResult{err: err}
	}
	r := newRecorder(n * (int(run/time.Second) + 4))
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m0)
	mem0, err := e.adm.usedMemory(ctx)
	if err != nil {
		return bigResult{err: err}
	}
	c0, err := e.adm.commandCalls(ctx)
	if err != nil {
		return bigResult{err: err}
	}
	var rt atomic.Int64
	t0 := time.Now()
	jobs := everyJobs(n, "1s")
	res.setup = time.Since(t0)
	// Heap of the configuration alone, then of a scheduler built (not run)
	// on it.
	var mc, mn runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&mc)
	probe, err := onetick.New(onetick.Config{Backend: otredis.New(e.adm.c, otredis.Options{Prefix: "probe"}),
		Jobs: jobs, Logger: slog.New(e.ot.c)})
	if err != nil {
		return bigResult{err: err}
	}
	runtime.GC()
	runtime.ReadMemStats(&mn)
	runtime.KeepAlive(probe)
	res.cfgPerJob = float64(int64(mc.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
	res.newPerJob = float64(int64(mn.HeapAlloc)-int64(mc.HeapAlloc)) / float64(n)
	runtime.GC()
	t0 = time.Now()
	in, err := startOnetick(e.srv, 0, otOptions{jobs: jobs, rt: &rt, logs: e.ot.c}, r)
	if err != nil {
		return bigResult{err: err}
	}
	res.setup += time.Since(t0)
	jobs = nil
	time.Sleep(run)
	c1, err := e.adm.commandCalls(ctx)
	rt1 := rt.Load()
	tC1 := time.Now().UnixNano()
	if err != nil {
		in.stop()
		return bigResult{err: err}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	mem1, err := e.adm.usedMemory(ctx)
	if err == nil {
		res.statePerJob, err = e.stateBytes(ctx)
	}
	if err == nil {
		key := "onetick:stream:" + jobName(0)
		res.streamBytes, _ = e.adm.c.MemoryUsage(ctx, key, 0).Result()
		res.streamLen, _ = e.adm.c.XLen(ctx, key).Result()
	}
	runtime.KeepAlive(in)
	in.stop()
	if err != nil {
		return bigResult{err: err}
	}
	end := time.Now()
	recs := r.snapshot()
	res.ticks = len(recs)
	if len(recs) == 0 {
		return bigResult{err: errors.New("no tick was claimed")}
	}
	// Commands and round trips until c1 was read, per tick enqueued by then.
	var upto int
	for _, x := range recs {
		if x.at <= tC1 {
			upto++
		}
	}
	if upto > 0 {
		res.cmdsPerTick = float64(c1-c0) / float64(upto)
		res.rtPerTick = float64(rt1) / float64(upto)
	}
	res.redisPerJob = float64(mem1-mem0) / float64(n)
	res.statePerJob /= float64(n)
	res.heapBytes = int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	res.heapPerJob = float64(res.heapBytes) / float64(n)

	by := map[int64]*slotSpan{}
	first := map[int64]int64{}
	for _, x := range recs {
		s := by[x.slot]
		if s == nil {
			s = &slotSpan{slot: x.slot}
			by[x.slot] = s
			first[x.slot] = x.at
		}
		s.count++
		s.span = max(s.span, time.Duration(x.at-x.slot*int64(time.Millisecond)))
		first[x.slot] = min(first[x.slot], x.at)
	}
	var slots []int64
	for s := range by {
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, k int) bool { return slots[i] < slots[k] })
	res.firstSlot = slots[0]
	f := by[slots[0]]
	res.firstCount, res.firstSpan = f.count, f.span
	res.firstFirst = time.Duration(first[slots[0]] - slots[0]*int64(time.Millisecond))
	if f.span > 0 {
		res.thr = float64(f.count) / f.span.Seconds()
	}
	for _, s := range slots[1:] {
		res.slots = append(res.slots, *by[s])
	}
	res.ds = delays(recs, slots[0], ms(end))
	return res
}

// stateBytes sums MEMORY USAGE of onetick's own keys (the last-fired hash
// and the per-tick record buckets), without the streams.
func (e *env) stateBytes(ctx context.Context) (float64, error) {
	keys := []string{otPrefix + ":last"}
	iter := e.adm.c.Scan(ctx, 0, otPrefix+":ticks:*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, err
	}
	var t float64
	for _, k := range keys {
		n, err := e.adm.c.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			return 0, fmt.Errorf("MEMORY USAGE %s: %w", k, err)
		}
		t += float64(n)
	}
	return t, nil
}

// leaseRounds measures, over rounds rounds with the given TTL, the time
// from stopping the leader to a standby leading: graceful (the leader
// releases) or after a simulated crash (its Release does nothing, so the
// lease must expire). Each round starts a fresh standby.
func (e *env) leaseRounds(ctx context.Context, rounds int, ttl time.Duration, crash bool) ([]time.Duration, error) {
	if err := e.adm.flush(ctx); err != nil {
		return nil, err
	}
	lease := onetick.LeaseConfig{TTL: ttl}
	jobs := everyJobs(1, "1s")
	start := func(id int) (*otInst, error) {
		return startOnetick(e.srv, id, otOptions{jobs: jobs, lease: lease, logs: e.ot.c}, nil)
	}
	waitLead := func(in *otInst, limit time.Duration) error {
		deadline := time.Now().Add(limit)
		for in.leadAt.Load() == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("replica r%d did not lead within %s", in.id, limit)
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	a, err := start(0)
	if err != nil {
		return nil, err
	}
	if err := waitLead(a, 5*ttl); err != nil {
		a.stop()
		return nil, err
	}
	var out []time.Duration
	for i := 1; i <= rounds; i++ {
		b, err := start(i)
		if err != nil {
			a.stop()
			return out, err
		}
		// Let the standby make its first acquire attempt and subscribe.
		time.Sleep(150 * time.Millisecond)
		// Stop at a random phase of the renewal cycle.
		time.Sleep(time.Duration(i*37%100) * ttl / 300)
		if crash {
			a.be.noRelease.Store(true)
		}
		t0 := time.Now()
		a.stop()
		if err := waitLead(b, 3*ttl); err != nil {
			b.stop()
			return out, err
		}
		out = append(out, time.Duration(b.leadAt.Load()-t0.UnixNano()))
		a = b
	}
	a.stop()
	return out, nil
}
