//go:build verify

// Measurements, not checks: behind the verify tag so make test does not
// run them (go test -tags verify -run Ledger -v ./redis/).

package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// TestLedgerMeasureBytes measures what the ledger's records take in
// Redis (MEMORY USAGE of its keys, every element sampled), 10 jobs of
// 1,000 records each, with 1, 3 and 8 events a record: the figures of
// docs/ledger.md. Run it with `go test -tags verify -run LedgerMeasure -v ./redis/`.
func TestLedgerMeasureBytes(t *testing.T) {
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

// TestLedgerMeasureClaims measures the claim with the ledger off and on
// (the fold left to later, as the daemon folds every second), in rounds
// that alternate, each 1,000 claims of 100 ticks (100 jobs): Redis's own
// time in the claim script (INFO commandstats) and the wall time; then
// the fold of the round's log. Medians of the rounds, for docs/ledger.md.
// Run it with `go test -tags verify -run LedgerMeasure -v ./redis/`.
func TestLedgerMeasureClaims(t *testing.T) {
	defer redis.SetFoldAfter(1 << 40)()
	srv := redistest.Start(t)
	ctx := context.Background()
	const rounds, claims, batch = 5, 1000, 100
	// usec sums Redis's time in the commands named cmd ("" for all but
	// those a script runs, which its EVALSHA counts).
	usec := func(b *redis.Backend, cmd string) float64 {
		s, err := b.Client().Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, l := range strings.Split(s, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
			if !ok || !strings.HasPrefix(l, "cmdstat_") || (cmd != "" && name != cmd) ||
				(cmd == "" && name != "evalsha" && name != "eval" && name != "hmget" && name != "zcard" && name != "zrevrangebylex") {
				continue
			}
			for _, kv := range strings.Split(strings.TrimSpace(rest), ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					n, _ := strconv.ParseFloat(v, 64)
					sum += n
				}
			}
		}
		return sum
	}
	scriptUsec := func(b *redis.Backend) float64 { return usec(b, "evalsha") }
	type figures struct{ redisUs, wallUs, foldUs, foldRedisUs []float64 }
	got := map[bool]*figures{false: {}, true: {}}
	for r := 0; r < rounds; r++ {
		for _, on := range []bool{false, true} {
			b := openLedger(t, srv, onetick.LedgerRetention{Off: !on})
			g, err := b.Acquire(ctx, "replica-1", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			ticks := make([]onetick.Tick, batch)
			for i := range ticks {
				ticks[i] = onetick.Tick{Job: fmt.Sprintf("job-%05d", i), Stream: fmt.Sprintf("onetick:s:%d", i%16),
					Payload: `{"task":"bench"}`, Retention: 3 * time.Second, MaxLen: 1000}
			}
			base := onetick.SlotOf(time.Now().Add(-24 * time.Hour))
			if err := b.Client().ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for it := 0; it < claims; it++ {
				for i := range ticks {
					ticks[i].Slot = base + onetick.Slot(it)*1000
				}
				if _, err := b.Claim(ctx, g.Lease, ticks); err != nil {
					t.Fatal(err)
				}
			}
			f := got[on]
			f.wallUs = append(f.wallUs, float64(time.Since(start).Microseconds())/claims)
			f.redisUs = append(f.redisUs, scriptUsec(b)/claims)
			if err := b.Client().ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			if err := b.FoldLedger(ctx); err != nil {
				t.Fatal(err)
			}
			f.foldUs = append(f.foldUs, float64(time.Since(start).Microseconds())/(claims*batch))
			f.foldRedisUs = append(f.foldRedisUs, usec(b, "")/(claims*batch))
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	off, on := got[false], got[true]
	t.Logf("claim of %d ticks, median of %d rounds: Redis script time %.0f µs off, %.0f µs on (%.0f %%); wall %.0f µs off, %.0f µs on (%.0f %% of the throughput)",
		batch, rounds, med(off.redisUs), med(on.redisUs), 100*med(on.redisUs)/med(off.redisUs),
		med(off.wallUs), med(on.wallUs), 100*med(off.wallUs)/med(on.wallUs))
	t.Logf("fold: %.1f µs a record (%.0f records/s), of which Redis %.1f µs; rounds %v", med(on.foldUs), 1e6/med(on.foldUs),
		med(on.foldRedisUs), on.foldUs)
	t.Logf("rounds: Redis off %v on %v; wall off %v on %v", off.redisUs, on.redisUs, off.wallUs, on.wallUs)
}

// TestLedgerMeasureRuns times `onetick runs` over a job of 100,000
// records (max_per_job 100,000): the first page, a page deep in the
// ledger (by its cursor), and a fate filter that matches nothing (every
// record read). Run it with `go test -tags verify -run LedgerMeasure -v ./redis/`.
func TestLedgerMeasureRuns(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const records = 100_000
	b := openLedger(t, srv, onetick.LedgerRetention{MaxPerJob: records})
	g, err := b.Acquire(ctx, "replica-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	base := onetick.SlotOf(time.Now().Add(-6 * 24 * time.Hour))
	ticks := make([]onetick.Tick, 1000)
	for lo := 0; lo < records; lo += len(ticks) {
		for i := range ticks {
			ticks[i] = onetick.Tick{Job: "big", Slot: base + onetick.Slot(lo+i)*1000, Stream: "onetick:s", Payload: "{}", Retention: time.Hour}
		}
		if _, err := b.Claim(ctx, g.Lease, ticks); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := b.FoldLedger(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("fold of %d records: %s", records, time.Since(start))
	timeIt := func(what string, q onetick.RunQuery, want int) onetick.RunPage {
		var p onetick.RunPage
		var best time.Duration
		for i := 0; i < 5; i++ {
			start := time.Now()
			if p, err = b.Runs(ctx, q); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); i == 0 || d < best {
				best = d
			}
		}
		if len(p.Runs) != want {
			t.Fatalf("%s: %d records, want %d", what, len(p.Runs), want)
		}
		t.Logf("%s: %s (best of 5)", what, best)
		return p
	}
	p := timeIt("first page of 100", onetick.RunQuery{Job: "big"}, 100)
	for i := 0; i < 500; i++ {
		if p, err = b.Runs(ctx, onetick.RunQuery{Job: "big", After: p.Next}); err != nil {
			t.Fatal(err)
		}
	}
	timeIt("page 502 of 100, by its cursor", onetick.RunQuery{Job: "big", After: p.Next}, 100)
	timeIt("a page of 1,000", onetick.RunQuery{Job: "big", Limit: 1000}, 1000)
	timeIt("fate dead: none of 100,000", onetick.RunQuery{Job: "big", Fate: onetick.FateDead}, 0)
}
