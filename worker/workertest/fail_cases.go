package workertest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// A failing tick is retried with the same tick id and the next attempt
// number, not before its backoff, until it succeeds.
func testRetries(t *testing.T, env Env) {
	f := newFleet(t, env)
	const backoff = 200 * time.Millisecond
	job := JobSpec{Name: name("retry"), MaxAttempts: 3, Backoff: backoff, Do: Behavior{FailFirst: 2}}
	m := f.start(spec(name("w"), job))
	f.member(spec(name("w"), job), false)
	ids := newProducer(env.Backend).produce(t, job.Name, 1)
	evs := f.await("the third attempt succeeded", func(evs []Event) bool { return ended(evs, ids) })
	ss := starts(evs, ids[0])
	if len(ss) != 3 {
		t.Fatalf("starts %+v, want 3", ss)
	}
	var ends []Event
	for _, e := range evs {
		if isEnd(e) && e.Tick == ids[0] {
			ends = append(ends, e)
		}
	}
	entries := map[string]bool{}
	for i, s := range ss {
		if s.Attempt != i+1 || entries[s.Entry] {
			t.Fatalf("start %d: %+v: want attempt %d on a new entry", i, s, i+1)
		}
		entries[s.Entry] = true
		if i > 0 {
			if gap := s.At.Sub(ends[i-1].At); gap < backoff-10*time.Millisecond {
				t.Errorf("attempt %d started %s after attempt %d failed, before its backoff of %s", i+1, gap, i, backoff)
			}
		}
	}
	if ends[0].Err == "" || ends[1].Err == "" || ends[2].Err != "" {
		t.Fatalf("ends %+v", ends)
	}
	store := env.Store(t)
	f.await("the done record", func([]Event) bool { return len(doneRecords(t, store, ids)) == 1 })
	m.stop()
	ran := 0
	for _, s := range ss {
		if s.Member == m.name {
			ran++
		}
	}
	if got := m.counter("worker_runs_total", map[string]string{"outcome": "failed"}) +
		m.counter("worker_runs_total", map[string]string{"outcome": "succeeded"}); got != float64(ran) {
		t.Errorf("%s counted %v runs, ran %d", m.name, got, ran)
	}
}

// A handler that panics on every attempt: each panic is recovered, logged
// with the tick and counted as a failure; after the last attempt the tick
// is in the dead letters with the panic as its error.
func testPanic(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("panic"), MaxAttempts: 2, Backoff: 50 * time.Millisecond, Do: Behavior{Panic: true}}
	m := f.start(spec(name("w"), job))
	ids := newProducer(env.Backend).produce(t, job.Name, 1)
	f.awaitEvent("the dead letter", logged("tick failed and went to the dead letters", ids[0]))
	evs := f.snapshot()
	if n := count(evs, logged("handler panicked", ids[0])); n != 2 {
		t.Errorf("%d panics logged with the tick, want 2", n)
	}
	if ss := starts(evs, ids[0]); len(ss) != 2 || ss[1].Attempt != 2 {
		t.Fatalf("starts %+v", ss)
	}
	store := env.Store(t)
	dls := deadLetters(t, store)
	if len(dls) != 1 || dls[0].Tick != ids[0] || dls[0].Attempts != 2 || !strings.Contains(dls[0].Error, "panicked") {
		t.Fatalf("dead letters %+v", dls)
	}
	st, err := store.Status(ctxT(t), []string{job.Name})
	if err != nil || st.Jobs[0].Dead != 1 || st.Jobs[0].LastOutcome != worker.OutcomeDead || st.Dead != 1 {
		t.Fatalf("status %+v, %v", st, err)
	}
	m.stop()
	for o, want := range map[string]float64{"failed": 2, "retried": 1, "dead": 1, "succeeded": 0} {
		if got := m.counter("worker_runs_total", map[string]string{"outcome": o}); got != want {
			t.Errorf("outcome %s counted %v, want %v", o, got, want)
		}
	}
}

