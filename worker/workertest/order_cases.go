package workertest

import (
	"slices"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Liveness and order: a dead worker's entries and markers are taken over
// as soon as its liveness lapses, never while it lives; a job that
// prefers duplicate runs its ticks one at a time, in slot order, whoever
// holds them.

func register(t *testing.T, s worker.Store, consumer string, streams []string, live time.Duration) {
	t.Helper()
	if err := s.Register(ctxT(t), consumer, streams, live); err != nil {
		t.Fatalf("register %s: %v", consumer, err)
	}
}

func reclaim(t *testing.T, s worker.Store, consumer string, streams []string, idle time.Duration) []*worker.Delivery {
	t.Helper()
	got, err := s.Reclaim(ctxT(t), consumer, streams, idle, 10)
	if err != nil {
		t.Fatalf("reclaim by %s: %v", consumer, err)
	}
	return got
}

// A live worker's entries are never taken over, whatever the backstop;
// once its liveness lapses they are, at once, and its run marker no longer
// holds the job; a new process of a name gives back what an earlier one
// left.
func testStoreLiveness(t *testing.T, env Env) {
	ctx := ctxT(t)
	job := name("live")
	p := newProducer(env.Backend)
	p.produce(t, job, 1)
	a, b, c := env.Store(t), env.Store(t), env.Store(t)
	streams := []string{streamOf(job)}
	for _, x := range []struct {
		s worker.Store
		n string
	}{{a, "a"}, {b, "b"}, {c, "c"}} {
		register(t, x.s, x.n, streams, time.Minute)
	}
	d1 := fetchN(t, a, "a", streams, 1)[0]
	if adm := begin(t, a, "a", worker.OverlapSkip, d1); adm[0] != worker.Run {
		t.Fatalf("begin: %v", adm[0])
	}
	if got := reclaim(t, b, "b", streams, time.Hour); len(got) != 0 {
		t.Fatalf("an entry of a live worker was taken over: %+v", got)
	}
	// a's last heartbeat keeps it alive for 300ms only.
	if lost, err := a.Heartbeat(ctx, "a", 300*time.Millisecond, time.Minute, []worker.Hold{{D: d1, Marker: worker.MarkerRun}}); err != nil || len(lost) != 0 {
		t.Fatalf("heartbeat: lost %v, %v", lost, err)
	}
	p.produce(t, job, 1)
	d2 := fetchN(t, c, "c", streams, 1)[0]
	// The liveness has to lapse; no signal stands in for the store's clock.
	time.Sleep(600 * time.Millisecond)
	if adm := begin(t, c, "c", worker.OverlapSkip, d2); adm[0] != worker.Run {
		t.Fatalf("begin while the marker's holder is dead: %v, want run (a dead worker's marker is free)", adm[0])
	}
	got := reclaim(t, b, "b", streams, time.Hour)
	if len(got) != 1 || got[0].ID != d1.ID || got[0].Deliveries != 2 {
		t.Fatalf("reclaim once the owner's liveness lapsed: %+v; want the dead worker's entry, delivery 2", got)
	}
	if adm := begin(t, b, "b", worker.OverlapSkip, got[0]); adm[0] != worker.SkipOverlap {
		t.Fatalf("begin of the dead worker's tick while another run holds the marker: %v, want skipped_overlap", adm[0])
	}
	if lost, err := a.Heartbeat(ctx, "a", time.Minute, time.Minute, []worker.Hold{{D: d1, Marker: worker.MarkerRun}}); err != nil || len(lost) != 1 {
		t.Fatalf("heartbeat of the dead worker after the takeover: lost %v, %v; want it lost", lost, err)
	}
	// c starts again as a new process: what the old c held is given back,
	// and taken over at once though c is alive.
	register(t, c, "c", streams, time.Minute)
	got = reclaim(t, b, "b", streams, time.Hour)
	if len(got) != 1 || got[0].ID != d2.ID || got[0].Deliveries != 2 {
		t.Fatalf("reclaim after the owner registered again: %+v; want its entry, delivery 2", got)
	}
	if adm := begin(t, b, "b", worker.OverlapSkip, got[0]); adm[0] != worker.Run {
		t.Fatalf("begin of a tick taken over with its marker: %v, want run", adm[0])
	}
	if lost, err := c.Heartbeat(ctx, "c", time.Minute, time.Minute, []worker.Hold{{D: d2, Marker: worker.MarkerRun}}); err != nil || len(lost) != 1 {
		t.Fatalf("heartbeat of the previous process's entry: lost %v, %v; want it lost", lost, err)
	}
}

func ordered(d *worker.Delivery, waiting int) worker.Start {
	return worker.Start{D: d, Overlap: worker.OverlapQueue, MaxWaiting: waiting, Ordered: true}
}

func beginStarts(t *testing.T, s worker.Store, consumer string, sts ...worker.Start) []worker.Admission {
	t.Helper()
	res, err := s.Begin(ctxT(t), consumer, time.Minute, sts)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return res.Admissions
}

// Ordered admission: a tick runs only when the marker is free and no
// lower slot of its job waits or is pending without having begun, so
// ticks held by different consumers run in slot order; at most MaxWaiting
// wait, and a given-back waiter keeps its turn.
func testStoreOrder(t *testing.T, env Env) {
	job := name("order")
	p := newProducer(env.Backend)
	p.produce(t, job, 4)
	a, b := env.Store(t), env.Store(t)
	streams := []string{streamOf(job)}
	register(t, a, "a", streams, time.Minute)
	register(t, b, "b", streams, time.Minute)
	da := fetchN(t, a, "a", streams, 2)
	db := fetchN(t, b, "b", streams, 2)
	e1, e2, e3, e4 := da[0], da[1], db[0], db[1]
	if !(e1.Slot < e2.Slot && e2.Slot < e3.Slot && e3.Slot < e4.Slot) {
		t.Fatalf("fetched out of order: %v %v %v %v", e1.Slot, e2.Slot, e3.Slot, e4.Slot)
	}
	want := func(what string, got, w worker.Admission) {
		t.Helper()
		if got != w {
			t.Fatalf("%s: %v, want %v", what, got, w)
		}
	}
	want("e3 while e1 and e2 have not begun", beginStarts(t, b, "b", ordered(e3, 10))[0], worker.Wait)
	want("e4", beginStarts(t, b, "b", ordered(e4, 10))[0], worker.Wait)
	want("e2 while e1 has not begun", beginStarts(t, a, "a", ordered(e2, 10))[0], worker.Wait)
	want("e1, the lowest", beginStarts(t, a, "a", ordered(e1, 10))[0], worker.Run)
	want("e2 while e1 runs", beginStarts(t, a, "a", ordered(e2, 10))[0], worker.Wait)
	if lost, err := b.Heartbeat(ctxT(t), "b", time.Minute, time.Minute, []worker.Hold{{D: e3, Marker: worker.MarkerWait}}); err != nil || len(lost) != 0 {
		t.Fatalf("heartbeat of a waiter: lost %v, %v", lost, err)
	}
	finish(t, a, "a", worker.Finish{D: e1, Kind: worker.FinishDone, Retention: time.Minute})
	adm := beginStarts(t, b, "b", ordered(e4, 10), ordered(e3, 10))
	want("e4 after e1 finished", adm[0], worker.Wait)
	want("e3 after e1 finished", adm[1], worker.Wait)
	want("e2 after e1 finished", beginStarts(t, a, "a", ordered(e2, 10))[0], worker.Run)
	finish(t, a, "a", worker.Finish{D: e2, Kind: worker.FinishDone, Retention: time.Minute})
	// e3 is given back while it waits: it keeps its turn (e4 does not
	// pass it), and whoever takes it over runs it.
	finish(t, b, "b", worker.Finish{D: e3, Kind: worker.FinishRelease})
	if lost, err := b.Heartbeat(ctxT(t), "b", time.Minute, time.Minute, []worker.Hold{{D: e3, Marker: worker.MarkerWait}}); err != nil || len(lost) != 1 {
		t.Fatalf("heartbeat of a waiter given back: lost %v, %v; want it lost", lost, err)
	}
	want("e4 while the given-back e3 has not begun again", beginStarts(t, b, "b", ordered(e4, 10))[0], worker.Wait)
	got := reclaim(t, a, "a", streams, time.Hour)
	if len(got) != 1 || got[0].ID != e3.ID {
		t.Fatalf("reclaim of the given-back e3: %+v", got)
	}
	want("e3 taken over", beginStarts(t, a, "a", ordered(got[0], 10))[0], worker.Run)
	// At most MaxWaiting wait: with e3 running and e4 waiting, one more
	// may wait and the next is skipped (acknowledged).
	p.produce(t, job, 2)
	more := fetchN(t, a, "a", streams, 2)
	adm = beginStarts(t, a, "a", ordered(more[0], 2), ordered(more[1], 2))
	want("e5 with one place left", adm[0], worker.Wait)
	want("e6 with no place left", adm[1], worker.SkipOverlap)
	if lost, err := a.Heartbeat(ctxT(t), "a", time.Minute, time.Minute, []worker.Hold{{D: more[1]}}); err != nil || len(lost) != 1 {
		t.Fatalf("heartbeat of the skipped e6: lost %v, %v; want it lost (acknowledged)", lost, err)
	}
	finish(t, a, "a", worker.Finish{D: got[0], Kind: worker.FinishDone, Retention: time.Minute})
	adm = beginStarts(t, a, "a", ordered(more[0], 2))
	want("e5 after e3, with e4 waiting", adm[0], worker.Wait)
	want("e4 after e3", beginStarts(t, b, "b", ordered(e4, 2))[0], worker.Run)
}

// A catch-up batch of a busy job that prefers duplicate (overlap skip,
// the default): every slot runs, once, one at a time, in slot order,
// although several workers (processes, where the backend has them) hold
// its ticks; none is skipped or counted as missed.
func testCatchUpInOrder(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("catchup"), Prefer: onetick.PreferDuplicate, Do: Behavior{Sleep: 150 * time.Millisecond}}
	var names []string
	var inProc []*member
	for i := range 3 {
		s := calm(spec(name("w"), job))
		// One handler each: the batch is spread over the workers.
		s.Concurrency = 1
		names = append(names, s.Consumer)
		if m := f.member(s, i == 0); m.reg != nil {
			inProc = append(inProc, m)
		}
	}
	f.awaitStarted(names...)
	p := newProducer(env.Backend)
	all := p.produce(t, job.Name, 1)
	f.awaitEvent("the first run started", func(e Event) bool { return isStart(e) && e.Tick == all[0] })
	all = append(all, p.produce(t, job.Name, 8)...) // claimed at once, while the job runs
	evs := f.await("every slot ran", func(evs []Event) bool { return succeeded(evs, all) })
	checkInOrder(t, evs, all)
	if n := count(evs, logged("tick skipped", "")); n != 0 {
		t.Errorf("%d ticks skipped", n)
	}
	if n := count(evs, logged("tick waits for the previous run", "")); n == 0 {
		t.Error("no tick waited: the job was not busy")
	}
	for _, m := range inProc {
		m.stop()
		if n := m.counter("worker_missed_ticks_total", nil); n != 0 {
			t.Errorf("%s counted %v missed ticks", m.name, n)
		}
	}
}

