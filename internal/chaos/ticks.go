package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Documented limits, as the findings name them.
const (
	docAsyncLoss = "README guarantees, Redis failover: an acknowledged claim lost with the old primary (Bounds.AsyncLoss)"
	docRerun     = "README, what a worker guarantees: a handler can run twice when its worker is killed, cut off or stalled mid-run"
	docNoHistory = "README and docs/design.md: a job with no history starts with the first slot after its leader starts; if the leader changes before the job's first tick, the slots in between are not counted as missed"
)

// Faults of a run's worker after which its tick may start again
// elsewhere (docRerun), because they can lapse the worker's liveness: its
// process killed (kill9, worker-kill, term: the handler is cut when its
// bound is up), stalled (stop), or its path to the store cut (partition)
// or slowed (latency). A store failover fault (failoverFaults, any
// target) lapses every worker's liveness too.
var rerunFaults = map[string]bool{"kill9": true, "worker-kill": true, "term": true, "stop": true, "partition": true, "latency": true}

// StartSlack is how long before a run's start event a fault of its
// worker still counts as coming after the start: a run started just
// before its replica was killed is logged, and so recorded, a few
// milliseconds after the kill.
const StartSlack = time.Second

// DoneSlack is how long after a run's OK end event (logged by the
// command as it exits) its worker may still be writing the done record:
// a fault of the worker, or of the store, that starts later than this
// cannot have kept the record from the store, so it does not excuse a
// second start of a tick that completed. Generous (five times the
// runner's 1 s renew period) for a loaded machine.
const DoneSlack = 5 * time.Second

// workerTargets are the fault targets that hit a run: its worker, or its
// command's PID ("N" or "pid:N").
func workerTargets(run Event) []string {
	t := []string{run.Worker}
	if run.PID != 0 {
		t = append(t, strconv.Itoa(run.PID), "pid:"+strconv.Itoa(run.PID))
	}
	return t
}

// cause is what could have lapsed a run's worker: a fault (an index
// into faults) or the worker's own lapse event (an index into ev).
type cause struct {
	desc string
	ev   int // the event to mark in the window
}

// lapsed returns what could have lapsed the liveness of run's worker
// between run's start (less StartSlack) and to: a rerunFaults fault
// targeting its worker or PID, a store failover fault, or a lapse event
// of its worker naming this tick.
func (h *history) lapsed(run Event, to time.Time) (cause, bool) {
	from := run.T.Add(-StartSlack)
	if fi := h.faultIn(rerunFaults, workerTargets(run), from, to); fi >= 0 {
		return h.faultCause(fi), true
	}
	if fi := h.faultIn(failoverFaults, nil, from, to); fi >= 0 {
		return h.faultCause(fi), true
	}
	return h.lapseIn(run, from, to)
}

func (h *history) faultCause(fi int) cause {
	f := h.faults[fi]
	return cause{desc: fmt.Sprintf("%s of %s at %s", f.name, f.target, clock(f.start)), ev: f.i}
}

// lapseIn finds a lapse event of run's worker in [from, to] that names
// run's tick (its result not recorded, its handler cancelled). A lapse
// naming no tick (a failed heartbeat) is kept in the history for the
// reader but excuses nothing: one failed call does not lapse a liveness,
// and a lapsed one shows as the named ticks' own reports.
func (h *history) lapseIn(run Event, from, to time.Time) (cause, bool) {
	tick := slotKey(run)
	for i, e := range h.ev {
		if e.Kind != KindLapse || e.Replica != run.Worker || e.T.Before(from) || e.T.After(to) ||
			(e.Tick == "" && e.Job == "") || slotKey(e) != tick {
			continue
		}
		return cause{desc: fmt.Sprintf("%s's own report at %s (%s)", e.Replica, clock(e.T), e.Note), ev: i}, true
	}
	return cause{}, false
}

// lapsedBeforeDone is lapsed for a run that ended OK at end: the fault
// must start before its done record can have been written (end plus
// DoneSlack) and before to. Under AsyncLoss a store failover fault up to
// to counts as well: the done record, acknowledged, can be lost with the
// old primary. The worker's own report that it did not record this
// tick's result counts up to to.
func (h *history) lapsedBeforeDone(run, end Event, to time.Time) (cause, bool) {
	by := end.T.Add(DoneSlack)
	if to.Before(by) {
		by = to
	}
	if c, ok := h.lapsed(run, by); ok {
		return c, true
	}
	if c, ok := h.lapseIn(run, run.T.Add(-StartSlack), to); ok {
		return c, true
	}
	if !h.bounds.AsyncLoss {
		return cause{}, false
	}
	if fi := h.faultIn(failoverFaults, nil, run.T.Add(-StartSlack), to); fi >= 0 {
		return h.faultCause(fi), true
	}
	return cause{}, false
}

