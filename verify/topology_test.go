//go:build verify

package verify

// What the Sentinel and Cluster scenarios (s11, s12) share: a consumer
// that reads every stream entry from whichever primary it is connected
// to, and the measurements of one fault (duplicates and missed slots as
// the consumer saw them, entries it saw that the new primary lost, the
// replicas' leadership spans from their logs, WAIT and NOREPLICAS
// outcomes).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// The jobs of the topology scenarios: every 250 ms, one that skips what
// it cannot fire in time (grace 1ms, raised to the engine's floor of 1s)
// and one that catches up every slot.
const (
	quick         = 250 * time.Millisecond
	jobQuickMiss  = "q-missed"
	jobQuickDup   = "q-dup"
	topologyLease = `lease:
  ttl: 3s
  renew: 1s
http:
  listen: 127.0.0.1:0
jobs:
  - name: q-missed
    schedule: "@every 250ms"
    prefer: missed
    grace: 1ms
  - name: q-dup
    schedule: "@every 250ms"
    prefer: duplicate
`
)

var quickJobs = []string{jobQuickMiss, jobQuickDup}

// seenEntry is one stream entry as the consumer read it.
type seenEntry struct {
	Job     string
	Slot    onetick.Slot
	Epoch   int64
	Replica string
	ID      string
	At      time.Time // the XADD instant (the entry id's milliseconds)
	From    string    // the node it was read from
}

// consumer reads the jobs' streams with XREAD from the last id it saw,
// from the primary of the moment: resolve names it (asked again every
// 200 ms and after every error), or, for a cluster, client routes by key.
type consumer struct {
	streams []string
	resolve func(ctx context.Context) (string, error)
	client  goredis.UniversalClient
	pass    string

	stop, done chan struct{}
	mu         sync.Mutex
	entries    []seenEntry
	errs       []string
	last       map[string]string
}

func startConsumer(streams []string, resolve func(ctx context.Context) (string, error), client goredis.UniversalClient, password string) *consumer {
	c := &consumer{streams: streams, resolve: resolve, client: client, pass: password,
		stop: make(chan struct{}), done: make(chan struct{}), last: map[string]string{}}
	for _, s := range streams {
		c.last[s] = "0-0"
	}
	go c.run()
	return c
}

// close stops the consumer; it may be called more than once.
func (c *consumer) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *consumer) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, time.Now().UTC().Format("15:04:05.000")+" "+err.Error())
}

func (c *consumer) run() {
	defer close(c.done)
	var cl *goredis.Client
	var addr string
	var resolvedAt time.Time
	defer func() {
		if cl != nil {
			_ = cl.Close()
		}
	}()
	pause := func() bool {
		select {
		case <-c.stop:
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rc, from := c.client, "cluster"
		if c.resolve != nil {
			if cl == nil || time.Since(resolvedAt) > 200*time.Millisecond {
				a, err := c.resolve(ctx)
				resolvedAt = time.Now()
				switch {
				case err != nil:
					c.fail(fmt.Errorf("asking the sentinels: %w", err))
				case a != addr:
					if cl != nil {
						_ = cl.Close()
					}
					cl = goredis.NewClient(&goredis.Options{Addr: a, Password: c.pass, MaxRetries: -1, PoolSize: 1,
						DialTimeout: 300 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
					addr = a
				}
			}
			if cl == nil {
				cancel()
				if !pause() {
					return
				}
				continue
			}
			rc, from = cl, addr
		}
		args := &goredis.XReadArgs{Count: 1000, Block: 100 * time.Millisecond}
		c.mu.Lock()
		args.Streams = append(args.Streams, c.streams...)
		for _, s := range c.streams {
			args.Streams = append(args.Streams, c.last[s])
		}
		c.mu.Unlock()
		res, err := rc.XRead(ctx, args).Result()
		cancel()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			c.fail(fmt.Errorf("XREAD from %s: %w", from, err))
			resolvedAt = time.Time{}
			if !pause() {
				return
			}
			continue
		}
		c.mu.Lock()
		for _, st := range res {
			for _, m := range st.Messages {
				str := func(k string) string { s, _ := m.Values[k].(string); return s }
				slot, _ := strconv.ParseInt(str("slot"), 10, 64)
				epoch, _ := strconv.ParseInt(str("epoch"), 10, 64)
				c.entries = append(c.entries, seenEntry{Job: str("job"), Slot: onetick.Slot(slot), Epoch: epoch,
					Replica: str("replica"), ID: m.ID, At: entryTime(m.ID), From: from})
				c.last[st.Stream] = m.ID
			}
		}
		c.mu.Unlock()
	}
}

// Entries is a copy of what the consumer has read so far.
func (c *consumer) Entries() []seenEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]seenEntry(nil), c.entries...)
}

