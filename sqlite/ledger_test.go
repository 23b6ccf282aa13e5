package sqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// TestLedgerDamagedRecord: a ledger record made unreadable by hand is
// named by a read, and holds no worker back: its next step replaces it.
func TestLedgerDamagedRecord(t *testing.T) {
	t.Parallel()
	b, path := open(t)
	ctx := context.Background()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tk := onetick.Tick{Job: "j", Slot: onetick.SlotOf(time.Now().Add(-time.Minute)), Stream: "s", Payload: "{}", Retention: time.Hour}
	if res, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	operator(t, path, "UPDATE runs SET doc = '{not json' WHERE tick = ?", tk.ID())
	if _, _, err := b.Run(ctx, "j", tk.ID()); err == nil || !strings.Contains(err.Error(), tk.ID()) {
		t.Fatalf("reading the damaged record: %v, want an error naming it", err)
	}
	s := b.WorkerStore("")
	ds, err := s.Fetch(ctx, "w", []string{"s"}, 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	res, err := s.Begin(ctx, "w", time.Minute, []worker.Start{{D: ds[0], Overlap: worker.OverlapAllow}})
	if err != nil || res.Admissions[0] != worker.Run {
		t.Fatalf("begin: %+v, %v", res, err)
	}
	r, ok, err := b.Run(ctx, "j", tk.ID())
	if err != nil || !ok || r.Fate != onetick.FateRunning || len(r.Events) != 1 || r.Events[0].Worker != "w" {
		t.Fatalf("record after the worker's step: %+v, %v, %v", r, ok, err)
	}
}