// checkTicks finds ticks enqueued twice.
func (h *history) checkTicks() {
	t := &h.rep.Totals
	h.enq, h.sched, h.asyncLost = map[string][]int{}, map[string]bool{}, map[string]bool{}
	seen := map[string]bool{} // tick + entry: one observation
	var keys []string
	for i, e := range h.ev {
		if e.Kind != KindEnqueue {
			continue
		}
		t.EnqueueEvents++
		k := slotKey(e)
		if k == "" || e.Job == "" {
			h.violation(Finding{Kind: VHistory, T: e.T, Events: []int{i},
				Desc: "an enqueue event without job and slot or tick id"})
			continue
		}
		if e.Entry != "" {
			if seen[k+"\x00"+e.Entry] {
				continue // the same entry observed again
			}
			seen[k+"\x00"+e.Entry] = true
		}
		if len(h.enq[k]) == 0 {
			keys = append(keys, k)
		}
		// A backfill that claimed a slot within Settle of its due time
		// took the scheduler's claim (the same tick id): the leader then
		// finds the slot claimed and does not enqueue it again, so the
		// backfill counts as its firing. A later one fills no gap.
		if e.TickKind == "" || e.TickKind == "backfill" && e.Slot != 0 && !e.T.After(time.UnixMilli(e.Slot).Add(h.bounds.Settle)) {
			h.sched[k] = true
		}
		h.enq[k] = append(h.enq[k], i)
	}
	t.Enqueued = len(h.enq)
	for _, k := range keys {
		obs := h.enq[k]
		first := h.ev[obs[0]]
		for _, j := range obs[1:] {
			again := h.ev[j]
			f := Finding{Kind: VEnqueuedTwice, Job: first.Job, Slot: first.Slot, Tick: first.Tick, T: again.T,
				Events: []int{obs[0], j},
				Desc: fmt.Sprintf("%s enqueued twice: entry %q (%s, epoch %d) at %s, entry %q (%s, epoch %d) %v later",
					tickName(first), first.Entry, tickKind(first), first.Epoch, clock(first.T),
					again.Entry, tickKind(again), again.Epoch, again.T.Sub(first.T))}
			if h.bounds.AsyncLoss {
				if fi := h.faultIn(failoverFaults, nil, first.T, again.T); fi >= 0 {
					f.Documented = docAsyncLoss
					f.Desc += fmt.Sprintf(", across %s at %s", h.faults[fi].name, clock(h.faults[fi].start))
					f.Events = append(f.Events, h.faults[fi].i)
					h.asyncLost[k] = true
					h.documented(f)
					continue
				}
			}
			h.violation(f)
		}
	}
}

// checkRuns finds runs of a tick started twice outside the documented
// case.
func (h *history) checkRuns() {
	t := &h.rep.Totals
	h.runs, h.completed = map[string][]int{}, map[string]bool{}
	endOf := map[int]int{}    // run_start -> its run_end
	startOf := map[int]int{}  // run_end -> its run_start
	oks := map[string][]int{} // tick -> its run_end OK events
	for i, e := range h.ev {
		switch e.Kind {
		case KindRunStart, KindRunEnd:
			if slotKey(e) == "" {
				h.violation(Finding{Kind: VHistory, T: e.T, Events: []int{i},
					Desc: "a " + e.Kind + " event without job and slot or tick id"})
				continue
			}
		}
		switch e.Kind {
		case KindRunStart:
			t.RunsStarted++
			h.runs[slotKey(e)] = append(h.runs[slotKey(e)], i)
		case KindRunEnd:
			t.RunsFinished++
			k := slotKey(e)
			if e.OK != nil && *e.OK {
				h.completed[k] = true
				t.RunsOK++
				oks[k] = append(oks[k], i)
			}
			// The latest unfinished start of the same run.
			starts := h.runs[k]
			for s := len(starts) - 1; s >= 0; s-- {
				st := h.ev[starts[s]]
				if _, done := endOf[starts[s]]; done || st.Worker != e.Worker ||
					(st.PID != 0 && e.PID != 0 && st.PID != e.PID) ||
					(st.Attempt != 0 && e.Attempt != 0 && st.Attempt != e.Attempt) {
					continue
				}
				endOf[starts[s]], startOf[i] = i, starts[s]
				break
			}
		}
	}
	keys := make([]string, 0, len(h.runs))
	for k := range h.runs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return h.runs[keys[a]][0] < h.runs[keys[b]][0] })
	for _, k := range keys {
		starts := h.runs[k]
		for n, j := range starts[1:] {
			h.judgeRun(k, starts[:n+1], j, endOf, startOf, oks[k])
		}
	}
}

