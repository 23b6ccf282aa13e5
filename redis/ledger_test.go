package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/worker"
)

// The kit's table of Note cases on a real Redis: each case's events go
// into the log through the scripts' own op builders and come out of the
// fold as the record the kit's Note makes.
func TestLedgerNoteCases(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, c := range storekit.NoteCases() {
		t.Run(c.Name, func(t *testing.T) {
			// The cases' slot is in 1970: kept by an age limit to match.
			b := openLedger(t, srv, onetick.LedgerRetention{MaxAge: 100 * 365 * 24 * time.Hour})
			for _, ev := range c.Events {
				if err := b.NoteLog(ctx, storekit.NoteCaseJob, storekit.NoteCaseSlot, storekit.NoteCaseTick, ev); err != nil {
					t.Fatal(err)
				}
			}
			r, ok, err := b.Run(ctx, storekit.NoteCaseJob, storekit.NoteCaseTick)
			if err != nil || !ok {
				t.Fatalf("record: %v, %v", ok, err)
			}
			if err := c.Verify(r); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// open returns a backend on srv (flushed) with ledger retention r.
func openLedger(t *testing.T, srv *redistest.Server, r onetick.LedgerRetention) *redis.Backend {
	t.Helper()
	if err := srv.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := redis.Open(srv.URL(), redis.Options{Ledger: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Folds that run at once, while claims append, apply every entry once:
// each record has its one event, and the log is folded away.
func TestLedgerFoldConcurrent(t *testing.T) {
	srv := redistest.Start(t)
	b := openLedger(t, srv, onetick.LedgerRetention{})
	ctx := context.Background()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const claims, jobs = 600, 3
	base := onetick.SlotOf(time.Now().Add(-time.Hour))
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 0; i < claims; i++ {
			job := fmt.Sprintf("c%d", i%jobs)
			tk := onetick.Tick{Job: job, Slot: base + onetick.Slot(i)*1000, Stream: "onetick:s:" + job, Payload: "{}", Retention: time.Hour}
			if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := b.FoldLedger(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for j := 0; j < jobs; j++ {
		p, err := b.Runs(ctx, onetick.RunQuery{Job: fmt.Sprintf("c%d", j), Limit: onetick.MaxRunLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Runs {
			if len(r.Events) != 1 || r.Fate != onetick.FateEnqueued {
				t.Fatalf("record %s: events %+v, want one enqueued", r.Tick, r.Events)
			}
		}
		total += len(p.Runs)
	}
	if total != claims {
		t.Fatalf("%d records, want %d", total, claims)
	}
	n, err := b.Client().LLen(ctx, b.Prefix()+":ledger:log").Result()
	if err != nil || n != 0 {
		t.Fatalf("log of %d entries after a read, %v", n, err)
	}
	if f, err := b.Client().Get(ctx, b.Prefix()+":ledger:folded").Int64(); err != nil || f != claims {
		t.Fatalf("folded %d, %v; want %d (one entry a claim)", f, err, claims)
	}
}

// Claims alone keep the log short: past redis.FoldAfter() entries a claim
// folds a chunk.
func TestLedgerClaimFoldsLongLog(t *testing.T) {
	srv := redistest.Start(t)
	b := openLedger(t, srv, onetick.LedgerRetention{})
	ctx := context.Background()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	base := onetick.SlotOf(time.Now().Add(-time.Hour))
	for i := 0; i < redis.FoldAfter()+50; i++ {
		job := fmt.Sprintf("j%d", i%8)
		tk := onetick.Tick{Job: job, Slot: base + onetick.Slot(i)*1000, Stream: "onetick:s", Payload: "{}", Retention: time.Hour}
		if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.Client().LLen(ctx, b.Prefix()+":ledger:log").Result()
	if err != nil || n > int64(redis.FoldAfter()) {
		t.Fatalf("log of %d entries, %v; want at most %d", n, err, redis.FoldAfter())
	}
	p, err := b.Runs(ctx, onetick.RunQuery{Job: "j0", Limit: onetick.MaxRunLimit})
	if err != nil || len(p.Runs) != (redis.FoldAfter()+50+7)/8 {
		t.Fatalf("%d records of j0, %v", len(p.Runs), err)
	}
}

// ledgerKeys lists the keys of the ledger under b's prefix.
func ledgerKeys(t *testing.T, b *redis.Backend) []string {
	t.Helper()
	keys, err := b.Client().Keys(context.Background(), b.Prefix()+":ledger*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// With the ledger off, claims, enqueues and the worker's steps write no
// ledger key.
func TestLedgerOffWritesNothing(t *testing.T) {
	srv := redistest.Start(t)
	b := openLedger(t, srv, onetick.LedgerRetention{Off: true})
	ctx := context.Background()
	base := onetick.SlotOf(time.Now().Add(-time.Hour))
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tk := onetick.Tick{Job: "off", Slot: base, Stream: "onetick:stream:off", Payload: "{}", Retention: time.Hour,
		Skipped: []onetick.SkipRange{{From: base - 120000, Through: base - 120000, Count: 1, Reason: onetick.SkipGrace}}}
	if res, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if _, err := b.Enqueue(ctx, []onetick.Tick{{Job: "off", Key: "k", Stream: tk.Stream, Payload: "{}", Retention: time.Hour}},
		onetick.Actor{Who: "alice"}); err != nil {
		t.Fatal(err)
	}
	s := b.WorkerStore("")
	ds, err := s.Fetch(ctx, "w", []string{tk.Stream}, 10, time.Second)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetched %d, %v", len(ds), err)
	}
	var starts []worker.Start
	var fs []worker.Finish
	for _, d := range ds {
		starts = append(starts, worker.Start{D: d, Overlap: worker.OverlapAllow})
		fs = append(fs, worker.Finish{D: d, Kind: worker.FinishDead, Err: "boom"})
	}
	if _, err := s.Begin(ctx, "w", time.Minute, starts); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, "w", fs); err != nil {
		t.Fatal(err)
	}
	dls, err := s.DeadLetters(ctx, "", 10)
	if err != nil || len(dls) != 2 {
		t.Fatalf("dead letters %d, %v", len(dls), err)
	}
	if _, err := s.Replay(ctx, dls[0].ID); err != nil {
		t.Fatal(err)
	}
	if keys := ledgerKeys(t, b); len(keys) != 0 {
		t.Fatalf("ledger keys with the ledger off: %v", keys)
	}
	if err := b.FoldLedger(ctx); err != nil {
		t.Fatal(err)
	}
}

// A log key of another type: claims still work (the ledger misses their
// events), reads report the damage, the doctor finds it and moves it
// aside, and the ledger works again.
func TestLedgerLogDamaged(t *testing.T) {
	srv := redistest.Start(t)
	b := openLedger(t, srv, onetick.LedgerRetention{})
	ctx := context.Background()
	logKey := b.Prefix() + ":ledger:log"
	if err := b.Client().Set(ctx, logKey, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	base := onetick.SlotOf(time.Now().Add(-time.Hour))
	claimOne(t, b, "d", base)
	var de *onetick.DamageError
	if _, err := b.Runs(ctx, onetick.RunQuery{Job: "d"}); !errors.As(err, &de) || de.Key != logKey || !de.Repairable {
		t.Fatalf("Runs with a damaged log: %v, want its damage", err)
	}
	found, err := b.Inspect(ctx, map[string]string{"d": "onetick:stream:d"})
	if err != nil || len(found) != 1 || found[0].Key != logKey {
		t.Fatalf("inspect: %v, %v; want the log's damage only", found, err)
	}
	if _, err := b.Repair(ctx, found[0], false); err != nil {
		t.Fatal(err)
	}
	claimOne(t, b, "d", base+60000)
	p, err := b.Runs(ctx, onetick.RunQuery{Job: "d"})
	if err != nil || len(p.Runs) != 1 || p.Runs[0].Slot != base+60000 {
		t.Fatalf("after the repair: %+v, %v", p.Runs, err)
	}
	if found, err := b.Inspect(ctx, map[string]string{"d": "onetick:stream:d"}); err != nil || len(found) != 0 {
		t.Fatalf("inspect after the repair: %v, %v", found, err)
	}
}

// The doctor finds nothing wrong with a ledger in use, on every key it
// keeps.
func TestLedgerKeysAreNotDamage(t *testing.T) {
	srv := redistest.Start(t)
	b := openLedger(t, srv, onetick.LedgerRetention{})
	ctx := context.Background()
	base := onetick.SlotOf(time.Now().Add(-time.Hour))
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tk := onetick.Tick{Job: "k", Slot: base, Stream: "onetick:stream:k", Payload: "{}", Retention: time.Hour,
		Skipped: []onetick.SkipRange{{From: base - 120000, Through: base - 60000, Count: 2, Reason: onetick.SkipGrace}}}
	claim := func(tk onetick.Tick) {
		t.Helper()
		if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil {
			t.Fatal(err)
		}
	}
	claim(tk)
	claim(onetick.Tick{Job: "k", Slot: base + 60000, Stream: tk.Stream, Payload: "{}", Retention: time.Hour})
	if err := b.FoldLedger(ctx); err != nil {
		t.Fatal(err)
	}
	// And a claim left in the log, not folded yet.
	claim(onetick.Tick{Job: "k", Slot: base + 120000, Stream: tk.Stream, Payload: "{}", Retention: time.Hour})
	keys := ledgerKeys(t, b)
	if want := []string{"ledger", "ledger:folded", "ledger:idx:k", "ledger:log", "ledger:spans"}; len(keys) != len(want) {
		t.Fatalf("ledger keys %v, want %v", keys, want)
	}
	found, err := b.Inspect(ctx, map[string]string{"k": tk.Stream})
	if err != nil || len(found) != 0 {
		t.Fatalf("inspect: %v, %v", found, err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, b.Prefix()+":ledger") {
			t.Fatalf("key %s outside the prefix", k)
		}
	}
}
