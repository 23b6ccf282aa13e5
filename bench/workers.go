package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Workers section: onetick's worker package measured on the same
// redis-server, end to end behind the scheduler, and for throughput side
// by side with an asynq Server.

// delayRuns are the end-to-end delay runs: jobs due each second and the
// worker's concurrency (10 is the package default; at 1,000 jobs a
// raised one shows how much of the delay the default's small batches
// cost).
var delayRuns = []struct{ jobs, conc int }{{1, 10}, {1000, 10}, {1000, 128}}

// workersSection runs the worker scenarios and returns their markdown.
func (e *env) workersSection(ctx context.Context, cpuprofile string) string {
	warm, win := 3*time.Second, 30*time.Second
	thrN := 100_000
	if quick {
		win, thrN = 8*time.Second, 20_000
	}
	progress("workers: timer and round-trip floor")
	floor := measureFloor(ctx, e.adm)

	var delays []wDelayResult
	for _, r := range delayRuns {
		progress("workers: end-to-end delay, %d job(s) due each second, concurrency %d, %s", r.jobs, r.conc, win)
		delays = append(delays, e.workerDelay(ctx, r.jobs, r.conc, warm, win))
	}

	t := &table{cols: []string{"onetick", "asynq"}, title: map[string]string{
		"onetick": "onetick worker", "asynq": "asynq v0.26.0 Server"}}
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	for _, conc := range []int{32, 128} {
		rThr := t.add(fmt.Sprintf("Throughput, concurrency %d (ticks/s)", conc),
			fmt.Sprintf("%d tasks in Redis beforehand; one process, no-op handler; start → the %d-th completion recorded in Redis (onetick: done record written and entry acknowledged; asynq: Done script)", thrN, thrN))
		rCmd := t.add(fmt.Sprintf("Redis commands per tick, concurrency %d", conc),
			"INFO commandstats delta over the run (commands inside Lua scripts included) / ticks completed")
		rRT := t.add(fmt.Sprintf("Client round trips per tick, concurrency %d", conc),
			"go-redis hook on the process's client: commands outside a pipeline + pipelines, / ticks")
		rRedis := t.add(fmt.Sprintf("redis-server CPU per tick, concurrency %d", conc),
			"INFO cpu (user + sys) delta / ticks; in brackets redis-server's CPU over the run / the run's wall time (1.00 = one core busy)")
		rProc := t.add(fmt.Sprintf("Process CPU per tick, concurrency %d", conc),
			"getrusage of the bench process (the consumer; nothing else runs) / ticks; in brackets / wall time (the machine has 2 cores)")
		for _, sys := range []string{"onetick", "asynq"} {
			progress("workers: throughput, %d tasks, concurrency %d: %s", thrN, conc, sys)
			var r wThrResult
			if sys == "onetick" {
				r = e.onetickThroughput(ctx, thrN, conc, cpuprofile)
			} else {
				r = e.asynqThroughput(ctx, thrN, conc, cpuprofile)
			}
			if r.err != nil {
				rThr.text(sys, "error: %v", r.err)
				continue
			}
			txt := fmt.Sprintf("%.0f (%d in %s)", r.thr, r.done, fmtDur(r.span))
			if r.done < r.n {
				txt = fmt.Sprintf("%.0f (only %d of %d in %s)", r.thr, r.done, r.n, fmtDur(r.span))
			}
			rThr.set(sys, cell{text: txt, vals: []float64{r.thr}})
			rCmd.set(sys, cell{text: fmt.Sprintf("%.2f", r.cmdsPer), vals: []float64{r.cmdsPer}})
			rRT.set(sys, cell{text: fmt.Sprintf("%.3f", r.rtPer), vals: []float64{r.rtPer}})
			perTick := func(d time.Duration) float64 { return float64(d) / float64(max(r.done, 1)) }
			rRedis.set(sys, cell{text: fmt.Sprintf("%s (%.2f)", fmtDur(time.Duration(perTick(r.redisCPU))), r.redisCPU.Seconds()/r.span.Seconds()),
				vals: []float64{perTick(r.redisCPU)}})
			rProc.set(sys, cell{text: fmt.Sprintf("%s (%.2f)", fmtDur(time.Duration(perTick(r.procCPU))), r.procCPU.Seconds()/r.span.Seconds()),
				vals: []float64{perTick(r.procCPU)}})
			if sys == "onetick" {
				note("onetick, concurrency %d: claiming the %d ticks took %s; the last handler call came %s after the start; store calls (wall time summed per operation, as a share of the run): %s. Redis time per tick by command (most first): %s.",
					conc, r.n, fmtDur(r.fill), fmtDur(r.handlerEnd), fmtOps(r.ops, r.span), r.commands)
			} else {
				note("asynq, concurrency %d: enqueuing the %d tasks (16 goroutines) took %s. Redis time per task by command (most first): %s.", conc, r.n, fmtDur(r.fill), r.commands)
			}
		}
	}

	var b strings.Builder
	b.WriteString("## Workers\n\n")
	fmt.Fprintf(&b, "Floor, re-measured before this section (5 samples at whole seconds after 1 s idle): Go timer lateness p50 %s (max %s); first PING round trip after the idle p50 %s (max %s), the next one p50 %s.\n\n",
		fmtDur(pct(floor.timer, 50)), fmtDur(pct(floor.timer, 100)), fmtDur(pct(floor.first, 50)), fmtDur(pct(floor.first, 100)), fmtDur(pct(floor.second, 50)))
	fmt.Fprintf(&b, "### End-to-end delay, slot → handler start\n\n")
	fmt.Fprintf(&b, "onetick's Scheduler (one replica, default lease) and one worker.Worker (default options but the concurrency; default overlap policy, skip) in this process, each on its own client, jobs \"@every 1s\" with a no-op handler that first records time.Now() − the task's slot. Slots of a %s window after %s of warm-up; the window starts and ends half way between slots, and Redis commands and round trips are counted over it. With 1 job, p99 is the maximum.\n\n",
		win, warm)
	b.WriteString("| jobs due each second | worker concurrency | handler runs / job-slots due | slot → handler start p50 / p99 / max | slot → enqueue p50 / p99 (same run) | Redis commands per tick (scheduler + worker) | worker round trips per tick |\n|---|---|---|---|---|---|---|\n")
	var dnotes []string
	for _, d := range delays {
		if d.err != nil {
			fmt.Fprintf(&b, "| %d | %d | error: %s | | | | |\n", d.jobs, d.conc, esc(d.err.Error()))
			continue
		}
		if len(d.ds) == 0 {
			fmt.Fprintf(&b, "| %d | %d | 0 / %d | | | | |\n", d.jobs, d.conc, d.expected)
			continue
		}
		fmt.Fprintf(&b, "| %d | %d | %d / %d | %s / %s / %s | %s / %s | %.2f | %.3f |\n", d.jobs, d.conc, len(d.ds), d.expected,
			fmtDur(pct(d.ds, 50)), fmtDur(pct(d.ds, 99)), fmtDur(d.ds[len(d.ds)-1]),
			fmtDur(pct(d.enq, 50)), fmtDur(pct(d.enq, 99)), d.cmdsPerTick, d.rtPerTick)
		dnotes = append(dnotes, fmt.Sprintf("%d job(s), concurrency %d: the worker's store calls over the window (wall time summed per operation, as a share of the window; fetch includes its blocking wait): %s. Redis time per tick by command (most first): %s.",
			d.jobs, d.conc, fmtOps(d.ops, d.window), d.commands))
		if d.st.dups > 0 || d.st.missed > 0 {
			dnotes = append(dnotes, fmt.Sprintf("%d job(s), concurrency %d: %d handler runs repeated a (job, slot) already run, %d job-slots due in the window never ran.", d.jobs, d.conc, d.st.dups, d.st.missed))
		}
	}
	b.WriteString("\nNotes (a script's own line, EVALSHA, includes the time of the commands it ran, which also appear on their own lines):\n\n")
	for _, n := range dnotes {
		b.WriteString("- " + n + "\n")
	}
	b.WriteString("\n### Throughput, no-op handler, one process\n\n")
	b.WriteString("Each figure of asynq is followed by its ratio **asynq / onetick** in brackets. onetick: the ticks of one job, claimed beforehand through the backend's Claim (2000 per call), overlap policy allow (every tick of the job may run at once, as asynq tasks of one type do); asynq: tasks of one type on the default queue. FLUSHALL before each run; Server and Worker built as their documentation shows, each on a go-redis client with default options.\n\n")
	b.WriteString(t.markdown())
	if len(notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}
