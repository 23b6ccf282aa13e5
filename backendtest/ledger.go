package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// The run ledger's cases (docs/ledger.md), for backends that implement
// onetick.Ledger; the others skip them.
var ledgerTests = []struct {
	name string
	fn   func(t *testing.T, h Harness, b onetick.Backend)
}{
	{"LedgerClaim", ledgerCase(testLedgerClaim)},
	{"LedgerPaused", ledgerCase(testLedgerPaused)},
	{"LedgerSkippedRange", ledgerCase(testLedgerSkipped)},
	{"LedgerManual", ledgerCase(testLedgerManual)},
	{"LedgerPaging", ledgerCase(testLedgerPaging)},
	{"LedgerFilter", ledgerCase(testLedgerFilter)},
	{"LedgerRetentionByCount", ledgerCase(testLedgerRetentionCount)},
	{"LedgerRetentionByAge", ledgerCase(testLedgerRetentionAge)},
	{"LedgerOff", ledgerCase(testLedgerOff)},
}

// ledgerCase runs fn on backends that keep a ledger.
func ledgerCase(fn func(*testing.T, Harness, onetick.Backend, onetick.Ledger)) func(*testing.T, Harness, onetick.Backend) {
	return func(t *testing.T, h Harness, b onetick.Backend) {
		lg, ok := b.(onetick.Ledger)
		if !ok {
			t.Skip("this backend keeps no run ledger")
		}
		fn(t, h, b, lg)
	}
}

// mustRun returns job's record of tick, failing when there is none.
func mustRun(t *testing.T, lg onetick.Ledger, job, tick string) onetick.Run {
	t.Helper()
	r, ok, err := lg.Run(ctxT(t), job, tick)
	if err != nil || !ok {
		t.Fatalf("record of %s: %v, %v", tick, ok, err)
	}
	if r.Job != job || r.Tick != tick || r.Updated.IsZero() || len(r.Events) == 0 {
		t.Fatalf("record of %s: %+v", tick, r)
	}
	return r
}

// mustRuns returns one page of q.
func mustRuns(t *testing.T, lg onetick.Ledger, q onetick.RunQuery) onetick.RunPage {
	t.Helper()
	p, err := lg.Runs(ctxT(t), q)
	if err != nil {
		t.Fatalf("runs %+v: %v", q, err)
	}
	return p
}

// whats lists the events of r.
func whats(r onetick.Run) []string {
	out := make([]string, len(r.Events))
	for i, e := range r.Events {
		out[i] = e.What
	}
	return out
}

// testLedgerClaim: a claimed slot has a record, enqueued by the claiming
// term; a retry of the claim adds nothing; a duplicate by another term
// adds nothing either.
func testLedgerClaim(t *testing.T, h Harness, b onetick.Backend, lg onetick.Ledger) {
	l := mustAcquire(t, b, "a", 30*time.Second)
	tk := tick("lc", pastSlot(time.Minute, time.Second), sk("lc"))
	for attempt := 0; attempt < 2; attempt++ {
		if o := mustClaim(t, b, l, tk); o[0] != onetick.Claimed {
			t.Fatalf("claim %d: %v", attempt, o)
		}
	}
	r := mustRun(t, lg, "lc", tk.ID())
	if r.Slot != tk.Slot || r.Kind != "" || r.Fate != onetick.FateEnqueued || len(r.Events) != 1 {
		t.Fatalf("record %+v: want one enqueued event", r)
	}
	if e := r.Events[0]; e.What != onetick.EventEnqueued || e.Epoch != l.Epoch || e.Replica != "a" || e.At.IsZero() {
		t.Fatalf("event %+v: want enqueued by epoch %d, replica a", e, l.Epoch)
	}
	h.Expire(t, b)
	l2 := mustAcquire(t, b, "b", 30*time.Second)
	if o := mustClaim(t, b, l2, tk); o[0] != onetick.Duplicate {
		t.Fatalf("claim by the next term: %v", o)
	}
	if r := mustRun(t, lg, "lc", tk.ID()); len(r.Events) != 1 {
		t.Fatalf("after a duplicate: events %v", whats(r))
	}
	if _, ok, err := lg.Run(ctxT(t), "lc", "lc:1"); ok || err != nil {
		t.Fatalf("record of a tick never claimed: %v, %v", ok, err)
	}
}

