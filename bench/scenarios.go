package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/onetick/onetick"
)

// instance is one running scheduler instance of any system.
type instance interface {
	stop() // graceful
	gate() *gate
}

// system is one contender in the side-by-side scenarios.
type system struct {
	key, title string
	// start starts instance id with n jobs firing every second; ttl is the
	// lease or lock TTL (0: the system's default). rt, if set, counts the
	// instance's Redis round trips.
	start func(id, n int, ttl time.Duration, r *recorder, rt *atomic.Int64) (instance, error)
	// victim picks the instance to stall in the pause scenario.
	victim func(ctx context.Context, insts []instance) int
	// storeCount counts the enqueued entries in Redis (cross-check); nil:
	// not checked.
	storeCount func(ctx context.Context, n int) (int64, error)
	// consumer, if set, is the queue side whose workers the duplicate
	// scenarios count, instead of what the instances record.
	consumer consumer
}

// A consumer is the queue side of a contender in the duplicate scenarios
// (the relays part, issue 21): the other system's own workers, run for one
// scenario beside the instances and outside its faults, recording every
// task or job they work. scope is the scenario's PostgreSQL schema ("" on
// Redis); enq is the scenario's recorder of what the instances enqueued.
type consumer func(ctx context.Context, scope string, enq *recorder) (*consuming, error)

// consuming is a running consumer.
type consuming struct {
	r *recorder // what the workers worked: slot = the task's or job's
	// drain waits until the queue holds nothing left to work, then stops
	// the workers; stop stops them now.
	drain func() error
	stop  func()
}

// startConsumer starts c for one scenario; nil when c is nil.
func startConsumer(ctx context.Context, c consumer, scope string, enq *recorder) (*consuming, error) {
	if c == nil {
		return nil, nil
	}
	return c(ctx, scope, enq)
}

// close stops a consumer on an error path (nil: nothing to stop).
func (c *consuming) close() {
	if c != nil {
		c.stop()
	}
}

// collect returns what a scenario counts: with a consumer, what its
// workers worked once it has drained; without, own().
func (c *consuming) collect(own func() ([]rec, error)) ([]rec, error) {
	if c == nil {
		return own()
	}
	if err := c.drain(); err != nil {
		return nil, err
	}
	recs := c.r.snapshot()
	if len(recs) == 0 {
		return nil, fmt.Errorf("the consumer worked nothing")
	}
	return recs, nil
}

type env struct {
	srv *redisServer
	adm admin
	ot  otLogs
}

type otLogs struct{ c *logCounter }

func (e *env) systems() []system {
	return []system{
		{
			key: "onetick", title: "onetick",
			start: func(id, n int, ttl time.Duration, r *recorder, rt *atomic.Int64) (instance, error) {
				return startOnetick(e.srv, id, otOptions{jobs: everyJobs(n, "1s"),
					lease: onetick.LeaseConfig{TTL: ttl}, rt: rt, logs: e.ot.c}, r)
			},
			victim: func(_ context.Context, insts []instance) int {
				for i, in := range insts {
					if in.(*otInst).s.Elector().IsLeader() {
						return i
					}
				}
				return 0
			},
			storeCount: func(ctx context.Context, n int) (int64, error) {
				recs, err := otStoreRecs(ctx, e.adm.c, n)
				return int64(len(recs)), err
			},
		},
		{
			key: "asynq", title: "asynq v0.26.0 Scheduler",
			start: func(id, n int, ttl time.Duration, r *recorder, rt *atomic.Int64) (instance, error) {
				return startAsynq(e.srv, id, n, "@every 1s", r, rt)
			},
			victim: func(context.Context, []instance) int { return 0 },
			storeCount: func(ctx context.Context, n int) (int64, error) {
				return asynqStoreCount(ctx, e.adm.c)
			},
		},
		{
			key: "locker", title: "gocron v2.21.2 + Redis Locker",
			start: func(id, n int, ttl time.Duration, r *recorder, rt *atomic.Int64) (instance, error) {
				if ttl == 0 {
					ttl = 8 * time.Second // redsync's default expiry
				}
				return startGocron(e.srv, id, n, "* * * * * *", false, ttl, r, rt)
			},
			victim: func(context.Context, []instance) int { return 0 },
			storeCount: func(ctx context.Context, n int) (int64, error) {
				return gocronStoreCount(ctx, e.adm.c, n)
			},
		},
		{
			key: "elector", title: "gocron v2.21.2 + Redis Elector",
			start: func(id, n int, ttl time.Duration, r *recorder, rt *atomic.Int64) (instance, error) {
				if ttl == 0 {
					ttl = 15 * time.Second // as onetick's default lease
				}
				return startGocron(e.srv, id, n, "* * * * * *", true, ttl, r, rt)
			},
			victim: func(ctx context.Context, insts []instance) int {
				v, _ := e.adm.c.Get(ctx, gocronLeaderKey).Result()
				for i, in := range insts {
					if in.(*gocronInst).el.id == v {
						return i
					}
				}
				return 0
			},
			storeCount: func(ctx context.Context, n int) (int64, error) {
				return gocronStoreCount(ctx, e.adm.c, n)
			},
		},
	}
}

