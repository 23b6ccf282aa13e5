package onetick_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// A backfill fills what was missed: a slot the run ledger records as
// enqueued (here: claimed, its tick record long expired) is not enqueued
// again, a skipped one is; a dry run says which is which; Again enqueues
// the recorded slots too, and the store still refuses one whose tick it
// holds.
func TestBackfillSkipsSlotsTheLedgerRecords(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Now().Add(-4 * time.Hour))
	mem := memory.New(memory.Options{Clock: clock})
	every, err := cron.Parse("@every 1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := &onetick.Ops{Backend: mem, Jobs: []onetick.Job{{Name: "j", Schedule: every}}, Now: clock.Now}
	base := onetick.SlotOf(clock.Now().Add(-time.Hour).Truncate(time.Minute))
	at := func(m int) onetick.Slot { return base + onetick.Slot(m*60000) }

	l, err := mem.Acquire(ctx, "r", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Slot 1 claimed with a record that expired long ago; slot 3 claimed
	// (its record kept), skipping slot 2.
	c, err := mem.Claim(ctx, l.Lease, []onetick.Tick{{Job: "j", Slot: at(1), Stream: "s", Payload: "{}", Retention: time.Minute}})
	if err != nil || c.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim of slot 1: %+v, %v", c, err)
	}
	c, err = mem.Claim(ctx, l.Lease, []onetick.Tick{{Job: "j", Slot: at(3), Stream: "s", Payload: "{}", Retention: 24 * time.Hour,
		Skipped: []onetick.SkipRange{{From: at(2), Through: at(2), Count: 1, Reason: "grace"}}}})
	if err != nil || c.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim of slot 3: %+v, %v", c, err)
	}

	clock.Advance(2 * time.Hour) // slot 1's tick record is gone, its ledger record is not
	who := onetick.Actor{Who: "t"}
	req := onetick.BackfillRequest{From: at(0).Time(), To: at(4).Time(), DryRun: true}
	want := func(what string, r onetick.BackfillResult, outcomes []string, enq, dup int) {
		t.Helper()
		if !slices.Equal(r.Outcomes, outcomes) || r.Enqueued != enq || r.Duplicates != dup || r.Other != 0 {
			t.Fatalf("%s: %+v; want outcomes %v, %d enqueued, %d duplicates", what, r, outcomes, enq, dup)
		}
	}
	w, d, cl := onetick.WouldEnqueue, onetick.Duplicate.String(), onetick.Claimed.String()
	r, err := ops.Backfill(ctx, "j", req, who)
	if err != nil {
		t.Fatal(err)
	}
	want("dry run", r, []string{w, d, w, d, w}, 0, 2)

	req.DryRun = false
	if r, err = ops.Backfill(ctx, "j", req, who); err != nil {
		t.Fatal(err)
	}
	want("backfill", r, []string{cl, d, cl, d, cl}, 3, 2)
	if r, err = ops.Backfill(ctx, "j", req, who); err != nil {
		t.Fatal(err)
	}
	want("repeated backfill", r, []string{d, d, d, d, d}, 0, 5)

	req.Again = true
	if r, err = ops.Backfill(ctx, "j", req, who); err != nil {
		t.Fatal(err)
	}
	want("backfill again", r, []string{d, cl, d, d, d}, 1, 4)

	run, ok, err := mem.Run(ctx, "j", onetick.TickID("j", at(2)))
	if err != nil || !ok || run.Kind != onetick.KindBackfill || run.Fate != onetick.FateEnqueued {
		t.Fatalf("the skipped slot after the backfill: %+v, %v, %v", run, ok, err)
	}
}