// A tick that kills every worker that runs it (no handler error ever
// reports it) goes to the dead letters once the store's delivery count
// passes the limit.
func testDeliveryLimit(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("crash"), Overlap: worker.OverlapAllow, Do: Behavior{Crash: true}}
	const limit = 2
	s := spec("", job)
	s.MaxDeliveries = limit
	// Nothing holds the entry while a crasher is dead, so nothing can be
	// taken over wrongly: short timings are safe here.
	s.TakeoverIdle, s.Heartbeat, s.Liveness = 500*time.Millisecond, 50*time.Millisecond, 500*time.Millisecond
	ids := newProducer(env.Backend).produce(t, job.Name, 1)
	deadLogged := logged("tick dead-lettered: delivered too often", ids[0])
	for round := 1; ; round++ {
		s.Consumer = name("crasher")
		m := f.member(s, false)
		evs := f.await("a start or the dead letter", func(evs []Event) bool {
			return count(evs, isStart) == round || count(evs, deadLogged) > 0
		})
		if count(evs, deadLogged) > 0 {
			if round != limit+1 {
				t.Fatalf("dead-lettered in round %d, want %d", round, limit+1)
			}
			break
		}
		if round > limit {
			t.Fatalf("delivery %d started a handler; the limit is %d", round, limit)
		}
		if m.reg != nil {
			m.kill() // a process kills itself
		}
	}
	ss := starts(f.snapshot(), ids[0])
	for i, st := range ss {
		if st.Deliveries != i+1 || st.Attempt != 1 {
			t.Errorf("start %d: %+v: want delivery %d of attempt 1", i, st, i+1)
		}
	}
	dls := deadLetters(t, env.Store(t))
	if len(dls) != 1 || dls[0].Tick != ids[0] || dls[0].Deliveries != limit+1 || !strings.Contains(dls[0].Error, "delivery limit") {
		t.Fatalf("dead letters %+v", dls)
	}
}