// testLedgerPaused: a slot answered Paused has a record, paused, once.
func testLedgerPaused(t *testing.T, _ Harness, b onetick.Backend, lg onetick.Ledger) {
	l := mustAcquire(t, b, "a", 30*time.Second)
	c, err := b.Pause(ctxT(t), "lp", alice)
	if err != nil {
		t.Fatal(err)
	}
	tk := tick("lp", onetick.SlotOf(c.Intervals[0].Since), sk("lp"))
	for attempt := 0; attempt < 2; attempt++ {
		if o := mustClaim(t, b, l, tk); o[0] != onetick.Paused {
			t.Fatalf("claim %d: %v", attempt, o)
		}
	}
	r := mustRun(t, lg, "lp", tk.ID())
	if r.Fate != onetick.FatePaused || len(r.Events) != 1 || r.Events[0].What != onetick.EventPaused || r.Events[0].Epoch != l.Epoch {
		t.Fatalf("record %+v: want one paused event", r)
	}
}

// testLedgerSkipped: the ranges a tick's claim carries (Tick.Skipped) are
// recorded with their count and reason, once, by a claim that answers
// Claimed or Paused; a duplicate's ranges are not recorded.
func testLedgerSkipped(t *testing.T, _ Harness, b onetick.Backend, lg onetick.Ledger) {
	l := mustAcquire(t, b, "a", 30*time.Second)
	base := pastSlot(time.Hour, time.Minute)
	tk := tick("ls", base+10*60000, sk("ls"))
	tk.Retention = 2 * time.Hour // the retry below finds the tick's record on every store (Redis keeps it retention past its slot)
	tk.Skipped = []onetick.SkipRange{
		{From: base, Through: base + 4*60000, Count: 5, Reason: onetick.SkipGrace},
		{From: base + 5*60000, Through: base + 9*60000, Count: 5, Reason: onetick.SkipMaxCatchup},
	}
	for attempt := 0; attempt < 2; attempt++ {
		if o := mustClaim(t, b, l, tk); o[0] != onetick.Claimed {
			t.Fatalf("claim %d: %v", attempt, o)
		}
	}
	dup := tick("ls", base+5*60000, sk("ls"))
	dup.Skipped = []onetick.SkipRange{{From: base, Through: base + 60000, Count: 2, Reason: onetick.SkipGrace}}
	if o := mustClaim(t, b, l, dup); o[0] != onetick.Duplicate {
		t.Fatalf("claim of a passed slot: %v", o)
	}
	p := mustRuns(t, lg, onetick.RunQuery{Job: "ls", Fate: onetick.FateSkipped})
	if len(p.Runs) != 2 || p.Next != "" {
		t.Fatalf("skipped records %+v: want the two ranges", p)
	}
	// Newest slot first: the max_catchup range, then the grace range.
	for i, want := range []onetick.SkipRange{tk.Skipped[1], tk.Skipped[0]} {
		r := p.Runs[i]
		if r.Slot != want.From || r.Through != want.Through || r.Count != want.Count || r.Reason != want.Reason ||
			len(r.Events) != 1 || r.Events[0].What != onetick.EventSkipped || r.Events[0].Epoch != l.Epoch {
			t.Fatalf("record %d: %+v, want range %+v skipped once", i, r, want)
		}
		if r.Tick == tk.ID() || r.Tick == onetick.TickID("ls", want.From) {
			t.Fatalf("record %d: identity %s is a tick's", i, r.Tick)
		}
	}
	if r := mustRun(t, lg, "ls", tk.ID()); r.Fate != onetick.FateEnqueued || len(r.Events) != 1 {
		t.Fatalf("the tick's record %+v", r)
	}
}

