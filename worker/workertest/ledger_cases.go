package workertest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// ledgerRun returns the backend's ledger record of tick, failing when
// there is none.
func ledgerRun(t *testing.T, lg onetick.Ledger, job, tick string) onetick.Run {
	t.Helper()
	r, ok, err := lg.Run(ctxT(t), job, tick)
	if err != nil || !ok {
		t.Fatalf("ledger record of %s: %v, %v", tick, ok, err)
	}
	return r
}

// checkStory fails unless r's events are want, in order, the worker's
// events naming consumer.
func checkStory(t *testing.T, r onetick.Run, consumer string, want ...string) {
	t.Helper()
	got := make([]string, len(r.Events))
	for i, e := range r.Events {
		got[i] = e.What
		if e.What != onetick.EventEnqueued && e.What != onetick.EventReplayed && e.Worker != consumer {
			t.Errorf("%s: event %+v: want worker %s", r.Tick, e, consumer)
		}
		if e.At.IsZero() {
			t.Errorf("%s: event %+v without its time", r.Tick, e)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: events %v, want %v", r.Tick, got, want)
	}
}

// testLedger: on a backend that keeps the run ledger (its Backend
// implements onetick.Ledger), a worker store writes each step of a tick
// to the tick's record: a run that succeeded, one retried and then
// succeeded, one dead-lettered and replayed.
func testLedger(t *testing.T, env Env) {
	lg, ok := env.Backend.(onetick.Ledger)
	if !ok {
		t.Skip("this backend keeps no run ledger")
	}
	ctx := ctxT(t)
	job := name("ledger")
	ids := newProducer(env.Backend).produce(t, job, 3)
	s := env.Store(t)
	streams := []string{streamOf(job)}
	ds := fetchN(t, s, "w1", streams, 3)
	slices.SortFunc(ds, func(a, b *worker.Delivery) int { return cmp.Compare(a.Slot, b.Slot) })
	begin(t, s, "w1", worker.OverlapAllow, ds...)
	if r := ledgerRun(t, lg, job, ids[0]); r.Fate != onetick.FateRunning {
		t.Fatalf("a begun run: fate %s, want running", r.Fate)
	}
	finish(t, s, "w1", worker.Finish{D: ds[0], Kind: worker.FinishDone, Retention: time.Minute},
		worker.Finish{D: ds[1], Kind: worker.FinishRetry, Err: "exit status 3"},
		worker.Finish{D: ds[2], Kind: worker.FinishDead, Err: "boom"})

	r := ledgerRun(t, lg, job, ids[0])
	checkStory(t, r, "w1", onetick.EventEnqueued, onetick.EventStarted, onetick.EventSucceeded)
	if r.Fate != onetick.FateSucceeded || r.Events[1].Attempt != 1 {
		t.Fatalf("a run that succeeded: %+v", r)
	}
	r = ledgerRun(t, lg, job, ids[1])
	if r.Fate != onetick.FateRetrying || r.Reason != "exit status 3" {
		t.Fatalf("a failed attempt with a retry: fate %s, reason %q", r.Fate, r.Reason)
	}
	if p, err := s.PromoteDue(ctx, 10); err != nil || p.N != 1 {
		t.Fatalf("promote the retry: %+v, %v", p, err)
	}
	d2 := fetchN(t, s, "w1", streams, 1)
	begin(t, s, "w1", worker.OverlapAllow, d2...)
	finish(t, s, "w1", worker.Finish{D: d2[0], Kind: worker.FinishDone, Retention: time.Minute})
	r = ledgerRun(t, lg, job, ids[1])
	checkStory(t, r, "w1", onetick.EventEnqueued, onetick.EventStarted, onetick.EventRetried,
		onetick.EventStarted, onetick.EventSucceeded)
	if r.Fate != onetick.FateSucceeded || r.Reason != "" || r.Events[3].Attempt != 2 {
		t.Fatalf("a retried run that succeeded: %+v", r)
	}

	r = ledgerRun(t, lg, job, ids[2])
	checkStory(t, r, "w1", onetick.EventEnqueued, onetick.EventStarted, onetick.EventDead)
	if r.Fate != onetick.FateDead || r.Reason != "boom" {
		t.Fatalf("a dead run: %+v", r)
	}
	dls := deadLetters(t, s)
	if len(dls) != 1 {
		t.Fatalf("dead letters %+v", dls)
	}
	if _, err := s.Replay(ctx, dls[0].ID); err != nil {
		t.Fatal(err)
	}
	r = ledgerRun(t, lg, job, ids[2])
	checkStory(t, r, "w1", onetick.EventEnqueued, onetick.EventStarted, onetick.EventDead, onetick.EventReplayed)
	if r.Fate != onetick.FateEnqueued {
		t.Fatalf("a replayed run: %+v", r)
	}
	page, err := lg.Runs(ctx, onetick.RunQuery{Job: job, Fate: onetick.FateSucceeded})
	if err != nil || len(page.Runs) != 2 || page.Runs[0].Tick != ids[1] {
		t.Fatalf("succeeded runs: %+v, %v", page, err)
	}
}
