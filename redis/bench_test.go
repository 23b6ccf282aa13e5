package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// BenchmarkClaim claims and enqueues batches of ticks (one job per tick,
// each iteration the next slot) against a real redis-server: one script
// call per batch. ticks/s is the figure the README quotes.
func BenchmarkClaim(b *testing.B) {
	srv := redistest.Start(b)
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			ctx := context.Background()
			if err := srv.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			be, err := redis.Open(srv.URL(), redis.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			benchClaims(b, be, "", n)
		})
	}
}

// BenchmarkClaimCluster is BenchmarkClaim against a Redis Cluster of
// three primaries started by the benchmark (no replicas: the figure is
// the cost of the cluster client and of running the script on the node
// of the prefix's hash tag). The streams carry that hash tag, as
// `onetick validate` requires of a cluster configuration; one node
// serves every key of one prefix, so a claim is still one script call.
func BenchmarkClaimCluster(b *testing.B) {
	cl := redistest.StartCluster(b, redistest.ClusterOptions{Primaries: 3})
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			ctx := context.Background()
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			o := cl.ClusterOptions()
			// A batch of 10,000 on a loaded machine can take longer than
			// go-redis's default 3 s read timeout; that is a slow call, not a
			// failure of the benchmark.
			o.ReadTimeout = 30 * time.Second
			c := goredis.NewClusterClient(o)
			defer c.Close()
			prefix := redis.HashTagged("onetick")
			be := redis.New(c, redis.Options{Prefix: prefix})
			benchClaims(b, be, prefix+":", n)
		})
	}
}

// benchClaims claims batches of n ticks (jobs spread over 16 streams named
// streamPrefix+"s:<i>"), each iteration the next slot, and reports ticks/s.
func benchClaims(b *testing.B, be *redis.Backend, streamPrefix string, n int) {
	ctx := context.Background()
	g, err := be.Acquire(ctx, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ticks := make([]onetick.Tick, n)
	for i := range ticks {
		ticks[i] = onetick.Tick{Job: fmt.Sprintf("job-%05d", i), Stream: fmt.Sprintf("%ss:%d", streamPrefix, i%16),
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

// BenchmarkClaimLedger is BenchmarkClaim with the run ledger off and
// kept, one job per tick. "on" is the claim alone: the claim script
// appends one log entry a call and the fold is left to later (the daemon
// folds every second); "on+fold" has the claims fold the log whenever it
// passes redis.FoldAfter() entries, so every record's fold (and
// retention's trims) is in the figure: the worst case, where claims come
// faster than the daemon folds.
func BenchmarkClaimLedger(b *testing.B) {
	srv := redistest.Start(b)
	for _, n := range []int{1, 100} {
		for _, mode := range []string{"off", "on", "on+fold"} {
			b.Run(fmt.Sprintf("batch=%d/ledger=%s", n, mode), func(b *testing.B) {
				if err := srv.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
				if mode == "on" {
					defer redis.SetFoldAfter(1 << 40)()
				}
				be, err := redis.Open(srv.URL(), redis.Options{Ledger: onetick.LedgerRetention{Off: mode == "off"}})
				if err != nil {
					b.Fatal(err)
				}
				defer be.Close()
				benchClaims(b, be, "", n)
			})
		}
	}
}

// BenchmarkLedgerFold folds the log of claims of 100 ticks (100 jobs)
// into records: records/s is the fold's rate, of the daemon's upkeep or
// of a reader.
func BenchmarkLedgerFold(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	if err := srv.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	defer redis.SetFoldAfter(1 << 40)()
	be, err := redis.Open(srv.URL(), redis.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	g, err := be.Acquire(ctx, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ticks := make([]onetick.Tick, 100)
	for i := range ticks {
		ticks[i] = onetick.Tick{Job: fmt.Sprintf("job-%05d", i), Stream: fmt.Sprintf("s:%d", i%16),
			Payload: `{"task":"bench"}`, Retention: 3 * time.Second, MaxLen: 1000}
	}
	base := onetick.SlotOf(time.Now().Add(-24 * time.Hour))
	var folded time.Duration
	for it := 0; it < b.N; it++ {
		for i := range ticks {
			ticks[i].Slot = base + onetick.Slot(it)
		}
		if _, err := be.Claim(ctx, g.Lease, ticks); err != nil {
			b.Fatal(err)
		}
		if (it+1)%1000 == 0 || it == b.N-1 {
			start := time.Now()
			if err := be.FoldLedger(ctx); err != nil {
				b.Fatal(err)
			}
			folded += time.Since(start)
		}
	}
	b.ReportMetric(float64(len(ticks)*b.N)/folded.Seconds(), "records/s")
}
