//go:build verify

package verify

// Stream analysis: what the jobs' streams say about duplicates, missed
// slots, which term fired which slot, and early fires.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Entry is one stream entry: the tick and the Redis time of its XADD
// (the millisecond part of the entry id).
type Entry struct {
	onetick.TickRecord
	At time.Time
}

// Term identifies who fired: "replica|epoch" (epochs alone repeat after a
// Redis restart without persistence).
func (e Entry) Term() string { return e.Replica + "|" + strconv.FormatInt(int64(e.Epoch), 10) }

func entryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}

// ReadStream reads a job's whole stream.
func (f *Fleet) ReadStream(job string) []Entry {
	f.t.Helper()
	var recs []onetick.TickRecord
	var err error
	switch {
	case f.pg != nil:
		recs, err = f.readPGStream(streamOf(job))
	case f.filePath != "":
		recs, err = f.fileStore().Stream(ctxFor(f.t, 10*time.Second), streamOf(job))
	case f.etcd != nil:
		recs, err = f.readEtcdStream(streamOf(job))
	default:
		recs, err = f.backend.ReadStream(ctxFor(f.t, 10*time.Second), streamOf(job), 0)
	}
	if err != nil {
		f.t.Fatalf("reading stream of %s: %v", job, err)
	}
	out := make([]Entry, len(recs))
	for i, r := range recs {
		out[i] = Entry{TickRecord: r, At: entryTime(r.ID)}
	}
	return out
}

// workStore is the replicas' worker group ("onetick") on whichever
// store the fleet uses.
func (f *Fleet) workStore() worker.Inspector {
	f.t.Helper()
	switch {
	case f.pg != nil:
		return f.pg.WorkerStore("onetick")
	case f.filePath != "":
		return f.fileStore().WorkerStore("onetick")
	case f.etcd != nil:
		return f.etcd.WorkerStore("onetick")
	default:
		return f.backend.WorkerStore("onetick")
	}
}

// DoneRecords reads the done records of the given ticks (those that
// have one) of the replicas' worker group.
func (f *Fleet) DoneRecords(ticks []string) map[string]worker.DoneRecord {
	f.t.Helper()
	out, err := f.workStore().DoneRecords(ctxFor(f.t, 10*time.Second), ticks)
	if err != nil {
		f.t.Fatalf("reading the done records: %v", err)
	}
	return out
}

// DeadLetters reads every dead letter of the replicas' worker group.
func (f *Fleet) DeadLetters() []worker.DeadLetter {
	f.t.Helper()
	ws := f.workStore()
	var out []worker.DeadLetter
	after := ""
	for {
		ds, err := ws.DeadLetters(ctxFor(f.t, 10*time.Second), after, 100)
		if err != nil {
			f.t.Fatalf("reading the dead letters: %v", err)
		}
		out = append(out, ds...)
		if len(ds) < 100 {
			return out
		}
		after = ds[len(ds)-1].ID
	}
}

// ReadStreams reads every job's stream.
func (f *Fleet) ReadStreams() map[string][]Entry {
	out := map[string][]Entry{}
	for _, j := range allJobs {
		out[j] = f.ReadStream(j)
	}
	return out
}

// Span is what one term fired of one job.
type Span struct {
	Term            string
	Epoch           onetick.Epoch
	First, Last     onetick.Slot
	FirstAt, LastAt time.Time // Redis time of the first and last XADD
	Count           int
}

// Gap is a run of missing slots between two fired ones.
type Gap struct {
	After, Before    onetick.Slot // the fired slots around the gap
	Missing          int
	FromTerm, ToTerm string
}

// Analysis of one job's stream.
type Analysis struct {
	Job        string
	Entries    []Entry
	Duplicates []onetick.Slot // one element per extra occurrence
	Missed     []onetick.Slot // expected slots between first and last fired that are absent
	Gaps       []Gap
	Terms      []*Span // in order of first appearance
	Early      []Entry // appended more than the tolerance before their slot
	MaxLate    Entry   // the entry appended longest after its slot
	OutOfOrder int     // entries whose slot is not after the previous entry's
}

// earlyTolerance is the store's clock tolerance for early slots.
const earlyTolerance = 100 * time.Millisecond

