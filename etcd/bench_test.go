package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/internal/etcdtest"
)

// BenchmarkClaim claims batches of ticks (one job per tick, each
// iteration the next slot) against a real etcd started for it, with the
// same batches, streams and MaxLen as the Redis and PostgreSQL
// backends' BenchmarkClaim. etcd's default --max-txn-ops (128) splits a
// batch of more than about 25 new jobs into several transactions.
func BenchmarkClaim(b *testing.B) {
	s := etcdtest.Start(b)
	for _, n := range []int{1, 100, 2000} {
		for _, off := range []bool{false, true} {
			name := fmt.Sprintf("batch=%d/ledger=on", n)
			if off {
				name = fmt.Sprintf("batch=%d/ledger=off", n)
			}
			b.Run(name, func(b *testing.B) { benchClaim(b, s, n, off) })
		}
	}
}

func benchClaim(b *testing.B, s *etcdtest.Server, n int, ledgerOff bool) {
	ctx := context.Background()
	be := open(b, s, etcd.Options{Ledger: onetick.LedgerRetention{Off: ledgerOff}})
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