// testLedgerManual: triggers and backfilled slots have records of their
// kind, enqueued by the actor's token; a repeated trigger adds nothing.
func testLedgerManual(t *testing.T, _ Harness, b onetick.Backend, lg onetick.Ledger) {
	ctx := ctxT(t)
	tr := onetick.Tick{Job: "lm", Key: "req-1", Stream: sk("lm"), Payload: "{}", Retention: time.Hour}
	for attempt := 0; attempt < 2; attempt++ {
		if _, err := b.Enqueue(ctx, []onetick.Tick{tr}, alice); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRun(t, lg, "lm", tr.ID())
	if r.Kind != onetick.KindTrigger || r.Fate != onetick.FateEnqueued || len(r.Events) != 1 || r.Slot <= 0 {
		t.Fatalf("trigger's record %+v", r)
	}
	if e := r.Events[0]; e.What != onetick.EventEnqueued || e.Replica == "" {
		t.Fatalf("trigger's event %+v: want enqueued, naming who", e)
	}
	bf := onetick.Tick{Job: "lm", Slot: pastSlot(time.Hour, time.Minute), Stream: sk("lm"), Payload: "{}", Retention: time.Hour}
	if res, err := b.Enqueue(ctx, []onetick.Tick{bf}, alice); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	if r := mustRun(t, lg, "lm", bf.ID()); r.Kind != onetick.KindBackfill || r.Slot != bf.Slot || r.Fate != onetick.FateEnqueued {
		t.Fatalf("backfill's record %+v", r)
	}
	if p := mustRuns(t, lg, onetick.RunQuery{Job: "lm"}); len(p.Runs) != 2 || p.Runs[0].Kind != onetick.KindTrigger {
		t.Fatalf("records %+v: want the trigger (newer slot), then the backfill", p.Runs)
	}
}

// testLedgerPaging: pages are newest slot first, a page's Next continues
// it, no record comes twice, the last page has no Next, and a cursor no
// page gave is an error.
func testLedgerPaging(t *testing.T, _ Harness, b onetick.Backend, lg onetick.Ledger) {
	ctx := ctxT(t)
	l := mustAcquire(t, b, "a", 30*time.Second)
	base := pastSlot(time.Hour, time.Minute)
	var ticks []onetick.Tick
	for i := 0; i < 25; i++ {
		ticks = append(ticks, tick("pg", base+onetick.Slot(i)*60000, sk("pg")))
	}
	mustClaim(t, b, l, ticks...)
	// Another job's records are not in this job's pages.
	mustClaim(t, b, l, tick("other", base, sk("pg")))
	if _, err := b.Enqueue(ctx, []onetick.Tick{{Job: "pg", Key: "k", Stream: sk("pg"), Payload: "{}", Retention: time.Hour}}, alice); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var order []onetick.Run
	q := onetick.RunQuery{Job: "pg", Limit: 10}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 26 records by 10")
		}
		p := mustRuns(t, lg, q)
		for _, r := range p.Runs {
			if seen[r.Tick] || r.Job != "pg" {
				t.Fatalf("record %s twice, or of another job (%s)", r.Tick, r.Job)
			}
			seen[r.Tick] = true
			order = append(order, r)
		}
		if p.Next == "" {
			if len(p.Runs) != 6 {
				t.Fatalf("last page has %d records, want 6", len(p.Runs))
			}
			break
		}
		if len(p.Runs) != 10 {
			t.Fatalf("page of %d records with a next page, want 10", len(p.Runs))
		}
		q.After = p.Next
	}
	if len(order) != 26 || order[0].Kind != onetick.KindTrigger {
		t.Fatalf("%d records, first %+v: want 26, the trigger (slot now) first", len(order), order[0])
	}
	for i := 1; i < len(order); i++ {
		if order[i].Slot >= order[i-1].Slot {
			t.Fatalf("record %d (slot %d) after slot %d: want newest first", i, order[i].Slot, order[i-1].Slot)
		}
	}
	if p := mustRuns(t, lg, onetick.RunQuery{Job: "pg"}); len(p.Runs) != 26 || p.Next != "" {
		t.Fatalf("default limit: %d records, next %q", len(p.Runs), p.Next)
	}
	if p := mustRuns(t, lg, onetick.RunQuery{Job: "nobody"}); len(p.Runs) != 0 || p.Next != "" {
		t.Fatalf("records of a job without any: %+v", p)
	}
	for _, bad := range []string{"not a cursor!", "bm90IGEgY3Vyc29y", "%"} {
		if _, err := lg.Runs(ctx, onetick.RunQuery{Job: "pg", After: bad}); !errors.Is(err, storekit.ErrBadCursor) {
			t.Fatalf("cursor %q: %v, want a bad cursor error", bad, err)
		}
	}
}

// testLedgerFilter: a query keeps the records of its fate and of its slot
// bounds (a skipped range by any slot in it).
func testLedgerFilter(t *testing.T, _ Harness, b onetick.Backend, lg onetick.Ledger) {
	l := mustAcquire(t, b, "a", 30*time.Second)
	base := pastSlot(time.Hour, time.Minute)
	var ticks []onetick.Tick
	for i := 5; i < 8; i++ {
		ticks = append(ticks, tick("lf", base+onetick.Slot(i)*60000, sk("lf")))
	}
	ticks[0].Skipped = []onetick.SkipRange{{From: base, Through: base + 4*60000, Count: 5, Reason: onetick.SkipGrace}}
	mustClaim(t, b, l, ticks...)
	for _, c := range []struct {
		q    onetick.RunQuery
		want int
	}{
		{onetick.RunQuery{Job: "lf", Fate: onetick.FateEnqueued}, 3},
		{onetick.RunQuery{Job: "lf", Fate: onetick.FateSkipped}, 1},
		{onetick.RunQuery{Job: "lf", Fate: onetick.FateDead}, 0},
		{onetick.RunQuery{Job: "lf", From: base + 6*60000}, 2},
		{onetick.RunQuery{Job: "lf", To: base + 5*60000}, 2},
		{onetick.RunQuery{Job: "lf", From: base + 3*60000, To: base + 5*60000}, 2},
		{onetick.RunQuery{Job: "lf", From: base + 6*60000, Fate: onetick.FateSkipped}, 0},
	} {
		p := mustRuns(t, lg, c.q)
		if len(p.Runs) != c.want {
			t.Fatalf("query %+v: %d records, want %d", c.q, len(p.Runs), c.want)
		}
		for _, r := range p.Runs {
			if c.q.Fate != "" && r.Fate != c.q.Fate {
				t.Fatalf("query %+v: record %+v", c.q, r)
			}
		}
	}
}