// Analyze computes duplicates, missed slots, terms and early fires of a
// stream of a job that fires every step.
func Analyze(job string, entries []Entry, step time.Duration) *Analysis {
	a := &Analysis{Job: job, Entries: entries}
	st := onetick.Slot(step.Milliseconds())
	seen := map[onetick.Slot]int{}
	terms := map[string]*Span{}
	for i, e := range entries {
		seen[e.Slot]++
		if seen[e.Slot] > 1 {
			a.Duplicates = append(a.Duplicates, e.Slot)
		}
		if i > 0 && e.Slot <= entries[i-1].Slot {
			a.OutOfOrder++
		}
		if i == 0 || e.At.Sub(e.Slot.Time()) > a.MaxLate.At.Sub(a.MaxLate.Slot.Time()) {
			a.MaxLate = e
		}
		if e.At.Before(e.Slot.Time().Add(-earlyTolerance)) {
			a.Early = append(a.Early, e)
		}
		sp := terms[e.Term()]
		if sp == nil {
			sp = &Span{Term: e.Term(), Epoch: e.Epoch, First: e.Slot, FirstAt: e.At}
			terms[e.Term()] = sp
			a.Terms = append(a.Terms, sp)
		}
		sp.Count++
		sp.First = min(sp.First, e.Slot)
		sp.Last = max(sp.Last, e.Slot)
		if e.At.Before(sp.FirstAt) {
			sp.FirstAt = e.At
		}
		if e.At.After(sp.LastAt) {
			sp.LastAt = e.At
		}
	}
	if len(entries) == 0 {
		return a
	}
	// Missing slots, and the gaps they form (with the terms around them).
	slots := make([]onetick.Slot, 0, len(seen))
	for s := range seen {
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, k int) bool { return slots[i] < slots[k] })
	termOf := map[onetick.Slot]string{}
	for _, e := range entries {
		if _, ok := termOf[e.Slot]; !ok {
			termOf[e.Slot] = e.Term()
		}
	}
	for i := 1; i < len(slots); i++ {
		prev, cur := slots[i-1], slots[i]
		n := 0
		for s := prev + st; s < cur; s += st {
			a.Missed = append(a.Missed, s)
			n++
		}
		if n > 0 {
			a.Gaps = append(a.Gaps, Gap{After: prev, Before: cur, Missing: n, FromTerm: termOf[prev], ToTerm: termOf[cur]})
		}
	}
	return a
}

// Late is how long after its slot the latest entry was appended.
func (a *Analysis) Late() time.Duration { return a.MaxLate.At.Sub(a.MaxLate.Slot.Time()) }

// SpanOfEpoch returns the span of the term with the given epoch, or nil
// (for fleets whose epochs do not repeat).
func (a *Analysis) SpanOfEpoch(e int64) *Span {
	for _, s := range a.Terms {
		if int64(s.Epoch) == e {
			return s
		}
	}
	return nil
}

// String summarises the analysis for logs.
func (a *Analysis) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d entries, %d duplicates, %d missed, %d early, latest append %s after its slot (%s by %s), terms:",
		a.Job, len(a.Entries), len(a.Duplicates), len(a.Missed), len(a.Early), a.Late(), a.MaxLate.Slot.Time().Format("15:04:05"), a.MaxLate.Term())
	for _, s := range a.Terms {
		fmt.Fprintf(&b, " [%s %d slots %s..%s, appended %s..%s]", s.Term, s.Count, s.First.Time().Format("15:04:05"), s.Last.Time().Format("15:04:05"),
			s.FirstAt.UTC().Format("15:04:05.000"), s.LastAt.UTC().Format("15:04:05.000"))
	}
	for _, g := range a.Gaps {
		fmt.Fprintf(&b, " gap(%d after %s, %s->%s)", g.Missing, g.After.Time().Format("15:04:05"), g.FromTerm, g.ToTerm)
	}
	return b.String()
}

// AnalyzeAll reads and analyses every job's stream.
func (f *Fleet) AnalyzeAll() map[string]*Analysis {
	out := map[string]*Analysis{}
	for _, j := range allJobs {
		out[j] = Analyze(j, f.ReadStream(j), interval)
		f.t.Log(out[j])
	}
	return out
}