// Errors is a copy of the read errors so far.
func (c *consumer) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// awaitFlow waits up to d until every job has at least n entries
// appended after since and read from a node accept allows ("" = any), and
// returns the append time of the first such entry.
func (c *consumer) awaitFlow(d time.Duration, since time.Time, n int, accept func(from string) bool) (time.Time, bool) {
	var first time.Time
	ok := Poll(d, 50*time.Millisecond, func() bool {
		count := map[string]int{}
		first = time.Time{}
		for _, e := range c.Entries() {
			if e.At.After(since) && (accept == nil || accept(e.From)) {
				count[e.Job]++
				if first.IsZero() || e.At.Before(first) {
					first = e.At
				}
			}
		}
		for _, j := range quickJobs {
			if count[j] < n {
				return false
			}
		}
		return true
	})
	return first, ok
}

// leadSpan is one term as a replica's log tells it: from "became leader"
// to "stopped leading" (or the end of the run).
type leadSpan struct {
	Replica  string
	Epoch    int64
	From, To time.Time
	Reason   string
}

func leadSpans(f *Fleet, end time.Time) []leadSpan {
	var out []leadSpan
	for _, r := range f.All() {
		var open *leadSpan
		for _, l := range r.Lines() {
			switch l.Msg {
			case "became leader":
				open = &leadSpan{Replica: r.Name, Epoch: l.Int("epoch"), From: l.Time, To: end}
			case "stopped leading":
				if open != nil {
					open.To, open.Reason = l.Time, l.Str("reason")
					out = append(out, *open)
					open = nil
				}
			}
		}
		if open != nil {
			out = append(out, *open)
		}
	}
	return out
}

// overlap is the total time within [from, to) during which two replicas
// believed they led at once.
func overlap(spans []leadSpan, from, to time.Time) time.Duration {
	var total time.Duration
	for i := range spans {
		for k := i + 1; k < len(spans); k++ {
			a, b := spans[i], spans[k]
			if a.Replica == b.Replica {
				continue
			}
			s := maxTime(maxTime(a.From, b.From), from)
			e := minTime(minTime(a.To, b.To), to)
			if e.After(s) {
				total += e.Sub(s)
			}
		}
	}
	return total
}

