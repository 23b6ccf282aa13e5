package onetick_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// A backfill reads the run ledger page by page: a range holding more
// recorded slots than one page (onetick.MaxRunLimit) skips them all, and
// fills the one slot in the middle that was skipped.
func TestBackfillReadsEveryLedgerPage(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Now().Add(-48 * time.Hour))
	mem := memory.New(memory.Options{Clock: clock, Ledger: onetick.LedgerRetention{MaxPerJob: 5000}})
	defer mem.Close()
	every, err := cron.Parse("@every 1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := &onetick.Ops{Backend: mem, Jobs: []onetick.Job{{Name: "j", Schedule: every}}, Now: clock.Now}
	base := onetick.SlotOf(clock.Now().Add(-2 * onetick.MaxRunLimit * time.Minute).Truncate(time.Minute))
	at := func(m int) onetick.Slot { return base + onetick.Slot(m*60000) }
	l, err := mem.Acquire(ctx, "r", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const n, hole = onetick.MaxRunLimit + 500, 700
	var ticks []onetick.Tick
	for m := range n {
		if m == hole {
			continue
		}
		tk := onetick.Tick{Job: "j", Slot: at(m), Stream: "s", Payload: "{}", Retention: time.Minute}
		if m == hole+1 {
			tk.Skipped = []onetick.SkipRange{{From: at(hole), Through: at(hole), Count: 1, Reason: "grace"}}
		}
		ticks = append(ticks, tk)
	}
	for len(ticks) > 0 {
		k := min(len(ticks), 100)
		c, err := mem.Claim(ctx, l.Lease, ticks[:k])
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range c.Outcomes {
			if o != onetick.Claimed {
				t.Fatalf("claim of %v: %v", ticks[i].Slot, o)
			}
		}
		ticks = ticks[k:]
	}
	clock.Advance(time.Hour) // the ticks' records are gone, the ledger's are not
	r, err := ops.Backfill(ctx, "j", onetick.BackfillRequest{From: at(0).Time(), To: at(n - 1).Time(), Max: n}, onetick.Actor{Who: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Enqueued != 1 || r.Duplicates != n-1 || r.Outcomes[hole] != onetick.Claimed.String() {
		t.Fatalf("backfill of %d slots: %d enqueued, %d duplicates, slot %d %s; want only the skipped slot enqueued",
			n, r.Enqueued, r.Duplicates, hole, r.Outcomes[hole])
	}
}
