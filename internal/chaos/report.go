package chaos

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PrintOptions tune Report.Print.
type PrintOptions struct {
	// Windows prints the window of history of documented cases too (a
	// violation's is always printed).
	Windows bool
	// MaxDocumented caps the documented cases listed (0: 50); the rest are
	// counted.
	MaxDocumented int
}

// Print writes the report for a human: the run, the totals, the
// documented cases, each violation with its window, and the verdict.
func (r Report) Print(w io.Writer, o PrintOptions) error {
	p := &printer{w: w}
	t := r.Totals
	p.f("chaos history: store %s, seed %d, %s to %s (%v), %d events\n",
		orNone(r.Store), r.Seed, stamp(r.Start), stamp(r.End), r.End.Sub(r.Start).Round(time.Millisecond), t.Events)
	p.f("bounds: max skew %v, settle %v, async loss %v\n", r.Bounds.MaxSkew, r.Bounds.Settle, r.Bounds.AsyncLoss)
	p.f("faults: %d%s\n", t.FaultsTotal, faultList(t.Faults))
	p.f("ticks: %d enqueued (%d enqueue events), %d slots expected\n", t.Enqueued, t.EnqueueEvents, t.SlotsExpected)
	p.f("runs: %d started, %d finished (%d OK), %d retries after a failure, %d started again after a fault of their worker\n",
		t.RunsStarted, t.RunsFinished, t.RunsOK, t.Retries, t.Reruns)
	p.f("missed: %d missed events, the missed counters sum to %g\n", t.MissedEvents, t.MissedCounted)
	p.f("leadership: %d acquired, highest epoch %d\n", t.Acquired, t.MaxEpoch)
	if len(r.Jobs) > 0 {
		p.f("jobs:\n  %-20s %-9s %8s %4s %8s %8s %8s %8s %8s %8s %8s\n", "job", "prefer", "every", "run", "expected", "enqueued", "ran", "done", "missing", "missed", "counted")
		for _, j := range r.Jobs {
			ran, done := "-", "-"
			if j.Run {
				ran, done = strconv.Itoa(j.Ran), strconv.Itoa(j.Completed)
			}
			p.f("  %-20s %-9s %8v %4v %8d %8d %8s %8s %8d %8d %8g\n", j.Name, j.Prefer, j.Every, j.Run, j.Expected, j.Enqueued, ran, done, j.Missing, j.MissedEvents, j.MissedCounted)
		}
	}
	if len(r.Documented) > 0 {
		most := o.MaxDocumented
		if most <= 0 {
			most = 50
		}
		p.f("\ndocumented limits (not violations): %d%s\n", len(r.Documented), kindCounts(r.Documented))
		for i, d := range r.Documented {
			if i == most {
				p.f("  ... %d more\n", len(r.Documented)-most)
				break
			}
			p.f("  %s %s: %s\n    allowed by: %s\n", d.Kind, where(d), d.Desc, d.Documented)
			if o.Windows {
				p.window(d.Window)
			}
		}
	}
	if len(r.Violations) > 0 {
		p.f("\nviolations: %d%s\n", len(r.Violations), kindCounts(r.Violations))
		for _, v := range r.Violations {
			p.f("\nVIOLATION %s %s\n  %s\n", v.Kind, where(v), v.Desc)
			p.window(v.Window)
		}
	}
	if r.OK() {
		p.f("\nverdict: PASS (0 violations, %d documented)\n", len(r.Documented))
	} else {
		p.f("\nverdict: FAIL (%d violations, %d documented)\n", len(r.Violations), len(r.Documented))
	}
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

func (p *printer) window(lines []Line) {
	if len(lines) == 0 {
		return
	}
	p.f("  history around it (> marks its events):\n")
	for _, l := range lines {
		m := " "
		if l.Mark {
			m = ">"
		}
		p.f("  %s #%-6d %s\n", m, l.N, l.Event)
	}
}

// String formats an event on one line: its time, kind and the fields it
// sets.
func (e Event) String() string {
	var b strings.Builder
	b.WriteString(clock(e.T))
	b.WriteString(" ")
	b.WriteString(e.Kind)
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	num := func(k string, v int64) {
		if v != 0 {
			kv(k, strconv.FormatInt(v, 10))
		}
	}
	for _, v := range []string{e.Fault, e.Phase} {
		if v != "" {
			b.WriteString(" " + v)
		}
	}
	kv("target", e.Target)
	kv("store", e.Store)
	num("seed", e.Seed)
	if len(e.Jobs) > 0 {
		kv("jobs", strconv.Itoa(len(e.Jobs)))
	}
	kv("replica", e.Replica)
	kv("job", e.Job)
	if e.Slot != 0 {
		kv("slot", clock(time.UnixMilli(e.Slot)))
	}
	if e.Tick != "" && e.Tick != slotKey(e) {
		kv("tick", e.Tick)
	}
	kv("kind", e.TickKind)
	kv("entry", e.Entry)
	num("epoch", e.Epoch)
	if !e.TrustUntil.IsZero() {
		kv("trust_until", clock(e.TrustUntil))
	}
	num("attempt", int64(e.Attempt))
	kv("worker", e.Worker)
	num("pid", int64(e.PID))
	if e.OK != nil {
		kv("ok", strconv.FormatBool(*e.OK))
	}
	kv("name", e.Name)
	if e.Kind == KindCounter {
		kv("value", strconv.FormatFloat(e.Value, 'g', -1, 64))
	}
	if e.Note != "" {
		kv("note", strconv.Quote(e.Note))
	}
	return b.String()
}

// clock formats a time of the run: UTC, to the millisecond.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// tickName names a tick: job and slot, or a trigger's id.
func tickName(e Event) string {
	if e.Slot != 0 {
		return slotName(e.Job, e.Slot)
	}
	return "tick " + e.Tick
}

func slotName(job string, slot int64) string {
	return fmt.Sprintf("%s slot %s (%d)", job, clock(time.UnixMilli(slot)), slot)
}

// where names what a finding is about.
func where(f Finding) string {
	var parts []string
	if f.Job != "" {
		parts = append(parts, "job="+f.Job)
	}
	if f.Slot != 0 {
		parts = append(parts, "slot="+strconv.FormatInt(f.Slot, 10))
	}
	if f.Tick != "" && f.Tick != f.Job+":"+strconv.FormatInt(f.Slot, 10) {
		parts = append(parts, "tick="+f.Tick)
	}
	if f.Replica != "" {
		parts = append(parts, "replica="+f.Replica)
	}
	parts = append(parts, "at "+clock(f.T))
	return strings.Join(parts, " ")
}

func faultList(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func kindCounts(fs []Finding) string {
	m := map[string]int{}
	for _, f := range fs {
		m[f.Kind]++
	}
	return faultList(m)
}