// A replayed dead letter runs again with the same tick id.
func testReplay(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("replay"), MaxAttempts: 5, Do: Behavior{FailRuns: 1, SkipRetry: true}}
	f.start(spec(name("w"), job))
	ids := newProducer(env.Backend).produce(t, job.Name, 1)
	f.awaitEvent("the dead letter", logged("tick failed and went to the dead letters", ids[0]))
	store := env.Store(t)
	dls := deadLetters(t, store)
	if len(dls) != 1 || dls[0].Attempts != 1 || !strings.Contains(dls[0].Error, "failing as told") {
		t.Fatalf("dead letters %+v: want one, after the first attempt (skip retry)", dls)
	}
	if _, err := store.Replay(ctxT(t), dls[0].ID); err != nil {
		t.Fatal(err)
	}
	evs := f.await("the replayed tick ran", func(evs []Event) bool { return ended(evs, ids) })
	ss := starts(evs, ids[0])
	if len(ss) != 2 || ss[1].Attempt != 1 || ss[1].Entry == ss[0].Entry {
		t.Fatalf("starts %+v", ss)
	}
	f.await("the done record", func([]Event) bool { return len(doneRecords(t, store, ids)) == 1 })
	if rest := deadLetters(t, store); len(rest) != 0 {
		t.Fatalf("dead letters after the replay: %+v", rest)
	}
	st, err := store.Status(ctxT(t), []string{job.Name})
	if err != nil || st.Dead != 0 || st.Jobs[0].LastOutcome != worker.OutcomeSucceeded {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// When another consumer takes a running tick over, the next heartbeat
// cancels the handler's context (cause ErrOwnershipLost) and its result is
// not recorded.
func testLostOwnership(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("lost"), Overlap: worker.OverlapAllow, Do: Behavior{Block: true}}
	s := spec(name("w"), job)
	// The thief never heartbeats the entry: the backstop must not give it
	// back to the worker before the thief settles it.
	s.TakeoverIdle = time.Minute
	m := f.start(s)
	ids := newProducer(env.Backend).produce(t, job.Name, 1)
	f.awaitEvent("the run started", func(e Event) bool { return isStart(e) && e.Tick == ids[0] })
	thief := env.Store(t)
	// A live thief: the worker does not take the entry back.
	if err := thief.Register(ctxT(t), "thief", []string{streamOf(job.Name)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := thief.Reclaim(ctxT(t), "thief", []string{streamOf(job.Name)}, 0, 10)
	if err != nil || len(got) != 1 || got[0].Deliveries != 2 {
		t.Fatalf("takeover: %v, %v", got, err)
	}
	end := f.awaitEvent("the handler ended", func(e Event) bool { return isEnd(e) && e.Tick == ids[0] })
	if end.Cause != worker.ErrOwnershipLost.Error() {
		t.Fatalf("handler context cause %q, want %q", end.Cause, worker.ErrOwnershipLost)
	}
	f.awaitEvent("the lost result", logged("tick result not recorded", ids[0]))
	if recs := doneRecords(t, thief, ids); len(recs) != 0 {
		t.Fatalf("done records %v", recs)
	}
	if adm := begin(t, thief, "thief", worker.OverlapAllow, got[0]); adm[0] != worker.Run {
		t.Fatalf("begin by the thief: %v", adm[0])
	}
	if owned := finish(t, thief, "thief", worker.Finish{D: got[0], Kind: worker.FinishDone, Retention: time.Minute}); !owned[0] {
		t.Fatal("the thief's finish was refused")
	}
	m.stop()
	if n := m.counter("worker_runs_total", map[string]string{"outcome": "lost"}); n != 1 {
		t.Fatalf("lost counted %v, want 1", n)
	}
}

// On shutdown a handler that finishes within the bound is recorded; one
// that does not is cancelled (cause ErrShutdown) and given back, so that
// another worker runs it at once rather than after the takeover idle time.
func testShutdown(t *testing.T, env Env) {
	f := newFleet(t, env)
	blocker := JobSpec{Name: name("blocker"), Overlap: worker.OverlapAllow, Do: Behavior{Block: true}}
	quick := JobSpec{Name: name("quick"), Overlap: worker.OverlapAllow, Do: Behavior{Sleep: 300 * time.Millisecond}}
	s := spec(name("w"), blocker, quick)
	s.TakeoverIdle, s.Heartbeat, s.Liveness, s.ShutdownTimeout = 6*time.Second, 200*time.Millisecond, 6*time.Second, time.Second
	a := f.start(s)
	p := newProducer(env.Backend)
	tb := p.produce(t, blocker.Name, 1)[0]
	f.awaitEvent("the blocker started", func(e Event) bool { return isStart(e) && e.Tick == tb })
	tq := p.produce(t, quick.Name, 1)[0]
	f.awaitEvent("the quick one started", func(e Event) bool { return isStart(e) && e.Tick == tq })
	a.stop()
	stopped := time.Now()
	evs := f.snapshot()
	var endB, endQ *Event
	for i, e := range evs {
		if isEnd(e) && e.Tick == tb {
			endB = &evs[i]
		}
		if isEnd(e) && e.Tick == tq {
			endQ = &evs[i]
		}
	}
	if endQ == nil || endQ.Err != "" {
		t.Fatalf("the handler that finished within the bound: %+v", endQ)
	}
	if endB == nil || endB.Cause != worker.ErrShutdown.Error() {
		t.Fatalf("the handler past the bound: %+v, want cancelled with %q", endB, worker.ErrShutdown)
	}
	store := env.Store(t)
	if recs := doneRecords(t, store, []string{tb, tq}); len(recs) != 1 || recs[tq].Consumer != s.Consumer {
		t.Fatalf("done records %v: want the quick tick's only", recs)
	}
	s.Consumer = name("w")
	f.start(s)
	next := f.awaitEvent("the given-back tick started elsewhere", func(e Event) bool {
		return isStart(e) && e.Tick == tb && e.Member == s.Consumer
	})
	if took := time.Since(stopped); took >= s.TakeoverIdle {
		t.Fatalf("the tick given back at shutdown was taken over after %s, not before the takeover idle time (%s)", took, s.TakeoverIdle)
	}
	if next.Attempt != 1 || next.Deliveries != 2 {
		t.Fatalf("restart %+v: want attempt 1 (shutdown spends no attempt), delivery 2", next)
	}
	f.open(tb)
	f.await("the given-back tick finished", func(evs []Event) bool { return ended(evs, []string{tb}) })
}

// A tick that is in a stream again after it succeeded (a duplicate append)
// is acknowledged without running, and counted.
func testSkippedDone(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("dup"), Overlap: worker.OverlapAllow}
	m := f.start(spec(name("w"), job))
	ids := newProducer(env.Backend).produce(t, job.Name, 1)
	f.awaitEvent("the tick succeeded", logged("tick succeeded", ids[0]))
	store := env.Store(t)
	recs := doneRecords(t, store, ids)
	if len(recs) != 1 {
		t.Fatalf("done records %v", recs)
	}
	slot, err := strconv.ParseInt(strings.TrimPrefix(ids[0], job.Name+":"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	env.Append(t, streamOf(job.Name), onetick.TickRecord{Job: job.Name, Slot: onetick.Slot(slot), Tick: ids[0],
		Epoch: 1, Replica: "producer", Payload: `{"n":0}`})
	f.awaitEvent("the duplicate skipped", logged("tick skipped: it has a done record already", ids[0]))
	if n := len(starts(f.snapshot(), ids[0])); n != 1 {
		t.Fatalf("the tick started %d times", n)
	}
	m.stop()
	if n := m.counter("worker_runs_total", map[string]string{"outcome": "skipped_done"}); n != 1 {
		t.Fatalf("skipped_done counted %v", n)
	}
}