// judgeRun judges the run j of tick k started after the runs before.
func (h *history) judgeRun(k string, before []int, j int, endOf, startOf map[int]int, oks []int) {
	again := h.ev[j]
	base := Finding{Kind: VRunTwice, Job: again.Job, Slot: again.Slot, Tick: again.Tick, Replica: again.Worker, T: again.T}
	afterOK := false
	for _, o := range oks {
		end := h.ev[o]
		if end.T.After(again.T) {
			break
		}
		f := base
		f.Events = []int{o, j}
		f.Desc = fmt.Sprintf("%s started again (attempt %d on %s) after it completed OK at %s on %s",
			tickName(again), again.Attempt, again.Worker, clock(end.T), end.Worker)
		// Its worker killed, stalled or cut off from the store between
		// the two starts: its liveness may have lapsed before its done
		// record was written, and another worker took the tick over (the
		// README's first case).
		if s, ok := startOf[o]; ok {
			if c, ok := h.lapsedBeforeDone(h.ev[s], end, again.T); ok {
				f.Documented = docRerun
				f.Desc += ": " + c.desc + ", between the two starts"
				f.Events = append(f.Events, s, c.ev)
				h.documented(f)
				afterOK = true
				continue
			}
		}
		h.violation(f)
		return
	}
	if afterOK {
		h.rep.Totals.Reruns++
		return
	}
	rerun := false
	for _, i := range before {
		if e, ok := endOf[i]; ok && !h.ev[e].T.After(again.T) {
			continue // it failed before this one started: a retry
		}
		first := h.ev[i]
		if _, ok := h.lapsed(first, again.T); ok {
			rerun = true
			continue
		}
		if h.asyncLost[k] {
			if fi := h.faultIn(failoverFaults, nil, first.T, again.T); fi >= 0 {
				f := base
				f.Documented = docAsyncLoss
				f.Events = []int{i, j, h.faults[fi].i}
				f.Desc = fmt.Sprintf("%s run again on %s: enqueued twice across %s at %s",
					tickName(again), again.Worker, h.faults[fi].name, clock(h.faults[fi].start))
				h.documented(f)
				return
			}
		}
		f := base
		f.Events = []int{i, j}
		f.Desc = fmt.Sprintf("%s started again (attempt %d on %s, pid %d) while its run on %s (attempt %d, pid %d, started %v before) had not ended, and no fault could have lapsed %s's liveness between them",
			tickName(again), again.Attempt, again.Worker, again.PID, first.Worker, first.Attempt, first.PID, again.T.Sub(first.T), first.Worker)
		h.violation(f)
		return
	}
	if rerun {
		h.rep.Totals.Reruns++
	} else {
		h.rep.Totals.Retries++
	}
}

