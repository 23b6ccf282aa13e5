package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	otredis "github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/worker"
)

// wThrResult is one worker-throughput run: n tasks in Redis beforehand,
// one consumer process with a no-op handler and concurrency conc, timed
// from starting it until the last task's completion is recorded in Redis.
type wThrResult struct {
	sys        string
	n, conc    int
	done       int           // completions recorded by the end of the run
	fill       time.Duration // putting the n tasks in Redis beforehand
	span       time.Duration // start → the n-th completion recorded
	thr        float64       // done / span
	cmdsPer    float64       // Redis commands (INFO commandstats) per task
	rtPer      float64       // client round trips per task
	redisCPU   time.Duration // redis-server CPU over the span
	procCPU    time.Duration // this process's CPU over the span
	ops        map[string]opStat
	handlerEnd time.Duration // start → the n-th handler call (onetick)
	commands   string        // the commands Redis spent most time on, per task
	err        error
}

// thrLimit bounds one throughput run; a run that does not finish reports
// what it did by then.
const thrLimit = 90 * time.Second

const thrJob = "w"

// profile starts a CPU profile into prefix-name.pprof when prefix is set;
// the returned function stops it.
func profile(prefix, name string) func() {
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "-" + name + ".pprof")
	if err != nil {
		progress("cpuprofile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		progress("cpuprofile: %v", err)
		_ = f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

// fillOnetick claims n ticks of one job, slots one millisecond apart an
// hour ago, in batches of 2000 as the scheduler claims them.
func (e *env) fillOnetick(ctx context.Context, n int) error {
	be := otredis.New(e.adm.c, otredis.Options{Prefix: otPrefix})
	g, err := be.Acquire(ctx, "filler", time.Hour)
	if err != nil {
		return err
	}
	defer func() { _ = be.Release(ctx, g.Lease) }()
	base := onetick.SlotOf(time.Now().Add(-time.Hour)) - onetick.Slot(n)
	for lo := 0; lo < n; lo += 2000 {
		ticks := make([]onetick.Tick, 0, 2000)
		for i := lo; i < min(lo+2000, n); i++ {
			ticks = append(ticks, onetick.Tick{Job: thrJob, Slot: base + onetick.Slot(i),
				Stream: "onetick:stream:" + thrJob, Payload: "{}", Retention: time.Hour})
		}
		res, err := be.Claim(ctx, g.Lease, ticks)
		if err != nil {
			return err
		}
		for i, o := range res.Outcomes {
			if o != onetick.Claimed {
				return fmt.Errorf("filler: tick %s: outcome %v", ticks[i].ID(), o)
			}
		}
	}
	return nil
}

// onetickThroughput: n ticks of one job claimed beforehand; one worker
// (overlap allow: every tick of the job may run at once, as asynq's tasks
// of one type do) runs them with a no-op handler.
func (e *env) onetickThroughput(ctx context.Context, n, conc int, cpuprofile string) wThrResult {
	res := wThrResult{sys: "onetick", n: n, conc: conc}
	if err := e.adm.flush(ctx); err != nil {
		return wThrResult{err: err}
	}
	t0 := time.Now()
	if err := e.fillOnetick(ctx, n); err != nil {
		return wThrResult{err: fmt.Errorf("filling the stream: %w", err)}
	}
	res.fill = time.Since(t0)
	var rt atomic.Int64
	var cs *countingStore
	var handled atomic.Int64
	var handlerEnd atomic.Int64
	u0, err := e.readUsage(ctx, &rt)
	if err != nil {
		return wThrResult{err: err}
	}
	stopProf := profile(cpuprofile, fmt.Sprintf("onetick-c%d", conc))
	wk, err := e.startWorker(wOptions{jobs: []string{thrJob}, conc: conc, overlap: worker.OverlapAllow, rt: &rt,
		wrap: func(s worker.Store) worker.Store { cs = newCountingStore(s, n); return cs },
		handle: func(*worker.Task) {
			if handled.Add(1) == int64(n) {
				handlerEnd.Store(time.Now().UnixNano())
			}
		}})
	if err != nil {
		stopProf()
		return wThrResult{err: err}
	}
	select {
	case <-cs.all:
	case <-time.After(thrLimit):
	}
	u1, err := e.readUsage(ctx, &rt)
	stopProf()
	ops := cs.snapshot()
	if serr := wk.stop(); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return wThrResult{err: err}
	}
	res.done = int(cs.done.Load())
	end := u1.at
	if at := cs.at.Load(); at != 0 {
		end = time.Unix(0, at)
	}
	if at := handlerEnd.Load(); at != 0 {
		res.handlerEnd = time.Unix(0, at).Sub(u0.at)
	}
	res.ops = ops
	res.finishFrom(u0, u1, end)
	return res
}

// asynqThroughput: n tasks enqueued beforehand on the default queue (by
// asynq's Client, 16 goroutines); one asynq Server with concurrency conc
// and a no-op handler processes them. Completion is asynq's processed
// counter, which its Done script increments as it deletes the task; the
// harness polls it every 2 ms (its GETs are not counted as asynq's).
func (e *env) asynqThroughput(ctx context.Context, n, conc int, cpuprofile string) wThrResult {
	res := wThrResult{sys: "asynq", n: n, conc: conc}
	if err := e.adm.flush(ctx); err != nil {
		return wThrResult{err: err}
	}
	t0 := time.Now()
	if err := e.fillAsynq(ctx, n); err != nil {
		return wThrResult{err: fmt.Errorf("enqueuing: %w", err)}
	}
	res.fill = time.Since(t0)
	var rt atomic.Int64
	c := e.srv.newClient(&rt)
	defer c.Close()
	srv := asynq.NewServerFromRedisClient(c, asynq.Config{Concurrency: conc, LogLevel: asynq.FatalLevel})
	u0, err := e.readUsage(ctx, &rt)
	if err != nil {
		return wThrResult{err: err}
	}
	stopProf := profile(cpuprofile, fmt.Sprintf("asynq-c%d", conc))
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		stopProf()
		return wThrResult{err: err}
	}
	key := "asynq:{default}:processed"
	var polls int64
	deadline := time.Now().Add(thrLimit)
	var end time.Time
	for time.Now().Before(deadline) {
		v, err := e.adm.c.Get(ctx, key).Int64()
		polls++
		if err != nil && !errors.Is(err, goredis.Nil) {
			stopProf()
			srv.Shutdown()
			return wThrResult{err: err}
		}
		res.done = int(v)
		if v >= int64(n) {
			end = time.Now()
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	u1, err := e.readUsage(ctx, &rt)
	stopProf()
	srv.Shutdown()
	if err != nil {
		return wThrResult{err: err}
	}
	if end.IsZero() {
		end = u1.at
	}
	// The harness's polls are not asynq's (their few microseconds stay in
	// GET's time).
	u1.cmds -= polls
	if g, ok := u1.stats["get"]; ok {
		g.calls -= polls
		u1.stats["get"] = g
	}
	res.finishFrom(u0, u1, end)
	return res
}

// fillAsynq enqueues n no-op tasks with asynq's Client from 16 goroutines.
func (e *env) fillAsynq(ctx context.Context, n int) error {
	const par = 16
	c := e.srv.newClient(nil)
	defer c.Close()
	cl := asynq.NewClientFromRedisClient(c)
	var wg sync.WaitGroup
	errs := make([]error, par)
	for p := range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += par {
				if _, err := cl.EnqueueContext(ctx, asynq.NewTask("noop", []byte("{}"))); err != nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// finishFrom fills the rates from the usage before and after a run that
// ended (its last completion recorded) at end.
func (r *wThrResult) finishFrom(u0, u1 usage, end time.Time) {
	r.span = end.Sub(u0.at)
	if r.span > 0 {
		r.thr = float64(r.done) / r.span.Seconds()
	}
	if r.done > 0 {
		d := float64(r.done)
		r.cmdsPer = float64(u1.cmds-u0.cmds) / d
		r.rtPer = float64(u1.rt-u0.rt) / d
	}
	r.commands = fmtCommands(u0.stats, u1.stats, max(r.done, 1), 6)
	r.redisCPU = u1.redisCPU - u0.redisCPU
	r.procCPU = u1.procCPU - u0.procCPU
}