// CheckInvariants asserts what holds in every scenario whose store keeps
// its writes: no duplicate, no early fire, slots in order; and, for the
// jobs listed in noMiss, no missed slot.
func CheckInvariants(t *testing.T, as map[string]*Analysis, noMiss ...string) {
	t.Helper()
	for _, j := range allJobs {
		a := as[j]
		if len(a.Entries) == 0 {
			t.Errorf("%s: no entries at all", j)
			continue
		}
		if len(a.Duplicates) > 0 {
			t.Errorf("%s: %d duplicate slots: %v", j, len(a.Duplicates), fmtSlots(a.Duplicates))
		}
		if len(a.Early) > 0 {
			t.Errorf("%s: %d entries appended more than %s before their slot, first: slot %s at %s", j, len(a.Early),
				earlyTolerance, a.Early[0].Slot, a.Early[0].At.UTC().Format("15:04:05.000"))
		}
		if a.OutOfOrder > 0 {
			t.Errorf("%s: %d entries out of slot order", j, a.OutOfOrder)
		}
	}
	for _, j := range noMiss {
		if a := as[j]; len(a.Missed) > 0 {
			t.Errorf("%s: %d missed slots: %v", j, len(a.Missed), fmtSlots(a.Missed))
		}
	}
}

func fmtSlots(ss []onetick.Slot) string {
	var parts []string
	for i, s := range ss {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(ss)-10))
			break
		}
		parts = append(parts, s.Time().Format("15:04:05.000"))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TotalDuplicates and TotalMissed sum over jobs.
func TotalDuplicates(as map[string]*Analysis) int {
	n := 0
	for _, a := range as {
		n += len(a.Duplicates)
	}
	return n
}

// MissedSummary is "job N, ..." in job order.
func MissedSummary(as map[string]*Analysis) string {
	var parts []string
	for _, j := range allJobs {
		if a, ok := as[j]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", j, len(a.Missed)))
		}
	}
	return strings.Join(parts, ", ")
}

// Snapshot waits for a quiet instant (mid-second: the 1-second jobs fire
// at whole seconds) and reads the streams and every live replica's
// metrics there, retrying until no entry was appended while scraping, so
// the counters and the streams describe the same state.
func (f *Fleet) Snapshot() map[string]*Analysis {
	f.t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		WaitPhase(450 * time.Millisecond)
		before := f.streamLens()
		for _, r := range f.Live() {
			f.Scrape(r)
		}
		if after := f.streamLens(); after == before {
			return f.AnalyzeAll()
		}
	}
	f.t.Fatal("streams kept changing while scraping: no consistent snapshot")
	return nil
}

func (f *Fleet) streamLens() string {
	var b strings.Builder
	for _, j := range allJobs {
		if f.client == nil { // PostgreSQL, the file store
			fmt.Fprintf(&b, "%d,", len(f.ReadStream(j)))
			continue
		}
		n, err := f.client.XLen(ctxFor(f.t, 5*time.Second), streamOf(j)).Result()
		if err != nil {
			f.t.Fatalf("XLEN %s: %v", j, err)
		}
		fmt.Fprintf(&b, "%d,", n)
	}
	return b.String()
}

// CheckMissedCounters asserts that, per job, scheduler_job_missed_ticks_total
// summed over every replica of the fleet (as last scraped: just before a
// kill or stop, or in the final Snapshot) equals the slots the stream
// misses: every skipped slot is counted, once. The fleet totals by
// preference, which the alerts read, must add up to the same.
func (f *Fleet) CheckMissedCounters(as map[string]*Analysis) {
	f.t.Helper()
	byPrefer := map[string]float64{}
	for _, j := range allJobs {
		counted := f.SumCounter("scheduler_job_missed_ticks_total", j)
		if int(counted) != len(as[j].Missed) {
			f.t.Errorf("%s: scheduler_job_missed_ticks_total summed over replicas = %v, but the stream misses %d slots %v",
				j, counted, len(as[j].Missed), fmtSlots(as[j].Missed))
		}
		byPrefer[jobPrefer[j]] += counted
	}
	for p, want := range byPrefer {
		series := `scheduler_missed_ticks_total{prefer="` + p + `"}`
		if got := f.SumSeries(series); got != want {
			f.t.Errorf("%s summed over replicas = %v, but the jobs that prefer %s count %v", series, got, p, want)
		}
	}
}
