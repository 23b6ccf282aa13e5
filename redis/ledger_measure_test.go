package redis_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
)

// TestLedgerMeasureBytes measures what the ledger's records take in
// Redis (MEMORY USAGE of its keys, every element sampled), 10 jobs of
// 1,000 records each, with 1, 3 and 8 events a record: the figures of
// docs/ledger.md. Run it with ONETICK_LEDGER_MEASURE=1 and -v.
func TestLedgerMeasureBytes(t *testing.T) {
	if os.Getenv("ONETICK_LEDGER_MEASURE") == "" {
		t.Skip("a measurement: set ONETICK_LEDGER_MEASURE=1")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	const jobs, per = 10, 1000
	exit := 0
	for _, events := range []int{1, 3, 8} {
		b := openLedger(t, srv, onetick.LedgerRetention{})
		g, err := b.Acquire(ctx, "replica-1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		base := onetick.SlotOf(time.Now().Add(-24 * time.Hour).Truncate(time.Minute))
		for j := 0; j < jobs; j++ {
			job := fmt.Sprintf("report-%02d", j)
			ticks := make([]onetick.Tick, per)
			for i := range ticks {
				ticks[i] = onetick.Tick{Job: job, Slot: base + onetick.Slot(i)*60000, Stream: "onetick:s", Payload: "{}", Retention: time.Hour}
			}
			if _, err := b.Claim(ctx, g.Lease, ticks); err != nil {
				t.Fatal(err)
			}
			for i := range ticks {
				var story []onetick.RunEvent
				switch events {
				case 3:
					story = []onetick.RunEvent{{What: onetick.EventStarted, Worker: "worker-1", Attempt: 1},
						{What: onetick.EventSucceeded, Worker: "worker-1", Attempt: 1, Result: onetick.Result{Exit: &exit, Duration: 1200 * time.Millisecond}}}
				case 8:
					for a := 1; a <= 3; a++ {
						story = append(story, onetick.RunEvent{What: onetick.EventStarted, Worker: "worker-1", Attempt: a},
							onetick.RunEvent{What: onetick.EventRetried, Worker: "worker-1", Attempt: a, Detail: "exit status 1"})
					}
					story = append(story, onetick.RunEvent{What: onetick.EventSucceeded, Worker: "worker-1", Attempt: 4,
						Result: onetick.Result{Exit: &exit, Duration: 1200 * time.Millisecond}})
				}
				for _, ev := range story {
					if err := b.NoteLog(ctx, job, ticks[i].Slot, ticks[i].ID(), ev); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if err := b.FoldLedger(ctx); err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, k := range ledgerKeys(t, b) {
			n, err := b.Client().MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		p, err := b.Runs(ctx, onetick.RunQuery{Job: "report-00", Limit: 1})
		if err != nil || len(p.Runs) != 1 || len(p.Runs[0].Events) != events {
			t.Fatalf("a record of %d events: %+v, %v", events, p.Runs, err)
		}
		t.Logf("%d events a record: %d bytes for %d records, %d B a record", events, total, jobs*per, total/(jobs*per))
	}
}