// leaderless is the longest stretch within [from, to) during which no
// replica believed it led.
func leaderless(spans []leadSpan, from, to time.Time) time.Duration {
	sorted := append([]leadSpan(nil), spans...)
	sort.Slice(sorted, func(i, k int) bool { return sorted[i].From.Before(sorted[k].From) })
	var longest time.Duration
	cur := from // covered up to here
	for _, s := range sorted {
		if !s.To.After(cur) {
			continue
		}
		if s.From.After(cur) {
			gapEnd := minTime(s.From, to)
			if d := gapEnd.Sub(cur); d > longest {
				longest = d
			}
		}
		cur = maxTime(cur, s.To)
		if !cur.Before(to) {
			return longest
		}
	}
	if d := to.Sub(cur); d > longest {
		longest = d
	}
	return longest
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// logCounts counts, over every replica's lines within [from, to): WAIT
// shortfalls (a write not acknowledged by enough replicas), step-downs
// after an unacknowledged claim, NOREPLICAS refusals, claims fenced, and
// terms begun.
type logCounts struct {
	Wait, WaitStepDown, NoReplicas, Fenced, Became int
}

func countLogs(f *Fleet, from, to time.Time) logCounts {
	var c logCounts
	for _, r := range f.All() {
		for _, l := range r.Lines() {
			if l.Time.Before(from) || !l.Time.Before(to) {
				continue
			}
			switch {
			case l.Msg == "claim not acknowledged by enough replicas; stepping down":
				c.WaitStepDown++
			case strings.Contains(l.Str("err"), "not acknowledged by enough replicas"):
				c.Wait++
			}
			if strings.Contains(l.Raw, "NOREPLICAS") {
				c.NoReplicas++
			}
			if strings.HasPrefix(l.Msg, "claim fenced by the store") {
				c.Fenced++
			}
			if l.Msg == "became leader" {
				c.Became++
			}
		}
	}
	return c
}

// faultEvent is one injected fault and what followed it.
type faultEvent struct {
	Fault    string // the fault's key
	Round    int
	Start    time.Time // fault injected
	Switched time.Time // a new primary was named (zero: none)
	FirstNew time.Time // first entry appended on the new primary
	Settled  time.Time // ticks flowing again on the settled topology
	OldNode  string
	NewNode  string
	Lost     []seenEntry // seen by the consumer, absent on the new primary
	Note     string
	// Counted is, per job, how many slots the replicas counted as missed
	// (scheduler_job_missed_ticks_total) from the fault until Settled.
	Counted map[string]int
	before  map[string]float64
}

// missedCounters sums each job's missed counter over the live replicas.
func missedCounters(f *Fleet) map[string]float64 {
	out := map[string]float64{}
	for _, r := range f.Live() {
		m, err := f.scrape(r)
		if err != nil {
			continue
		}
		for _, j := range quickJobs {
			out[j] += m.Job("scheduler_job_missed_ticks_total", j)
		}
	}
	return out
}

// begin records the counters before the fault.
func (e *faultEvent) begin(f *Fleet) { e.before = missedCounters(f) }

// end records how many missed slots the replicas counted since begin.
func (e *faultEvent) end(f *Fleet) {
	after := missedCounters(f)
	e.Counted = map[string]int{}
	for _, j := range quickJobs {
		e.Counted[j] = int(after[j] - e.before[j])
	}
}

// eventStats is what one fault's window holds: duplicates (a job and
// slot seen a second time, by the second one's append time) and missed
// slots (by slot time) between this fault and the next.
type eventStats struct {
	Dups     map[string]int
	Missed   map[string]int
	Overlap  time.Duration
	Gap      time.Duration // longest leaderless stretch in [Start, Settled]
	Logs     logCounts
	DupSlots []string
}

// analyzeEvents splits the run into one window per event, [start-1s,
// next start-1s), and measures each; the stretch before the first event
// is the steady state, measured as events[-1] (returned separately).
func analyzeEvents(f *Fleet, entries []seenEntry, events []*faultEvent, end time.Time) (steady eventStats, stats []eventStats) {
	bounds := make([]time.Time, len(events)+1)
	for i, e := range events {
		bounds[i] = e.Start.Add(-time.Second)
	}
	bounds[len(events)] = end
	window := func(t time.Time) int { // -1: before the first event
		for i := len(events) - 1; i >= 0; i-- {
			if !t.Before(bounds[i]) {
				return i
			}
		}
		return -1
	}
	stats = make([]eventStats, len(events))
	steady = eventStats{Dups: map[string]int{}, Missed: map[string]int{}}
	at := func(i int) *eventStats {
		if i < 0 {
			return &steady
		}
		return &stats[i]
	}
	for i := range stats {
		stats[i].Dups, stats[i].Missed = map[string]int{}, map[string]int{}
	}
	step := onetick.Slot(quick.Milliseconds())
	for _, j := range quickJobs {
		seen := map[onetick.Slot]int{}
		var slots []onetick.Slot
		for _, e := range entries {
			if e.Job != j {
				continue
			}
			seen[e.Slot]++
			if seen[e.Slot] == 1 {
				slots = append(slots, e.Slot)
				continue
			}
			s := at(window(e.At))
			s.Dups[j]++
			s.DupSlots = append(s.DupSlots, fmt.Sprintf("%s@%s (%s, epoch %d)", j, e.Slot.Time().UTC().Format("15:04:05.000"), e.Replica, e.Epoch))
		}
		sort.Slice(slots, func(a, b int) bool { return slots[a] < slots[b] })
		for k := 1; k < len(slots); k++ {
			for s := slots[k-1] + step; s < slots[k]; s += step {
				at(window(s.Time())).Missed[j]++
			}
		}
	}
	spans := leadSpans(f, end)
	steady.Overlap = overlap(spans, time.Time{}, bounds[0])
	steady.Logs = countLogs(f, time.Time{}, bounds[0])
	for i, e := range events {
		stats[i].Overlap = overlap(spans, bounds[i], bounds[i+1])
		stats[i].Gap = leaderless(spans, e.Start, e.Settled)
		stats[i].Logs = countLogs(f, bounds[i], bounds[i+1])
	}
	return steady, stats
}

// checkLoss compares what the consumer saw appended since from with what
// the primary of now has (read reads a stream there from an id on).
func checkLoss(t *testing.T, seen []seenEntry, from time.Time, streams map[string]string, read func(ctx context.Context, stream, start string) ([]goredis.XMessage, error)) []seenEntry {
	t.Helper()
	have := map[string]bool{}
	start := strconv.FormatInt(from.UnixMilli(), 10)
	for _, s := range streams {
		msgs, err := read(ctxFor(t, 10*time.Second), s, start)
		if err != nil {
			t.Fatalf("reading %s on the new primary: %v", s, err)
		}
		for _, m := range msgs {
			have[m.ID] = true
		}
	}
	var lost []seenEntry
	for _, e := range seen {
		if !e.At.Before(from) && !have[e.ID] {
			lost = append(lost, e)
		}
	}
	return lost
}

// faultRow is the report row and notes of one fault over its rounds.
// label says what FirstNew is ("first tick on the new primary").
func faultRow(t *testing.T, scenario, label string, events []*faultEvent, stats []eventStats, key string) *Row {
	r := &Row{Scenario: scenario, TimeLabel: "fault → " + label}
	missed := map[string]int{}
	var notes []string
	for i, e := range events {
		if e.Fault != key {
			continue
		}
		s := stats[i]
		r.Runs++
		for _, j := range quickJobs {
			r.Duplicates += s.Dups[j]
			missed[j] += s.Missed[j]
		}
		if !e.FirstNew.IsZero() {
			r.Times = append(r.Times, e.FirstNew.Sub(e.Start))
		}
		n := fmt.Sprintf("round %d: primary %s → %s", e.Round, e.OldNode, e.NewNode)
		if !e.Switched.IsZero() {
			n += fmt.Sprintf(", named %s after the fault", fmtDur(e.Switched.Sub(e.Start)))
		}
		if !e.FirstNew.IsZero() {
			n += fmt.Sprintf(", %s after %s", label, fmtDur(e.FirstNew.Sub(e.Start)))
		}
		n += fmt.Sprintf("; seen twice %d (%s %d, %s %d), missed %s %d / %s %d (counted by the replicas as missed: %d / %d); entries the consumer saw that the new primary lost: %d; longest leaderless stretch %s; two replicas leading at once %s; new terms %d; WAIT shortfalls %d, step-downs after an unacknowledged claim %d, NOREPLICAS %d, fenced claims %d",
			s.Dups[jobQuickMiss]+s.Dups[jobQuickDup], jobQuickMiss, s.Dups[jobQuickMiss], jobQuickDup, s.Dups[jobQuickDup],
			jobQuickMiss, s.Missed[jobQuickMiss], jobQuickDup, s.Missed[jobQuickDup], e.Counted[jobQuickMiss], e.Counted[jobQuickDup], len(e.Lost), fmtDur(s.Gap), fmtDur(s.Overlap),
			s.Logs.Became, s.Logs.Wait, s.Logs.WaitStepDown, s.Logs.NoReplicas, s.Logs.Fenced)
		if len(s.DupSlots) > 0 {
			show := s.DupSlots
			if len(show) > 4 {
				show = append(show[:4:4], fmt.Sprintf("... %d more", len(s.DupSlots)-4))
			}
			n += "; twice: " + strings.Join(show, ", ")
		}
		if e.Note != "" {
			n += "; " + e.Note
		}
		notes = append(notes, n+".")
		t.Logf("%s %s", scenario, n)
	}
	lost := 0
	for _, e := range events {
		if e.Fault == key {
			lost += len(e.Lost)
		}
	}
	r.Missed = fmt.Sprintf("%s %d, %s %d; read, then lost with the old primary: %d", jobQuickMiss, missed[jobQuickMiss], jobQuickDup, missed[jobQuickDup], lost)
	r.Notes = notes
	return r
}