// checkSlots judges each job's expected slots: a prefer: duplicate slot
// must be run (enqueued, without Run); a prefer: missed job's slots
// without an enqueue must be counted.
func (h *history) checkSlots() {
	t := &h.rep.Totals
	missed := map[string]int{} // tick -> its first missed event
	for i, e := range h.ev {
		if e.Kind == KindMissed {
			t.MissedEvents++
			if _, ok := missed[slotKey(e)]; !ok {
				missed[slotKey(e)] = i
			}
		}
	}
	counted := h.missedCounted()
	for _, v := range counted {
		t.MissedCounted += v
	}
	for _, name := range h.order {
		j := h.jobs[name]
		jt := JobTotals{JobSpec: j, MissedCounted: counted[name]}
		exp := h.expected(j)
		jt.Expected = len(exp)
		t.SlotsExpected += len(exp)
		var missing, uncovered []int64
		for _, s := range exp {
			k := name + ":" + strconv.FormatInt(s, 10)
			// A slot only a backfill enqueued was not fired by the
			// scheduler, nor was its run.
			enq := h.sched[k]
			ran := len(h.runs[k]) > 0 && (enq || len(h.enq[k]) == 0)
			_, gone := missed[k]
			if enq {
				jt.Enqueued++
			}
			if ran {
				jt.Ran++
			}
			if h.completed[k] {
				jt.Completed++
			}
			if gone {
				jt.MissedEvents++
			}
			switch {
			case j.Prefer == "duplicate" && (j.Run && !ran || !j.Run && !enq):
				missing = append(missing, s)
			case j.Prefer == "missed" && !enq:
				missing = append(missing, s)
				if !gone {
					uncovered = append(uncovered, s)
				}
			}
		}
		jt.Missing = len(missing)
		h.rep.Jobs = append(h.rep.Jobs, jt)
		if head, ai := h.noHistory(name, exp, missed); len(head) > 0 {
			missing, uncovered = without(missing, head), without(uncovered, head)
			kind := VMissedUncounted
			if j.Prefer == "duplicate" {
				kind = VNeverRun
			}
			a := h.ev[ai]
			h.documented(Finding{Kind: kind, Job: name, Slot: head[0], T: time.UnixMilli(head[0]), Events: []int{ai},
				Documented: docNoHistory,
				Desc: fmt.Sprintf("%d slots of %s (%s to %s) before its first tick, not fired: no leader had fired the job when %s acquired the lease at %s",
					len(head), name, clock(time.UnixMilli(head[0])), clock(time.UnixMilli(head[len(head)-1])), a.Replica, clock(a.T))})
		}
		if j.Prefer == "duplicate" {
			h.neverRun(j, missing)
		} else {
			h.uncounted(j, uncovered, counted[name])
		}
	}
}

// noHistory returns the expected slots exp of a job before its first
// slot with a scheduled enqueue or a missed event (the first the fleet
// accounted for), when a leader acquired the lease after the first of
// them was due and before that first slot: the job had no history, so the
// new leader started after its own start (docNoHistory). Only the slots
// due before that acquisition (plus MaxSkew) are returned, with the index
// of the acquired event; none when the first slot was accounted for.
func (h *history) noHistory(name string, exp []int64, missed map[string]int) ([]int64, int) {
	if len(exp) == 0 {
		return nil, -1
	}
	first := -1
	for n, s := range exp {
		k := name + ":" + strconv.FormatInt(s, 10)
		if _, gone := missed[k]; h.sched[k] || gone {
			first = n
			break
		}
	}
	if first <= 0 {
		return nil, -1
	}
	from, to := time.UnixMilli(exp[0]), time.UnixMilli(exp[first])
	ai := -1
	for i, e := range h.ev {
		if e.Kind == KindLeader && e.Phase == "acquired" && e.T.After(from) && !e.T.After(to) {
			ai = i // the latest such
		}
	}
	if ai < 0 {
		return nil, -1
	}
	var head []int64
	for _, s := range exp[:first] {
		if !time.UnixMilli(s).After(h.ev[ai].T.Add(h.bounds.MaxSkew)) {
			head = append(head, s)
		}
	}
	return head, ai
}

// without returns s without the values in drop.
func without(s, drop []int64) []int64 {
	d := map[int64]bool{}
	for _, v := range drop {
		d[v] = true
	}
	var out []int64
	for _, v := range s {
		if !d[v] {
			out = append(out, v)
		}
	}
	return out
}

// neverRun reports a prefer: duplicate job's missing slots, one finding
// per run of consecutive slots (documented when lost across a failover).
func (h *history) neverRun(j JobSpec, missing []int64) {
	step := j.Every.Milliseconds()
	for a := 0; a < len(missing); {
		b := a + 1
		for b < len(missing) && missing[b] == missing[b-1]+step {
			b++
		}
		from, to := missing[a], missing[b-1]
		at := time.UnixMilli(from)
		f := Finding{Kind: VNeverRun, Job: j.Name, Slot: from, T: at}
		what := "run"
		if !j.Run {
			what = "enqueued"
		}
		if b-a == 1 {
			f.Desc = fmt.Sprintf("%s (prefer: duplicate) was never %s", slotName(j.Name, from), what)
		} else {
			f.Desc = fmt.Sprintf("%d slots of %s (prefer: duplicate) were never %s: %s to %s", b-a, j.Name, what, clock(at), clock(time.UnixMilli(to)))
		}
		if k := j.Name + ":" + strconv.FormatInt(from, 10); len(h.enq[k]) > 0 {
			if h.sched[k] {
				f.Desc += " (the first was enqueued)"
			} else {
				f.Desc += " (the first only by a backfill)"
			}
			f.Events = h.enq[k][:1]
		}
		if fi := h.lostAround(from, to); fi >= 0 {
			f.Documented = docAsyncLoss
			f.Desc += fmt.Sprintf(", lost across %s at %s", h.faults[fi].name, clock(h.faults[fi].start))
			h.documented(f)
		} else {
			h.violation(f)
		}
		a = b
	}
}