// checkInOrder: each tick of ids (in slot order) started once, and each
// started after the previous one ended.
func checkInOrder(t *testing.T, evs []Event, ids []string) {
	t.Helper()
	for _, id := range ids {
		if n := len(starts(evs, id)); n != 1 {
			t.Errorf("tick %s started %d times, want once", id, n)
		}
	}
	var prevEnd Event
	for i, id := range ids {
		ss := starts(evs, id)
		if len(ss) == 0 {
			continue
		}
		if i > 0 && ss[0].At.Before(prevEnd.At) {
			t.Errorf("tick %s (%s) started at %s, before tick %s ended at %s", id, ss[0].Member,
				ss[0].At.Format(time.RFC3339Nano), ids[i-1], prevEnd.At.Format(time.RFC3339Nano))
		}
		for _, e := range evs {
			if isEnd(e) && e.Tick == id {
				prevEnd = e
			}
		}
	}
}

// A job that prefers duplicate, one tick every 250ms, each run 300ms: its
// worker is killed (SIGKILL of its process, where the backend has
// processes) in the middle of a run and replaced. Every slot runs exactly
// once, in slot order, except the one the victim was running, which runs
// again elsewhere (the documented case: the victim may have done its work
// before it died) as soon as the victim's liveness lapses; nothing is
// skipped.
func testDuplicateAcrossKill(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("dupkill"), Prefer: onetick.PreferDuplicate, Do: Behavior{Sleep: 300 * time.Millisecond}}
	victim := fastTakeover(spec(name("victim"), job))
	vm := f.member(victim, false)
	f.awaitStarted(victim.Consumer)
	p := newProducer(env.Backend)
	var ids []string
	var killedAt time.Time
	var survivors []*member
	tk := time.NewTicker(250 * time.Millisecond)
	for len(ids) < 16 {
		<-tk.C // pacing the producer, not synchronization
		ids = append(ids, p.produce(t, job.Name, 1)...)
		if !killedAt.IsZero() {
			continue
		}
		ends, running := 0, ""
		for _, e := range f.snapshot() {
			switch {
			case e.Member != victim.Consumer:
			case isStart(e):
				running = e.Tick
			case isEnd(e):
				ends++
				running = ""
			}
		}
		if ends >= 2 && running != "" {
			vm.kill()
			killedAt = time.Now()
			for range 2 {
				survivors = append(survivors, f.start(fastTakeover(spec(name("survivor"), job))))
			}
		}
	}
	tk.Stop()
	if killedAt.IsZero() {
		t.Fatal("the victim was never caught in the middle of a run")
	}
	store := env.Store(t)
	f.await("every slot done", func([]Event) bool { return len(doneRecords(t, store, ids)) == len(ids) })
	recs := doneRecords(t, store, ids)
	evs := f.snapshot()
	var final []Event // the run that succeeded, per tick
	twice := 0
	for _, id := range ids {
		byVictim, elsewhere := startsBy(evs, id, victim.Consumer)
		switch {
		case recs[id].Consumer == victim.Consumer:
			if len(byVictim) != 1 || len(elsewhere) != 0 {
				t.Errorf("tick %s done by the victim: started %d times there and %d elsewhere, want once", id, len(byVictim), len(elsewhere))
			} else {
				final = append(final, byVictim[0])
			}
		case len(elsewhere) != 1 || len(byVictim) > 1:
			t.Errorf("tick %s ran %d times outside the victim and %d times in it", id, len(elsewhere), len(byVictim))
		default:
			final = append(final, elsewhere[0])
			if len(byVictim) == 1 {
				twice++
				took := elsewhere[0].At.Sub(killedAt)
				t.Logf("tick %s ran twice: the victim was killed during its run; it started again on %s %s after the kill (delivery %d)",
					id, elsewhere[0].Member, took.Round(time.Millisecond), elsewhere[0].Deliveries)
				if elsewhere[0].Deliveries < 2 {
					t.Errorf("tick %s rerun with delivery count %d, want at least 2", id, elsewhere[0].Deliveries)
				}
			}
		}
	}
	if twice > 1 {
		t.Errorf("%d ticks ran twice; only the one the victim was running may", twice)
	}
	if !slices.IsSortedFunc(final, func(a, b Event) int { return a.At.Compare(b.At) }) {
		for _, e := range final {
			t.Logf("final run: %s at %s on %s", e.Tick, e.At.Format(time.RFC3339Nano), e.Member)
		}
		t.Error("the slots did not run in slot order")
	}
	if n := count(evs, logged("tick skipped", "")); n != 0 {
		t.Errorf("%d ticks skipped", n)
	}
	for _, m := range survivors {
		m.stop()
		if n := m.counter("worker_missed_ticks_total", nil); n != 0 {
			t.Errorf("%s counted %v missed ticks", m.name, n)
		}
	}
}

