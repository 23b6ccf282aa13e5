package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// rec is one enqueued tick as the harness saw it: which instance enqueued
// which job's slot, and when the enqueue returned.
type rec struct {
	job  int32
	inst int32
	slot int64 // Unix ms of the scheduled slot
	at   int64 // Unix ns when the enqueue had returned
}

// recorder collects recs from every instance of one scenario.
type recorder struct {
	mu   sync.Mutex
	recs []rec
	// ids maps a task's id to its rec, once keepIDs was called: for a
	// consumer that sees the task but not its slot (asynq Scheduler's
	// tasks carry only the job).
	ids map[string]rec
}

// keepIDs makes addTagged remember each rec by its task's id.
func (r *recorder) keepIDs() {
	r.mu.Lock()
	if r.ids == nil {
		r.ids = map[string]rec{}
	}
	r.mu.Unlock()
}

// addTagged adds x, and remembers it under id if keepIDs was called.
func (r *recorder) addTagged(id string, x rec) {
	r.mu.Lock()
	r.recs = append(r.recs, x)
	if r.ids != nil {
		r.ids[id] = x
	}
	r.mu.Unlock()
}

// byID is the rec added under id.
func (r *recorder) byID(id string) (rec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x, ok := r.ids[id]
	return x, ok
}

func newRecorder(capacity int) *recorder { return &recorder{recs: make([]rec, 0, capacity)} }

func (r *recorder) add(x rec) {
	r.mu.Lock()
	r.recs = append(r.recs, x)
	r.mu.Unlock()
}

func (r *recorder) addBatch(xs []rec) {
	r.mu.Lock()
	r.recs = append(r.recs, xs...)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []rec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// jobName and jobIndex convert between a job's index and its name.
func jobName(i int) string { return fmt.Sprintf("j%06d", i) }

func jobIndex(name string) int32 {
	n, err := strconv.Atoi(name[1:])
	if err != nil {
		return -1
	}
	return int32(n)
}

// gate simulates a stalled process: while paused, every call that passes
// through wait blocks until the pause ends (a paused process cannot notice
// its own timeouts either).
type gate struct {
	mu    sync.Mutex
	until time.Time
	hits  int // calls that were blocked
}

func (g *gate) pause(d time.Duration) {
	g.mu.Lock()
	g.until = time.Now().Add(d)
	g.mu.Unlock()
}

// wait blocks while the gate is paused; it reports whether it blocked.
func (g *gate) wait() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	d := time.Until(g.until)
	if d > 0 {
		g.hits++
	}
	g.mu.Unlock()
	if d <= 0 {
		return false
	}
	time.Sleep(d)
	return true
}

// slotStats summarises recs whose slot lies in (from, to] (Unix ms),
// against the slots a period-ms schedule has there for jobs jobs.
type slotStats struct {
	expected   int // job-slots that should have been enqueued once
	enqueued   int // recs in the window
	dups       int // sum over (job, slot) of (count-1)
	dupSecond  int // the same, keyed by the enqueue instant truncated to the period
	missed     int // expected job-slots with no rec
	stale      int // recs enqueued more than staleAfter after their slot
	dupSlots   int // (job, slot) pairs enqueued more than once
	maxPerSlot int
}

func analyse(recs []rec, jobs int, period, from, to int64, staleAfter time.Duration) slotStats {
	type key struct {
		job  int32
		slot int64
	}
	cnt := map[key]int{}
	bySec := map[key]int{}
	var st slotStats
	for _, r := range recs {
		if r.slot <= from || r.slot > to {
			continue
		}
		st.enqueued++
		cnt[key{r.job, r.slot}]++
		sec := (r.at / int64(time.Millisecond)) / period * period
		bySec[key{r.job, sec}]++
		if time.Duration(r.at-r.slot*int64(time.Millisecond)) > staleAfter {
			st.stale++
		}
	}
	for _, c := range cnt {
		if c > 1 {
			st.dups += c - 1
			st.dupSlots++
		}
		st.maxPerSlot = max(st.maxPerSlot, c)
	}
	for _, c := range bySec {
		if c > 1 {
			st.dupSecond += c - 1
		}
	}
	first := (from/period + 1) * period
	for s := first; s <= to; s += period {
		for j := 0; j < jobs; j++ {
			st.expected++
			if cnt[key{int32(j), s}] == 0 {
				st.missed++
			}
		}
	}
	return st
}

// delays returns enqueue instant minus slot for recs with slot in (from, to].
func delays(recs []rec, from, to int64) []time.Duration {
	var out []time.Duration
	for _, r := range recs {
		if r.slot <= from || r.slot > to {
			continue
		}
		out = append(out, time.Duration(r.at-r.slot*int64(time.Millisecond)))
	}
	slices.Sort(out)
	return out
}

// pct returns the p-th percentile (nearest rank) of sorted ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func sortedCopy(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}

// ms is Unix milliseconds of t.
func ms(t time.Time) int64 { return t.UnixMilli() }

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// nextSecond is the next whole second after t plus off.
func nextSecond(t time.Time, off time.Duration) time.Time {
	return t.Truncate(time.Second).Add(time.Second + off)
}