// retained is a fresh backend with ledger retention r, or skips.
func retained(t *testing.T, h Harness, r onetick.LedgerRetention) (onetick.Backend, onetick.Ledger) {
	t.Helper()
	if h.NewRetained == nil {
		t.Skip("the harness sets no ledger retention (Harness.NewRetained)")
	}
	b := h.NewRetained(t, r)
	t.Cleanup(func() { _ = b.Close() })
	return b, b.(onetick.Ledger)
}

// testLedgerRetentionCount: beyond MaxPerJob records of a job, claims of
// the job drop the oldest, at most 16 a claim; other jobs keep theirs.
func testLedgerRetentionCount(t *testing.T, h Harness, _ onetick.Backend, _ onetick.Ledger) {
	b, lg := retained(t, h, onetick.LedgerRetention{MaxPerJob: 3})
	l := mustAcquire(t, b, "a", 30*time.Second)
	base := pastSlot(time.Hour, time.Minute)
	var ticks []onetick.Tick
	for i := 0; i < 25; i++ {
		ticks = append(ticks, tick("rc", base+onetick.Slot(i)*60000, sk("rc")))
	}
	mustClaim(t, b, l, append(ticks[:20:20], tick("keep", base, sk("rc")))...)
	if p := mustRuns(t, lg, onetick.RunQuery{Job: "rc"}); len(p.Runs) != 20-16 {
		t.Fatalf("after a claim of 20: %d records, want 4 (16 trimmed a claim)", len(p.Runs))
	}
	mustClaim(t, b, l, ticks[20:]...)
	p := mustRuns(t, lg, onetick.RunQuery{Job: "rc"})
	if len(p.Runs) != 3 || p.Runs[0].Slot != ticks[24].Slot || p.Runs[2].Slot != ticks[22].Slot {
		t.Fatalf("records %+v: want the newest 3", p.Runs)
	}
	mustRun(t, lg, "keep", tick("keep", base, "").ID())
}

// testLedgerRetentionAge: records whose newest slot is older than MaxAge
// go with the next claim of their job.
func testLedgerRetentionAge(t *testing.T, h Harness, _ onetick.Backend, _ onetick.Ledger) {
	b, lg := retained(t, h, onetick.LedgerRetention{MaxAge: time.Hour})
	l := mustAcquire(t, b, "a", 30*time.Second)
	old := pastSlot(3*time.Hour, time.Minute)
	recent := pastSlot(time.Minute, time.Second)
	first := tick("ra", old, sk("ra"))
	// A range that starts old but ends within the age limit is kept.
	first.Skipped = []onetick.SkipRange{{From: old - 60000, Through: recent - 1000, Count: 2, Reason: onetick.SkipGrace}}
	mustClaim(t, b, l, first)
	mustClaim(t, b, l, tick("ra", recent, sk("ra")))
	p := mustRuns(t, lg, onetick.RunQuery{Job: "ra"})
	if len(p.Runs) != 2 || p.Runs[0].Slot != recent || p.Runs[1].Fate != onetick.FateSkipped {
		t.Fatalf("records %+v: want the recent tick and the range that ends recently", p.Runs)
	}
}

// testLedgerOff: a store whose retention is Off writes no record (a claim
// and a trigger still work) and its reads fail with ErrLedgerOff.
func testLedgerOff(t *testing.T, h Harness, _ onetick.Backend, _ onetick.Ledger) {
	b, lg := retained(t, h, onetick.LedgerRetention{Off: true})
	l := mustAcquire(t, b, "a", 30*time.Second)
	slot := pastSlot(time.Minute, time.Second)
	if out := mustClaim(t, b, l, tick("off", slot, sk("off"))); out[0] != onetick.Claimed {
		t.Fatalf("claim with the ledger off: %v", out)
	}
	if _, err := lg.Runs(ctxT(t), onetick.RunQuery{Job: "off"}); !errors.Is(err, onetick.ErrLedgerOff) {
		t.Fatalf("Runs with the ledger off: %v, want ErrLedgerOff", err)
	}
	if _, _, err := lg.Run(ctxT(t), "off", tick("off", slot, "").ID()); !errors.Is(err, onetick.ErrLedgerOff) {
		t.Fatalf("Run with the ledger off: %v, want ErrLedgerOff", err)
	}
}