// lostAround returns, under AsyncLoss, a store failover fault that may
// have lost the claims of slots from..to: one active between the first
// slot's due time (less MaxSkew) and the last one's plus Settle; -1 when
// none.
func (h *history) lostAround(from, to int64) int {
	if !h.bounds.AsyncLoss {
		return -1
	}
	return h.faultIn(failoverFaults, nil, time.UnixMilli(from).Add(-h.bounds.MaxSkew), time.UnixMilli(to).Add(h.bounds.Settle))
}

// uncounted judges a prefer: missed job: its slots without an enqueue
// or a missed event must not outnumber its counters' sum.
func (h *history) uncounted(j JobSpec, uncovered []int64, counted float64) {
	if float64(len(uncovered)) <= counted {
		return
	}
	var lost, rest []int64
	for _, s := range uncovered {
		if h.lostAround(s, s) >= 0 {
			lost = append(lost, s)
		} else {
			rest = append(rest, s)
		}
	}
	f := Finding{Kind: VMissedUncounted, Job: j.Name,
		Desc: fmt.Sprintf("%s (prefer: missed): %d slots neither enqueued nor reported missed (%s), its %s counters sum to %g: %g uncounted",
			j.Name, len(uncovered), slotList(uncovered), MissedCounter, counted, float64(len(uncovered))-counted)}
	if float64(len(rest)) <= counted {
		f.Slot, f.T = lost[0], time.UnixMilli(lost[0])
		f.Documented = docAsyncLoss
		f.Desc += fmt.Sprintf("; %d of them due near a store failover", len(lost))
		h.documented(f)
		return
	}
	f.Slot, f.T = rest[0], time.UnixMilli(rest[0])
	if len(lost) > 0 {
		f.Desc += fmt.Sprintf("; %d of them due near a store failover (documented), not the rest", len(lost))
	}
	h.violation(f)
}

// missedCounted sums each job's missed counters. A counter event is a
// replica's cumulative value; a replica's process life ends at a value
// lower than the one before or at a kill9, worker-kill or term fault
// targeting it, and a new life counts from zero. Per job, the larger of
// the two counters' sums counts.
func (h *history) missedCounted() map[string]float64 {
	type series struct {
		last float64
		at   time.Time
	}
	sums := map[string]map[string]float64{} // counter name -> job -> sum
	prev := map[string]*series{}            // name, replica, job -> last value
	for _, e := range h.ev {
		if e.Kind != KindCounter || e.Job == "" || e.Name != MissedCounter && e.Name != JobMissedCounter {
			continue
		}
		key := e.Name + "\x00" + e.Replica + "\x00" + e.Job
		p := prev[key]
		if p == nil {
			p = &series{}
			prev[key] = p
		} else if e.Value < p.last || h.faultIn(lifeEnds, []string{e.Replica}, p.at, e.T) >= 0 {
			p.last = 0 // a new process life
		}
		if sums[e.Name] == nil {
			sums[e.Name] = map[string]float64{}
		}
		sums[e.Name][e.Job] += e.Value - p.last
		p.last, p.at = e.Value, e.T
	}
	out := map[string]float64{}
	for _, m := range sums {
		for job, v := range m {
			out[job] = max(out[job], v)
		}
	}
	return out
}

// Faults that end a replica's process.
var lifeEnds = map[string]bool{"kill9": true, "worker-kill": true, "term": true}

// tickKind names how a tick was enqueued.
func tickKind(e Event) string {
	if e.TickKind == "" {
		return "scheduled"
	}
	return e.TickKind
}

// slotList lists slots briefly: the first few as clock times.
func slotList(s []int64) string {
	const most = 5
	out := ""
	for i, v := range s {
		if i == most {
			return out + fmt.Sprintf(", ... %d more", len(s)-most)
		}
		if i > 0 {
			out += ", "
		}
		out += clock(time.UnixMilli(v))
	}
	return out
}
