package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/onetick/onetick/worker"
)

// wDelayResult is the outcome of an end-to-end delay run: onetick's
// Scheduler and one worker.Worker, n jobs due each second.
type wDelayResult struct {
	jobs, conc  int
	window      time.Duration
	ds          []time.Duration   // handler start − slot, sorted
	enq         []time.Duration   // enqueue (the claim returned) − slot, sorted
	expected    int               // job-slots due in the window
	st          slotStats         // handler runs against the job-slots due
	cmdsPerTick float64           // Redis commands (scheduler + worker) per tick run
	rtPerTick   float64           // the worker client's round trips per tick run
	ops         map[string]opStat // the worker's store calls over the window
	commands    string            // the commands Redis spent most time on, per tick
	err         error
}

// workerDelay runs a scheduler with n "@every 1s" jobs and one worker
// (concurrency conc, default overlap policy) that handles them all; the
// handler records when it started. After warm-up, slots in a window of
// win are measured; the window starts and ends half way between slots,
// and Redis commands are counted over it.
func (e *env) workerDelay(ctx context.Context, n, conc int, warm, win time.Duration) wDelayResult {
	res := wDelayResult{jobs: n, conc: conc, window: win}
	if err := e.adm.flush(ctx); err != nil {
		return wDelayResult{err: err}
	}
	slots := int((warm+win)/time.Second) + 4
	enq := newRecorder(n * slots)
	runs := newRecorder(n * slots)
	names := make([]string, n)
	for i := range names {
		names[i] = jobName(i)
	}
	var rt atomic.Int64
	var cs *countingStore
	wk, err := e.startWorker(wOptions{jobs: names, conc: conc, rt: &rt,
		wrap: func(s worker.Store) worker.Store { cs = newCountingStore(s, 0); return cs },
		handle: func(t *worker.Task) {
			// First thing in the handler: the end-to-end delay ends here.
			at := time.Now().UnixNano()
			runs.add(rec{job: jobIndex(t.Job), slot: int64(t.Slot), at: at})
		}})
	if err != nil {
		return wDelayResult{err: err}
	}
	sch, err := startOnetick(e.srv, 0, otOptions{jobs: everyJobs(n, "1s"), logs: e.ot.c}, enq)
	if err != nil {
		_ = wk.stop()
		return wDelayResult{err: err}
	}
	tA := nextSecond(time.Now().Add(warm), 500*time.Millisecond)
	sleepUntil(tA)
	uA, errA := e.readUsage(ctx, &rt)
	opsA := cs.snapshot()
	tB := tA.Add(win)
	sleepUntil(tB)
	uB, errB := e.readUsage(ctx, &rt)
	res.ops = opsSince(opsA, cs.snapshot())
	// The window's last slot is half a second old: let its runs land.
	time.Sleep(time.Second)
	sch.stop()
	if err := wk.stop(); err != nil {
		return wDelayResult{err: fmt.Errorf("worker.Run: %w", err)}
	}
	if errA != nil || errB != nil {
		return wDelayResult{err: fmt.Errorf("reading Redis usage: %v %v", errA, errB)}
	}
	from, to := ms(tA), ms(tB)
	rs := runs.snapshot()
	res.ds = delays(rs, from, to)
	res.enq = delays(enq.snapshot(), from, to)
	res.st = analyse(rs, n, 1000, from, to, time.Hour)
	res.expected = res.st.expected
	var inWin int
	for _, x := range rs {
		if x.at >= tA.UnixNano() && x.at < tB.UnixNano() {
			inWin++
		}
	}
	if inWin > 0 {
		res.cmdsPerTick = float64(uB.cmds-uA.cmds) / float64(inWin)
		res.rtPerTick = float64(uB.rt-uA.rt) / float64(inWin)
		res.commands = fmtCommands(uA.stats, uB.stats, inWin, 8)
	}
	return res
}
