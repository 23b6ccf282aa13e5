package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/postgres"
)

// BenchmarkClaim claims and enqueues batches of ticks (one job per tick,
// each iteration the next slot) against the real PostgreSQL: one
// transaction per batch. ticks/s is the figure to compare with the Redis
// backend's BenchmarkClaim (same batches, streams and MaxLen).
func BenchmarkClaim(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { benchClaim(b, n, postgres.Options{}) })
	}
}

// BenchmarkClaimLedger is BenchmarkClaim with the run ledger on (at most
// 100 records a job, so that claims trim as they do at the limit) and
// off: the ledger's cost on a claim (docs/ledger.md).
func BenchmarkClaimLedger(b *testing.B) {
	for _, n := range []int{1, 100} {
		for _, off := range []bool{false, true} {
			name := fmt.Sprintf("batch=%d/ledger=on", n)
			if off {
				name = fmt.Sprintf("batch=%d/ledger=off", n)
			}
			b.Run(name, func(b *testing.B) {
				benchClaim(b, n, postgres.Options{Ledger: onetick.LedgerRetention{MaxPerJob: 100, Off: off}})
			})
		}
	}
}

func benchClaim(b *testing.B, n int, o postgres.Options) {
	ctx := context.Background()
	be := openWith(b, o)
	defer be.Close()
	g, err := be.Acquire(ctx, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ticks := make([]onetick.Tick, n)
	for i := range ticks {
		ticks[i] = onetick.Tick{Job: fmt.Sprintf("job-%05d", i), Stream: fmt.Sprintf("s:%d", i%16),
			Payload: `{"task":"bench"}`, Retention: 3 * time.Second, MaxLen: 1000}
	}
	base := onetick.SlotOf(time.Now().Add(-24 * time.Hour))
	b.ResetTimer()
	start := time.Now()
	for it := 0; it < b.N; it++ {
		for i := range ticks {
			ticks[i].Slot = base + onetick.Slot(it)
		}
		res, err := be.Claim(ctx, g.Lease, ticks)
		if err != nil {
			b.Fatal(err)
		}
		if res.Outcomes[0] != onetick.Claimed {
			b.Fatalf("outcome %v", res.Outcomes[0])
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "ticks/s")
}

// BenchmarkProduce is one leader term per claim of one tick (acquire,
// claim, release): what the worker suite's producer does.
func BenchmarkProduce(b *testing.B) {
	ctx := context.Background()
	be := open(b)
	defer be.Close()
	base := onetick.SlotOf(time.Now().Add(-24 * time.Hour))
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		g, err := be.Acquire(ctx, "p", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := be.Claim(ctx, g.Lease, []onetick.Tick{{Job: "j", Slot: base + onetick.Slot(it), Stream: "s", Payload: "{}", Retention: time.Minute}}); err != nil {
			b.Fatal(err)
		}
		if err := be.Release(ctx, g.Lease); err != nil {
			b.Fatal(err)
		}
	}
}
