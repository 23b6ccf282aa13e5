package workertest

import (
	"cmp"
	"slices"
	"strings"
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

// testLedgerResults: what a handler reports (worker.Report) is on its
// attempt's outcome event, written in the same step: a failed attempt's
// result on "retried", the next attempt's on "succeeded", a dead
// letter's on "dead"; the output cut to its last MaxEventOutput bytes;
// the duration measured by the worker, since the handler reports none.
func testLedgerResults(t *testing.T, env Env) {
	lg, ok := env.Backend.(onetick.Ledger)
	if !ok {
		t.Skip("this backend keeps no run ledger")
	}
	const sleep = 20 * time.Millisecond
	f := newFleet(t, env)
	retry := JobSpec{Name: name("results"), MaxAttempts: 2, Backoff: 50 * time.Millisecond,
		Do: Behavior{FailFirst: 1, Report: true, Sleep: sleep}}
	dead := JobSpec{Name: name("results-dead"), MaxAttempts: 1, Do: Behavior{FailFirst: 1, Report: true}}
	w := name("w")
	f.start(spec(w, retry, dead))
	p := newProducer(env.Backend)
	ids := p.produce(t, retry.Name, 1)
	dids := p.produce(t, dead.Name, 1)
	f.awaitEvent("the retried tick succeeded", logged("tick succeeded", ids[0]))
	f.awaitEvent("the other tick dead", logged("tick failed and went to the dead letters", dids[0]))

	check := func(tick string, e onetick.RunEvent, exit, attempt int) {
		t.Helper()
		if e.Exit == nil || *e.Exit != exit {
			t.Errorf("%s %s: exit %v, want %d", tick, e.What, e.Exit, exit)
		}
		if len(e.Output) != onetick.MaxEventOutput || !strings.HasSuffix(e.Output, ReportOutput(tick, attempt)) {
			t.Errorf("%s %s: output of %d bytes ending %q, want the last %d bytes of what attempt %d reported",
				tick, e.What, len(e.Output), e.Output[max(0, len(e.Output)-80):], onetick.MaxEventOutput, attempt)
		}
		if e.Duration <= 0 {
			t.Errorf("%s %s: duration %s, want the worker's measure", tick, e.What, e.Duration)
		}
	}
	r := ledgerRun(t, lg, retry.Name, ids[0])
	checkStory(t, r, w, onetick.EventEnqueued, onetick.EventStarted, onetick.EventRetried,
		onetick.EventStarted, onetick.EventSucceeded)
	check(ids[0], r.Events[2], 1, 1)
	check(ids[0], r.Events[4], 0, 2)
	for _, i := range []int{2, 4} {
		if d := r.Events[i].Duration; d < sleep {
			t.Errorf("%s %s: duration %s, want at least the handler's %s", ids[0], r.Events[i].What, d, sleep)
		}
	}
	for _, i := range []int{0, 1, 3} {
		if e := r.Events[i]; e.Result != (onetick.Result{}) {
			t.Errorf("%s %s: result %+v, want none", ids[0], e.What, e.Result)
		}
	}
	r = ledgerRun(t, lg, dead.Name, dids[0])
	checkStory(t, r, w, onetick.EventEnqueued, onetick.EventStarted, onetick.EventDead)
	check(dids[0], r.Events[2], 1, 1)
}