// dupResult is the outcome of a rolling-deploy or pause scenario.
type dupResult struct {
	st          slotStats
	store       int64 // entries found in Redis for the window's whole run
	total       int   // recs over the whole run
	fenced      int64 // onetick: stalled claims the store refused
	fencedTicks int64
	held        int64 // onetick: claims held back by the stall
	storeDups   int   // onetick: duplicates counted from the streams
	err         error
}

const (
	dupInstances = 3
	dupJobs      = 10
	dupTTL       = 2 * time.Second
)

// scenarioRolling: dupInstances instances of dupJobs one-second jobs;
// replace each in turn (start the new one, stop the old one about a second
// later, wait a second) and count (job, slot) enqueued twice.
func (e *env) scenarioRolling(ctx context.Context, sys system) dupResult {
	if err := e.adm.flush(ctx); err != nil {
		return dupResult{err: err}
	}
	r := newRecorder(1 << 12)
	cons, err := startConsumer(ctx, sys.consumer, "", r)
	if err != nil {
		return dupResult{err: err}
	}
	insts, err := startFleet(sys, r)
	if err != nil {
		cons.close()
		return dupResult{err: err}
	}
	stopAll := func() { stopInstances(insts) }
	from := nextSecond(time.Now().Add(1500*time.Millisecond), 0)
	sleepUntil(from.Add(300 * time.Millisecond))
	for k := range dupInstances {
		in, err := sys.start(dupInstances+k, dupJobs, dupTTL, r, nil)
		if err != nil {
			stopAll()
			cons.close()
			return dupResult{err: err}
		}
		insts = append(insts, in)
		time.Sleep(time.Second)
		insts[k].stop()
		insts[k] = nil
		time.Sleep(time.Second)
	}
	to := time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)
	time.Sleep(1500 * time.Millisecond) // late slots and catch-up land
	stopAll()
	return e.finish(ctx, sys, r, cons, ms(from), ms(to), dupTTL, nil)
}

// scenarioPause: dupInstances instances; the one that leads (or instance 0
// where nobody leads) stalls for twice the TTL: every Redis call and
// enqueue it makes blocks meanwhile. Stalled onetick claims are sent after
// the stall as if they had left the process just before it. With stall
// false, the steady state: the same fleet and window, nobody stalled.
func (e *env) scenarioPause(ctx context.Context, sys system, stall bool) dupResult {
	if err := e.adm.flush(ctx); err != nil {
		return dupResult{err: err}
	}
	r := newRecorder(1 << 12)
	cons, err := startConsumer(ctx, sys.consumer, "", r)
	if err != nil {
		return dupResult{err: err}
	}
	insts, err := startFleet(sys, r)
	if err != nil {
		cons.close()
		return dupResult{err: err}
	}
	stopAll := func() { stopInstances(insts) }
	from := nextSecond(time.Now().Add(1500*time.Millisecond), 0)
	sleepUntil(from.Add(300 * time.Millisecond))
	v := sys.victim(ctx, insts)
	if stall {
		insts[v].gate().pause(2 * dupTTL)
	}
	time.Sleep(2*dupTTL + 3*time.Second)
	to := time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)
	time.Sleep(1500 * time.Millisecond)
	stopAll()
	var ot *otInst
	if o, ok := insts[v].(*otInst); ok {
		ot = o
	}
	return e.finish(ctx, sys, r, cons, ms(from), ms(to), dupTTL, ot)
}