// A job that prefers missed, with the default overlap (skip): ticks due
// while its run is in flight are skipped, each logged with its reason and
// counted as a missed slot, where the missed-ticks alert reads it.
func testMissedOverlapCounted(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("missed"), Do: Behavior{Block: true}}
	ms, p, t1 := f.busy(job, 2)
	for _, tk := range p.produce(t, job.Name, 2) {
		e := f.awaitEvent("a later tick skipped", logged("tick skipped: a previous run", tk))
		if e.Attrs["reason"] != worker.ReasonOverlap || e.Attrs["prefer"] != string(onetick.PreferMissed) || e.Attrs["job"] != job.Name {
			t.Errorf("skip of %s logged with %v: want job, prefer missed and reason overlap", tk, e.Attrs)
		}
	}
	f.open(t1)
	f.await("t1 ran", func(evs []Event) bool { return ended(evs, []string{t1}) })
	var missed, dup, skipped float64
	for _, m := range ms {
		m.stop()
		missed += m.counter("worker_missed_ticks_total", map[string]string{"prefer": "missed", "reason": "overlap"})
		dup += m.counter("worker_missed_ticks_total", map[string]string{"prefer": "duplicate"})
		skipped += m.counter("worker_runs_total", map[string]string{"outcome": "skipped_overlap"})
	}
	if missed != 2 || skipped != 2 || dup != 0 {
		t.Fatalf("missed (prefer missed, overlap) %v, skipped_overlap %v, missed (prefer duplicate) %v; want 2, 2, 0", missed, skipped, dup)
	}
}
