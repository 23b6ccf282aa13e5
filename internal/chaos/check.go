package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kinds of violations (and of documented cases, which carry the kind of
// the check that found them).
const (
	// VHistory is a history the checker cannot judge: no run or end event,
	// a job without a period, a second run event.
	VHistory = "history"
	// VEnqueuedTwice is a slot (or a trigger's tick) enqueued twice.
	VEnqueuedTwice = "enqueued_twice"
	// VRunTwice is a run of a tick started again outside the documented case.
	VRunTwice = "run_twice"
	// VNeverRun is a prefer: duplicate slot never run (never enqueued, for a
	// job without Run).
	VNeverRun = "never_run"
	// VMissedUncounted is a prefer: missed job whose slots without an
	// enqueue are more than its missed events and counters account for.
	VMissedUncounted = "missed_uncounted"
	// VTrustOverlap is two replicas trusting the lease at once.
	VTrustOverlap = "trust_overlap"
	// VEpochBackwards is a leadership acquired with an epoch below (or
	// equal to, by another replica) one acquired before.
	VEpochBackwards = "epoch_backwards"
)

// The window of history printed with a finding: the events from
// WindowSpan before its first event to WindowSpan after its last, at most
// WindowMax of them (its own events always, the others nearest first).
const (
	WindowSpan = 2 * time.Second
	WindowMax  = 24
)

// Finding is a violation, or a documented case (Documented set).
type Finding struct {
	Kind string
	// Desc is one line: what happened and why it breaks the rule.
	Desc    string
	Job     string
	Slot    int64
	Tick    string
	Replica string
	T       time.Time
	// Documented names the documented limit that allows it; empty for a
	// violation.
	Documented string
	// Events are the indexes (into the checked history) of the events the
	// finding is about; Window is the history around them.
	Events []int
	Window []Line
}

// Line is an event of a window: its index (1-based position in the
// history, the line number when the file has no blank lines) and whether
// the finding is about it.
type Line struct {
	N     int
	Event Event
	Mark  bool
}

// Report is the checker's verdict on a history.
type Report struct {
	Store      string
	Seed       int64
	Start, End time.Time
	Bounds     Bounds
	Totals     Totals
	Jobs       []JobTotals
	Violations []Finding
	Documented []Finding
}

// OK reports whether the history holds no violation.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Totals count what the history holds.
type Totals struct {
	Events int
	// Faults counts fault starts by fault name.
	Faults      map[string]int
	FaultsTotal int
	// Enqueued is the ticks enqueued (distinct job+slot, or tick id for a
	// trigger); EnqueueEvents the enqueue observations.
	Enqueued      int
	EnqueueEvents int
	RunsStarted   int
	RunsFinished  int
	RunsOK        int
	// Retries are runs started after a failed run of the same tick;
	// Reruns are runs started again after the first one's worker was
	// killed, stopped or cut off (the documented case).
	Retries       int
	Reruns        int
	SlotsExpected int
	// MissedEvents are the missed events; MissedCounted the jobs' missed
	// counters summed (see the package documentation).
	MissedEvents  int
	MissedCounted float64
	Acquired      int
	MaxEpoch      int64
}

// JobTotals are one job's figures, over its expected slots (From to
// End minus Settle).
type JobTotals struct {
	JobSpec
	Expected int
	Enqueued int // expected slots the scheduler enqueued (not a backfill)
	Ran      int // expected slots with a run started (jobs with Run)
	// Completed are expected slots with a run_end OK (jobs with Run); a
	// slot run but never completed is counted here, not judged.
	Completed int
	// Missing are expected slots without an enqueue (or, with Run, without
	// a run, for prefer: duplicate).
	Missing       int
	MissedEvents  int     // expected slots with a missed event
	MissedCounted float64 // the job's counters' sum
}

// MaxSlots is the most expected slots of one job the checker lists (a
// job every second for eleven days).
const MaxSlots = 1_000_000

// The counters the missed rule sums: the per-job one, or the one by
// preference when it carries the job (the larger sum counts).
const (
	MissedCounter    = "scheduler_missed_ticks_total"
	JobMissedCounter = "scheduler_job_missed_ticks_total"
)

// Store faults that can fail the store over, and so lose acknowledged
// writes under Bounds.AsyncLoss.
var failoverFaults = map[string]bool{"failover": true, "store-kill": true, "store-restart": true}

// history is a history being checked: the events in time order, each
// with its index in the file.
type history struct {
	ev     []Event
	n      []int // n[i]: 1-based position of ev[i] in the input
	jobs   map[string]JobSpec
	order  []string // job names in the run event's order
	bounds Bounds
	end    time.Time
	hasEnd bool
	faults []fault
	rep    *Report

	enq       map[string][]int // tick -> its distinct enqueue observations
	sched     map[string]bool  // ticks the scheduler enqueued (TickKind empty)
	asyncLost map[string]bool  // ticks enqueued twice across a failover (AsyncLoss)
	runs      map[string][]int // tick -> its run_start events
	completed map[string]bool  // ticks with a run_end OK
}

// fault is a fault's active interval; an instantaneous fault (no end
// event) has end == start.
type fault struct {
	name, target string
	start, end   time.Time
	i            int // index in ev of its start
}

// Check judges a history. See the package documentation for the rules.
func Check(events []Event) Report {
	h := &history{jobs: map[string]JobSpec{}, rep: &Report{}}
	idx := make([]int, len(events))
	for i := range idx {
		idx[i] = i
	}
	// Time order; events of equal time keep the order they were written in.
	sort.SliceStable(idx, func(a, b int) bool { return events[idx[a]].T.Before(events[idx[b]].T) })
	for _, i := range idx {
		h.ev = append(h.ev, normalize(events[i]))
		h.n = append(h.n, i+1)
	}
	h.rep.Totals.Events = len(events)
	h.header()
	h.indexFaults()
	h.checkTicks()
	h.checkRuns()
	h.checkSlots()
	h.checkLeases()
	r := *h.rep
	sort.SliceStable(r.Violations, func(a, b int) bool { return r.Violations[a].T.Before(r.Violations[b].T) })
	sort.SliceStable(r.Documented, func(a, b int) bool { return r.Documented[a].T.Before(r.Documented[b].T) })
	return r
}

// normalize fills Job and Slot from a scheduled tick's id when the
// runner gave only the id.
func normalize(e Event) Event {
	if e.Tick == "" || (e.Job != "" && e.Slot != 0) || e.TickKind == "trigger" {
		return e
	}
	i := strings.LastIndexByte(e.Tick, ':')
	if i <= 0 {
		return e
	}
	s, err := strconv.ParseInt(e.Tick[i+1:], 10, 64)
	if err != nil {
		return e // a trigger's id: no slot
	}
	if e.Job == "" {
		e.Job = e.Tick[:i]
	}
	if e.Slot == 0 && e.Job == e.Tick[:i] {
		e.Slot = s
	}
	return e
}

// header reads the run and end events.
func (h *history) header() {
	runAt := -1
	for i, e := range h.ev {
		switch e.Kind {
		case KindRun:
			if runAt >= 0 {
				h.violation(Finding{Kind: VHistory, T: e.T, Events: []int{runAt, i},
					Desc: "a second run event: one history is one run"})
				continue
			}
			runAt = i
			h.rep.Store, h.rep.Seed, h.rep.Start = e.Store, e.Seed, e.T
			if e.Bounds != nil {
				h.bounds = *e.Bounds
			}
			if h.bounds.MaxSkew < 0 || h.bounds.Settle < 0 || h.bounds.Settle > 24*time.Hour {
				h.violation(Finding{Kind: VHistory, T: e.T, Events: []int{i},
					Desc: fmt.Sprintf("bounds out of range: max skew %v, settle %v (0 to 24h)", h.bounds.MaxSkew, h.bounds.Settle)})
				h.bounds.MaxSkew, h.bounds.Settle = max(h.bounds.MaxSkew, 0), min(max(h.bounds.Settle, 0), 24*time.Hour)
			}
			for _, j := range e.Jobs {
				switch {
				case j.Name == "" || j.Every < time.Millisecond || j.From == 0:
					h.violation(Finding{Kind: VHistory, Job: j.Name, T: e.T, Events: []int{i},
						Desc: fmt.Sprintf("job %q has no name, no period or no first slot (every %v, from %d)", j.Name, j.Every, j.From)})
					continue
				case j.Prefer != "missed" && j.Prefer != "duplicate":
					h.violation(Finding{Kind: VHistory, Job: j.Name, T: e.T, Events: []int{i},
						Desc: fmt.Sprintf("job %q has prefer %q, want missed or duplicate", j.Name, j.Prefer)})
					continue
				case h.jobs[j.Name].Name != "":
					h.violation(Finding{Kind: VHistory, Job: j.Name, T: e.T, Events: []int{i},
						Desc: fmt.Sprintf("job %q listed twice", j.Name)})
					continue
				}
				h.jobs[j.Name] = j
				h.order = append(h.order, j.Name)
			}
		case KindEnd:
			if !h.hasEnd {
				h.end, h.hasEnd = e.T, true
			}
		}
	}
	h.rep.Bounds, h.rep.End = h.bounds, h.end
	// A job whose slots cannot be listed (a first slot years before the
	// end, say) is a history problem, not a reason to loop for hours.
	var keep []string
	for _, name := range h.order {
		j := h.jobs[name]
		if n := (float64(h.end.Add(-h.bounds.Settle).UnixMilli())-float64(j.From))/float64(j.Every.Milliseconds()) + 1; h.hasEnd && n > MaxSlots {
			h.violation(Finding{Kind: VHistory, Job: name, T: h.rep.Start, Events: []int{runAt},
				Desc: fmt.Sprintf("job %q expects %.0f slots (from %d every %v), more than %d: a wrong first slot or period?", name, n, j.From, j.Every, MaxSlots)})
			delete(h.jobs, name)
			continue
		}
		keep = append(keep, name)
	}
	h.order = keep
	if runAt < 0 {
		h.violation(Finding{Kind: VHistory, Desc: "no run event: the jobs and bounds are unknown, slots cannot be judged"})
	}
	if !h.hasEnd {
		h.violation(Finding{Kind: VHistory, Desc: "no end event: the run did not finish, slots cannot be judged"})
	}
}

// indexFaults pairs fault starts with their ends (by name and target) and
// counts them.
func (h *history) indexFaults() {
	t := &h.rep.Totals
	t.Faults = map[string]int{}
	open := map[string][]int{} // name+target -> indexes into h.faults
	for i, e := range h.ev {
		if e.Kind != KindFault {
			continue
		}
		key := e.Fault + "\x00" + e.Target
		if e.Phase == "end" {
			if o := open[key]; len(o) > 0 {
				h.faults[o[0]].end = e.T
				open[key] = o[1:]
			}
			continue
		}
		t.Faults[e.Fault]++
		t.FaultsTotal++
		open[key] = append(open[key], len(h.faults))
		h.faults = append(h.faults, fault{name: e.Fault, target: e.Target, start: e.T, end: e.T, i: i})
	}
	// A fault never ended lasts until the end of the history.
	for _, o := range open {
		for _, k := range o {
			if h.hasEnd && h.end.After(h.faults[k].start) && h.isLasting(h.faults[k].name) {
				h.faults[k].end = h.end
			}
		}
	}
}

// isLasting reports whether a fault lasts until its end event.
func (h *history) isLasting(name string) bool {
	switch name {
	case "stop", "partition", "latency", "skew", "failover":
		return true
	}
	return false
}

// faultIn returns the first fault whose name is in names, whose target is
// one of targets (any target when targets is nil) and whose active
// interval meets [from, to]; -1 when none.
func (h *history) faultIn(names map[string]bool, targets []string, from, to time.Time) int {
	for k, f := range h.faults {
		if !names[f.name] || f.start.After(to) || f.end.Before(from) {
			continue
		}
		if targets == nil {
			return k
		}
		for _, tg := range targets {
			if tg != "" && f.target == tg {
				return k
			}
		}
	}
	return -1
}

// violation adds a violation, with its window.
func (h *history) violation(f Finding) {
	f.Window = h.window(f.Events, f.T)
	h.rep.Violations = append(h.rep.Violations, f)
}

// documented adds a documented case, with its window.
func (h *history) documented(f Finding) {
	f.Window = h.window(f.Events, f.T)
	h.rep.Documented = append(h.rep.Documented, f)
}

// window returns the events around marked (indexes into h.ev), or around
// the time at when there are none (a slot nothing happened to).
func (h *history) window(marked []int, at time.Time) []Line {
	if len(marked) == 0 && at.IsZero() {
		return nil
	}
	mark := map[int]bool{}
	lo, hi := at, at
	if len(marked) > 0 {
		lo, hi = h.ev[marked[0]].T, h.ev[marked[0]].T
	}
	for _, i := range marked {
		mark[i] = true
		if t := h.ev[i].T; t.Before(lo) {
			lo = t
		} else if t.After(hi) {
			hi = t
		}
	}
	lo, hi = lo.Add(-WindowSpan), hi.Add(WindowSpan)
	var near []int
	// h.ev is in time order.
	first := sort.Search(len(h.ev), func(i int) bool { return !h.ev[i].T.Before(lo) })
	for i := first; i < len(h.ev) && !h.ev[i].T.After(hi); i++ {
		if !mark[i] {
			near = append(near, i)
		}
	}
	// Keep the nearest to a marked event when there are too many.
	if room := WindowMax - len(mark); len(near) > room {
		dist := func(i int) time.Duration {
			best := absDur(h.ev[i].T.Sub(at))
			if len(mark) > 0 {
				best = time.Duration(1<<63 - 1)
			}
			for m := range mark {
				if d := absDur(h.ev[i].T.Sub(h.ev[m].T)); d < best {
					best = d
				}
			}
			return best
		}
		sort.SliceStable(near, func(a, b int) bool { return dist(near[a]) < dist(near[b]) })
		near = near[:max(room, 0)]
	}
	all := append(near, marked...)
	sort.Ints(all)
	var out []Line
	for k, i := range all {
		if k > 0 && all[k-1] == i {
			continue
		}
		out = append(out, Line{N: h.n[i], Event: h.ev[i], Mark: mark[i]})
	}
	return out
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// slotKey is the identity of a tick: job and slot for a scheduled or
// backfilled tick, the tick id for a trigger (or any id not of the form
// "job:slot").
func slotKey(e Event) string {
	if e.Tick != "" && (e.TickKind == "trigger" || !scheduledID(e.Tick)) {
		return e.Tick
	}
	if e.Slot != 0 {
		return e.Job + ":" + strconv.FormatInt(e.Slot, 10)
	}
	return e.Tick
}

// scheduledID reports whether a tick id has the form "job:slot".
func scheduledID(id string) bool {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 {
		return false
	}
	_, err := strconv.ParseInt(id[i+1:], 10, 64)
	return err == nil
}

// expected returns a job's expected slots: From, From+Every, ... up to
// End minus Settle.
func (h *history) expected(j JobSpec) []int64 {
	if !h.hasEnd {
		return nil
	}
	last := h.end.Add(-h.bounds.Settle).UnixMilli()
	step := j.Every.Milliseconds()
	if step <= 0 {
		return nil
	}
	var out []int64
	for s := j.From; s <= last; s += step {
		out = append(out, s)
	}
	return out
}
