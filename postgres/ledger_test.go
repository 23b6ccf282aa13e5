package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
	"github.com/onetick/onetick/worker"
)

// reopenWith opens another backend on b's schema with options o.
func reopenWith(t *testing.T, b *postgres.Backend, o postgres.Options) *postgres.Backend {
	t.Helper()
	o.Schema = b.Schema()
	r, err := postgres.Open(context.Background(), pgtest.URL(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// openLedger is open (or openWith o), closed at the test's end.
func openLedger(t *testing.T, o ...postgres.Options) *postgres.Backend {
	t.Helper()
	var b *postgres.Backend
	if len(o) > 0 {
		b = openWith(t, o[0])
	} else {
		b = open(t)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// ticksOf are n ticks of job, one every step from slot base.
func ticksOf(job string, base onetick.Slot, n int, step time.Duration) []onetick.Tick {
	out := make([]onetick.Tick, n)
	for i := range out {
		out[i] = onetick.Tick{Job: job, Slot: base + onetick.Slot(int64(i)*step.Milliseconds()), Stream: "lg", Payload: "{}", Retention: time.Hour}
	}
	return out
}

// checkCounts fails unless run_counts holds each job's number of records
// and oldest slot.
func checkCounts(t *testing.T, b *postgres.Backend) {
	t.Helper()
	if n := count(t, b, `SELECT count(*) FROM (SELECT job, count(*) AS n, min(slot) AS oldest FROM {s}.runs GROUP BY job) r
		FULL JOIN {s}.run_counts c USING (job)
		WHERE coalesce(r.n, 0) <> coalesce(c.n, 0) OR (r.n > 0 AND r.oldest IS DISTINCT FROM c.oldest)`); n != 0 {
		t.Fatalf("%d jobs whose run_counts row is not their number of records and oldest slot", n)
	}
}

// TestLedgerPrune: Prune trims the ledger exactly, every job: the records
// past MaxAge (a skipped range by its newest slot), then the oldest beyond
// MaxPerJob, more than one transaction takes of a job, and the counts of
// jobs left without records.
func TestLedgerPrune(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b := openLedger(t)
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	old := onetick.SlotOf(time.Now().Add(-3 * time.Hour))
	recent := onetick.SlotOf(time.Now().Add(-30 * time.Minute))
	olds := ticksOf("old", old, 30, time.Minute)
	olds[0].Skipped = []onetick.SkipRange{{From: old - 120000, Through: recent - 1000, Count: 2, Reason: onetick.SkipGrace}}
	if _, err := b.Claim(ctx, g.Lease, append(olds, ticksOf("new", recent, 20, time.Minute)...)); err != nil {
		t.Fatal(err)
	}
	// Nothing is past the defaults (7 days, 1,000 records a job).
	if p, err := b.Prune(ctx); err != nil || p.Runs != 0 {
		t.Fatalf("prune with the defaults: %+v, %v; want no record", p, err)
	}
	// The claim trims 16 of 1,200 (it trims with slack, at most 16 a
	// job); Prune takes 1,000 a job in one transaction, then the rest.
	if _, err := b.Claim(ctx, g.Lease, ticksOf("big", old, 1200, time.Second)); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, b)
	p, err := reopenWith(t, b, postgres.Options{Ledger: onetick.LedgerRetention{MaxAge: time.Hour, MaxPerJob: 5}}).Prune(ctx)
	if want := int64(30 + 15 + 1184); err != nil || p.Runs != want {
		t.Fatalf("prune: %+v, %v; want %d records", p, err, want)
	}
	checkCounts(t, b)
	for job, want := range map[string]int64{"old": 1, "new": 5, "big": 0} {
		if n := count(t, b, `SELECT count(*) FROM {s}.runs WHERE job = $1`, job); n != want {
			t.Errorf("job %s: %d records left, want %d", job, n, want)
		}
	}
	if n := count(t, b, `SELECT count(*) FROM {s}.run_counts WHERE job = 'big'`); n != 0 {
		t.Errorf("the count row of a job without records is kept")
	}
	if pg, err := b.Runs(ctx, onetick.RunQuery{Job: "new"}); err != nil || len(pg.Runs) != 5 || pg.Runs[4].Slot != recent+15*60000 {
		t.Fatalf("records of new: %+v, %v; want the newest 5", pg, err)
	}
	if pg, err := b.Runs(ctx, onetick.RunQuery{Job: "old"}); err != nil || len(pg.Runs) != 1 || pg.Runs[0].Fate != onetick.FateSkipped {
		t.Fatalf("records of old: %+v, %v; want the range that ends recently", pg, err)
	}
	if ds, err := b.Inspect(ctx, nil); err != nil || len(ds) != 0 {
		t.Fatalf("doctor on a schema with a ledger: %v, %v; want no damage", ds, err)
	}
}

// TestLedgerExisting: a tick written again while its ledger record is
// kept (its tick record expired, then a backfill of it) notes the new
// event on that record.
func TestLedgerExisting(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b := openLedger(t)
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tk := ticksOf("ex", onetick.SlotOf(time.Now().Add(-time.Hour)), 1, time.Minute)[0]
	if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil {
		t.Fatal(err)
	}
	execSQL(t, b, `UPDATE {s}.ticks SET keep_until = 0`)
	if res, err := b.Enqueue(ctx, []onetick.Tick{tk}, onetick.Actor{Who: "op"}); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	r, ok, err := b.Run(ctx, "ex", tk.ID())
	if err != nil || !ok || len(r.Events) != 2 || r.Events[1].Replica != "manual|op" || r.Events[0].Epoch != g.Lease.Epoch {
		t.Fatalf("record %+v, %v, %v: want the claim's event, then the backfill's", r, ok, err)
	}
	checkCounts(t, b)
}

// TestLedgerConcurrentTriggers: triggers of one job enqueued at once, the
// same key from several callers and distinct keys, leave one record per
// key with one event, and the job's count right.
func TestLedgerConcurrentTriggers(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b := openLedger(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, key := range []string{"same", fmt.Sprintf("k%d", i)} {
				tk := onetick.Tick{Job: "tr", Key: key, Stream: "lg", Payload: "{}", Retention: time.Hour}
				if _, err := b.Enqueue(ctx, []onetick.Tick{tk}, onetick.Actor{Who: "op"}); err != nil {
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
	pg, err := b.Runs(ctx, onetick.RunQuery{Job: "tr"})
	if err != nil || len(pg.Runs) != 17 {
		t.Fatalf("records: %d, %v; want 17", len(pg.Runs), err)
	}
	for _, r := range pg.Runs {
		if len(r.Events) != 1 {
			t.Fatalf("record %s: events %+v, want one", r.Tick, r.Events)
		}
	}
	checkCounts(t, b)
}

// TestLedgerDamagedRecord: a record whose doc is not a record (edited by
// hand) is named by a read, and holds no worker back: its next step
// replaces it.
func TestLedgerDamagedRecord(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b := openLedger(t)
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tk := ticksOf("dm", onetick.SlotOf(time.Now().Add(-time.Minute)), 1, time.Minute)[0]
	if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil {
		t.Fatal(err)
	}
	execSQL(t, b, `UPDATE {s}.runs SET doc = '{"events": 5}' WHERE tick = $1`, tk.ID())
	if _, _, err := b.Run(ctx, "dm", tk.ID()); err == nil || !strings.Contains(err.Error(), tk.ID()) {
		t.Fatalf("reading the damaged record: %v, want an error naming it", err)
	}
	if _, err := b.Runs(ctx, onetick.RunQuery{Job: "dm"}); err == nil || !strings.Contains(err.Error(), tk.ID()) {
		t.Fatalf("a page with the damaged record: %v, want an error naming it", err)
	}
	s := b.WorkerStore("")
	ds, err := s.Fetch(ctx, "w", []string{"lg"}, 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	res, err := s.Begin(ctx, "w", time.Minute, []worker.Start{{D: ds[0], Overlap: worker.OverlapAllow}})
	if err != nil || res.Admissions[0] != worker.Run {
		t.Fatalf("begin: %+v, %v", res, err)
	}
	r, ok, err := b.Run(ctx, "dm", tk.ID())
	if err != nil || !ok || r.Fate != onetick.FateRunning || len(r.Events) != 1 || r.Events[0].Worker != "w" {
		t.Fatalf("record after the worker's step: %+v, %v, %v", r, ok, err)
	}
}

// TestLedgerOffWorker: with the ledger off, workers run and replay ticks
// and nothing is written to it.
func TestLedgerOffWorker(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	b := openLedger(t, postgres.Options{Ledger: onetick.LedgerRetention{Off: true}})
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, g.Lease, ticksOf("off", onetick.SlotOf(time.Now().Add(-time.Hour)), 2, time.Minute)); err != nil {
		t.Fatal(err)
	}
	s := b.WorkerStore("")
	ds, err := s.Fetch(ctx, "w", []string{"lg"}, 2, time.Second)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	starts := []worker.Start{{D: ds[0], Overlap: worker.OverlapAllow}, {D: ds[1], Overlap: worker.OverlapAllow}}
	if res, err := s.Begin(ctx, "w", time.Minute, starts); err != nil || res.Admissions[1] != worker.Run {
		t.Fatalf("begin: %+v, %v", res, err)
	}
	if _, err := s.Finish(ctx, "w", []worker.Finish{{D: ds[0], Kind: worker.FinishDone, Retention: time.Minute},
		{D: ds[1], Kind: worker.FinishDead, Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	dls, err := s.DeadLetters(ctx, "", 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters: %+v, %v", dls, err)
	}
	if _, err := s.Replay(ctx, dls[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, b, `SELECT count(*) FROM {s}.runs`) + count(t, b, `SELECT count(*) FROM {s}.run_counts`); n != 0 {
		t.Fatalf("%d ledger rows with the ledger off", n)
	}
	if p, err := b.Prune(ctx); err != nil || p.Runs != 0 {
		t.Fatalf("prune: %+v, %v", p, err)
	}
}