// finish counts the scenario: what cons's workers worked, or without a
// consumer what the instances recorded in r.
func (e *env) finish(ctx context.Context, sys system, r *recorder, cons *consuming, from, to int64, ttl time.Duration, victim *otInst) dupResult {
	recs, err := cons.collect(func() ([]rec, error) { return r.snapshot(), nil })
	if err != nil {
		return dupResult{err: err}
	}
	res := dupResult{st: analyse(recs, dupJobs, 1000, from, to, ttl), total: len(recs)}
	if sys.storeCount != nil {
		res.store, res.err = sys.storeCount(ctx, dupJobs)
	}
	if sys.key == "onetick" && res.err == nil {
		// The streams are the ground truth for onetick: count there too.
		srecs, err := otStoreRecs(ctx, e.adm.c, dupJobs)
		if err != nil {
			res.err = err
		} else {
			res.storeDups = analyse(srecs, dupJobs, 1000, from, to, ttl).dups
		}
	}
	if victim != nil {
		res.fenced = victim.be.fencedClaims.Load()
		res.fencedTicks = victim.be.fencedTicks.Load()
		res.held = victim.be.heldClaims.Load()
	}
	return res
}

// delayResult is the outcome of a tick-delay scenario.
type delayResult struct {
	ds          []time.Duration
	ticks       int     // enqueues in the command-counting window
	cmdsPerTick float64 // Redis commands (INFO commandstats) per tick
	rtPerTick   float64 // client round trips per tick
	store       int64
	total       int
	err         error
}

// scenarioDelay: one instance, n one-second jobs, default TTL; delay is
// enqueue instant minus slot over 4 slots (10 for n < 10) after 2 s of
// warm-up; commands and round trips are counted over the same window, which
// starts and ends half way between slots.
func (e *env) scenarioDelay(ctx context.Context, sys system, n int) delayResult {
	if err := e.adm.flush(ctx); err != nil {
		return delayResult{err: err}
	}
	r := newRecorder(8 * n)
	var rt atomic.Int64
	in, err := sys.start(0, n, 0, r, &rt)
	if err != nil {
		return delayResult{err: err}
	}
	tA := nextSecond(time.Now().Add(1500*time.Millisecond), 500*time.Millisecond)
	sleepUntil(tA)
	cA, err1 := e.adm.commandCalls(ctx)
	rtA := rt.Load()
	win := 4 * time.Second
	if n < 10 {
		win = 10 * time.Second // few ticks per slot: more slots
	}
	tB := tA.Add(win)
	sleepUntil(tB)
	cB, err2 := e.adm.commandCalls(ctx)
	rtB := rt.Load()
	in.stop()
	if err1 != nil || err2 != nil {
		return delayResult{err: fmt.Errorf("INFO commandstats: %v %v", err1, err2)}
	}
	recs := r.snapshot()
	res := delayResult{ds: delays(recs, ms(tA), ms(tB)), total: len(recs)}
	for _, x := range recs {
		if x.at >= tA.UnixNano() && x.at < tB.UnixNano() {
			res.ticks++
		}
	}
	if res.ticks > 0 {
		res.cmdsPerTick = float64(cB-cA) / float64(res.ticks)
		res.rtPerTick = float64(rtB-rtA) / float64(res.ticks)
	}
	res.store, res.err = sys.storeCount(ctx, n)
	return res
}

// startFleet starts dupInstances instances of sys recording into r; on an
// error it stops those it started.
func startFleet(sys system, r *recorder) ([]instance, error) {
	var insts []instance
	for i := range dupInstances {
		in, err := sys.start(i, dupJobs, dupTTL, r, nil)
		if err != nil {
			stopInstances(insts)
			return nil, err
		}
		insts = append(insts, in)
	}
	return insts, nil
}

// stopInstances stops every instance that is still running (nil: stopped).
func stopInstances(insts []instance) {
	for _, in := range insts {
		if in != nil {
			in.stop()
		}
	}
}
