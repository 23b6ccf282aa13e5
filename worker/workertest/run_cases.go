package workertest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick/worker"
)

// Timings of the fleet cases. A process stalled for longer than its
// liveness TTL is exactly when a tick may run twice, and on a shared
// machine under load the test processes stall for a second at times: so
// where no takeover is expected the liveness TTL is long, and the cases
// about takeover (fastTakeover) still leave 1.6s of margin (the liveness
// TTL less one heartbeat interval).
const (
	takeoverIdle = 5 * time.Second
	heartbeat    = 500 * time.Millisecond
	liveness     = takeoverIdle

	fastLive      = 2 * time.Second
	fastHeartbeat = 400 * time.Millisecond
)

func spec(consumer string, jobs ...JobSpec) Spec {
	return Spec{Consumer: consumer, Concurrency: 4, TakeoverIdle: takeoverIdle, Heartbeat: heartbeat,
		Liveness: liveness, ShutdownTimeout: 2 * time.Second, Jobs: jobs}
}

// calm is spec for a case where no worker dies, so no tick may be taken
// over: a live worker's liveness never lapses on a loaded machine (a test
// process stalled for seconds), and a stall cannot pass for a death.
func calm(s Spec) Spec {
	s.Liveness, s.TakeoverIdle = time.Minute, time.Minute
	return s
}

// fastTakeover is spec with takeovers once a worker has been dead for
// fastLive.
func fastTakeover(s Spec) Spec {
	s.Liveness, s.Heartbeat = fastLive, fastHeartbeat
	return s
}

func isStart(e Event) bool { return e.Kind == KindStart }
func isEnd(e Event) bool   { return e.Kind == KindEnd }

func logged(msg, tick string) func(Event) bool {
	return func(e Event) bool {
		return e.Kind == KindLog && strings.HasPrefix(e.Msg, msg) && (tick == "" || e.Tick == tick)
	}
}

// ended reports whether every tick has an end event without error.
func ended(evs []Event, ticks []string) bool {
	return every(evs, ticks, func(e Event) bool { return e.Kind == KindEnd && e.Err == "" })
}

// succeeded reports whether every tick was recorded as succeeded (the
// worker logs it after the store accepted the result).
func succeeded(evs []Event, ticks []string) bool {
	return every(evs, ticks, func(e Event) bool { return e.Kind == KindLog && e.Msg == "tick succeeded" })
}

// every reports whether each tick has an event that satisfies pred.
func every(evs []Event, ticks []string, pred func(Event) bool) bool {
	ok := map[string]bool{}
	for _, e := range evs {
		if pred(e) {
			ok[e.Tick] = true
		}
	}
	for _, t := range ticks {
		if !ok[t] {
			return false
		}
	}
	return true
}

// awaitStarted waits until every member logged that it started (child
// processes take a moment).
func (f *fleet) awaitStarted(names ...string) {
	f.t.Helper()
	for _, n := range names {
		f.awaitEvent(n+" started", func(e Event) bool { return e.Member == n && logged("worker started", "")(e) })
	}
}

// N ticks of several jobs, several workers (and processes): each tick runs
// exactly once and leaves a done record.
func testRunsOnce(t *testing.T, env Env) {
	f := newFleet(t, env)
	var jobs []JobSpec
	for _, b := range []string{"a", "b", "c"} {
		jobs = append(jobs, JobSpec{Name: name("once-" + b), Overlap: worker.OverlapAllow, Do: Behavior{Sleep: 2 * time.Millisecond}})
	}
	var names []string
	var inProc []*member
	for i := range 3 {
		n := name("w")
		inProc = append(inProc, f.start(calm(spec(n, jobs...))))
		names = append(names, n)
		if env.Command != nil && i < 2 {
			n := name("proc")
			f.spawn(calm(spec(n, jobs...)))
			names = append(names, n)
		}
	}
	f.awaitStarted(names...)
	p := newProducer(env.Backend)
	var ids []string
	for range 3 {
		for _, j := range jobs {
			ids = append(ids, p.produce(t, j.Name, 10)...)
		}
	}
	evs := f.await("every tick ran", func(evs []Event) bool { return succeeded(evs, ids) })
	for _, id := range ids {
		if n := len(starts(evs, id)); n != 1 {
			t.Errorf("tick %s started %d times, want once", id, n)
		}
	}
	if n := count(evs, isStart); n != len(ids) {
		t.Errorf("%d handler starts for %d ticks", n, len(ids))
	}
	if recs := doneRecords(t, env.Store(t), ids); len(recs) != len(ids) {
		t.Errorf("%d done records for %d ticks", len(recs), len(ids))
	}
	byMember := map[string]int{}
	for _, e := range evs {
		if isStart(e) {
			byMember[e.Member]++
		}
	}
	t.Logf("runs per member: %v", byMember)
	for _, m := range inProc {
		m.stop()
		if n := m.counter("worker_runs_total", map[string]string{"outcome": "succeeded"}); n != float64(byMember[m.name]) {
			t.Errorf("%s counted %v successes, ran %d", m.name, n, byMember[m.name])
		}
	}
}

// A worker dies mid-run (SIGKILL of its process, where the backend has
// processes): the ticks it was running are run again elsewhere exactly
// when their done record was never written, and the rerun is counted as a
// takeover.
func testKilledMidRun(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("killed"), Overlap: worker.OverlapAllow, Do: Behavior{Sleep: 150 * time.Millisecond}}
	victim := fastTakeover(spec(name("victim"), job))
	victim.Concurrency = 2
	vm := f.member(victim, false)
	f.awaitStarted(victim.Consumer)
	ids := newProducer(env.Backend).produce(t, job.Name, 12)
	f.await("the victim finished two ticks and started more", func(evs []Event) bool {
		ends := map[string]bool{}
		for _, e := range evs {
			if e.Member == victim.Consumer && isEnd(e) {
				ends[e.Tick] = true
			}
		}
		running := 0
		for _, e := range evs {
			if e.Member == victim.Consumer && isStart(e) && !ends[e.Tick] {
				running++
			}
		}
		return len(ends) >= 2 && running >= 1
	})
	vm.kill()
	var survivors []*member
	for range 2 {
		survivors = append(survivors, f.start(fastTakeover(spec(name("survivor"), job))))
	}
	if env.Command != nil {
		f.spawn(fastTakeover(spec(name("proc"), job)))
	}
	store := env.Store(t)
	f.await("every tick done", func([]Event) bool { return len(doneRecords(t, store, ids)) == len(ids) })
	recs := doneRecords(t, store, ids)
	evs := f.snapshot()
	reruns := 0
	for _, id := range ids {
		byVictim, elsewhere := startsBy(evs, id, victim.Consumer)
		switch {
		case recs[id].Consumer == victim.Consumer:
			if len(elsewhere) != 0 {
				t.Errorf("tick %s ran again after the victim wrote its done record: %+v", id, elsewhere)
			}
		case len(elsewhere) != 1:
			t.Errorf("tick %s ran %d times outside the victim, want once", id, len(elsewhere))
		case len(byVictim) > 0:
			reruns++
			if elsewhere[0].Deliveries < 2 {
				t.Errorf("tick %s was rerun after the victim's start with delivery count %d, want at least 2", id, elsewhere[0].Deliveries)
			}
		}
	}
	if reruns == 0 {
		t.Fatal("no tick the victim was running ran again")
	}
	t.Logf("%d ticks rerun after the kill", reruns)
	var counted float64
	for _, m := range survivors {
		counted += m.counter("worker_reclaimed_total", nil)
	}
	if env.Command == nil && counted < float64(reruns) {
		t.Errorf("survivors counted %v takeovers for %d reruns", counted, reruns)
	}
}

// A handler running ten times the liveness TTL (the takeover time) is not
// taken over while its worker lives, across three workers (processes,
// where the backend has them).
func testLongHandler(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("long"), Overlap: worker.OverlapAllow, Do: Behavior{Sleep: 10 * fastLive}}
	var inProc []*member
	var names []string
	for i := range 3 {
		s := fastTakeover(spec(name("w"), job))
		names = append(names, s.Consumer)
		m := f.member(s, i == 0)
		if m.reg != nil {
			inProc = append(inProc, m)
		}
	}
	f.awaitStarted(names...)
	ids := newProducer(env.Backend).produce(t, job.Name, 1)
	evs := f.await("the long run succeeded", func(evs []Event) bool { return succeeded(evs, ids) })
	ss := starts(evs, ids[0])
	if len(ss) != 1 || ss[0].Deliveries != 1 {
		t.Fatalf("starts %+v: want one, never taken over", ss)
	}
	if recs := doneRecords(t, env.Store(t), ids); len(recs) != 1 {
		t.Fatalf("done records %v", recs)
	}
	for _, m := range inProc {
		if n := m.counter("worker_reclaimed_total", nil); n != 0 {
			t.Errorf("%s took over %v entries", m.name, n)
		}
	}
}

// OverlapSkip across three workers (processes, where the backend has
// them): never two runs of the job at once; ticks that come due meanwhile
// are acknowledged and counted as skipped.
func testOverlapSkip(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("skip"), Do: Behavior{Sleep: 100 * time.Millisecond}}
	var names []string
	var inProc []*member
	for range 3 {
		s := spec(name("w"), job)
		names = append(names, s.Consumer)
		if m := f.member(s, false); m.reg != nil {
			inProc = append(inProc, m)
		}
	}
	f.awaitStarted(names...)
	p := newProducer(env.Backend)
	var ids []string
	tk := time.NewTicker(20 * time.Millisecond)
	for range 40 {
		<-tk.C // pacing the producer, not synchronization
		ids = append(ids, p.produce(t, job.Name, 1)...)
	}
	tk.Stop()
	skipped := logged("tick skipped: a previous run", "")
	missed := 0.0
	done := func(evs []Event) bool {
		return every(evs, ids, func(e Event) bool {
			return (e.Kind == KindLog && e.Msg == "tick succeeded") || skipped(e)
		})
	}
	f.await("every tick ran or was skipped", done)
	// Nothing is in flight now, so one more tick runs: at least two runs
	// however slowly the machine ran the first (on a loaded machine the
	// first run can outlast all forty ticks).
	ids = append(ids, p.produce(t, job.Name, 1)...)
	evs := f.await("the last tick ran", done)
	type run struct{ start, end Event }
	runs := map[string]*run{}
	for _, e := range evs {
		switch {
		case isStart(e):
			if runs[e.Tick] != nil {
				t.Fatalf("tick %s started twice", e.Tick)
			}
			runs[e.Tick] = &run{start: e}
		case isEnd(e):
			runs[e.Tick].end = e
		}
	}
	var rs []*run
	for _, r := range runs {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *run) int { return a.start.At.Compare(b.start.At) })
	for i := 1; i < len(rs); i++ {
		if rs[i].start.At.Before(rs[i-1].end.At) {
			t.Errorf("runs overlap: %s (%s, %s) started at %s before %s (%s) ended at %s",
				rs[i].start.Tick, rs[i].start.Member, rs[i].start.Entry, rs[i].start.At.Format(time.RFC3339Nano),
				rs[i-1].start.Tick, rs[i-1].start.Member, rs[i-1].end.At.Format(time.RFC3339Nano))
		}
	}
	nSkipped := count(evs, skipped)
	if len(rs) < 2 || nSkipped == 0 || len(rs)+nSkipped != len(ids) {
		t.Fatalf("%d runs and %d skips of %d ticks: want several of each, adding up", len(rs), nSkipped, len(ids))
	}
	t.Logf("%d runs, %d skipped", len(rs), nSkipped)
	var counted float64
	for _, m := range inProc {
		counted += m.counter("worker_runs_total", map[string]string{"outcome": "skipped_overlap"})
		missed += m.counter("worker_missed_ticks_total", map[string]string{"prefer": "missed", "reason": "overlap"})
	}
	if len(inProc) == len(names) && (counted != float64(nSkipped) || missed != float64(nSkipped)) {
		t.Errorf("skipped_overlap counted %v, missed ticks (overlap) %v, logged %d", counted, missed, nSkipped)
	}
	st, err := env.Store(t).Status(ctxT(t), []string{job.Name})
	if err != nil || st.Jobs[0].InFlight != 0 || st.Jobs[0].LastOutcome == "" {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// busy starts n members of job in this process and a first tick of it,
// and returns once that tick runs.
func (f *fleet) busy(job JobSpec, n int) ([]*member, *producer, string) {
	f.t.Helper()
	var ms []*member
	for range n {
		ms = append(ms, f.start(spec(name("w"), job)))
	}
	p := newProducer(f.env.Backend)
	t1 := p.produce(f.t, job.Name, 1)[0]
	f.awaitEvent("the first tick started", func(e Event) bool { return isStart(e) && e.Tick == t1 })
	return ms, p, t1
}

// OverlapQueue: a tick that comes due during a run waits for it and then
// runs; a third one meanwhile is skipped (at most one waits).
func testOverlapQueue(t *testing.T, env Env) {
	f := newFleet(t, env)
	job := JobSpec{Name: name("queue"), Overlap: worker.OverlapQueue, Do: Behavior{Block: true}}
	ms, p, t1 := f.busy(job, 2)
	t2 := p.produce(t, job.Name, 1)[0]
	f.awaitEvent("t2 waits", logged("tick waits for the previous run", t2))
	st, err := env.Store(t).Status(ctxT(t), []string{job.Name})
	if err != nil || st.Jobs[0].InFlight != 1 {
		t.Fatalf("status with one run and one waiter: %+v, %v", st, err)
	}
	t3 := p.produce(t, job.Name, 1)[0]
	f.awaitEvent("t3 skipped", logged("tick skipped: a previous run", t3))
	f.open(t1)
	end1 := f.awaitEvent("t1 ended", func(e Event) bool { return isEnd(e) && e.Tick == t1 })
	start2 := f.awaitEvent("t2 started", func(e Event) bool { return isStart(e) && e.Tick == t2 })
	if start2.At.Before(end1.At) {
		t.Fatalf("t2 started at %s, before t1 ended at %s", start2.At, end1.At)
	}
	f.open(t2)
	f.awaitEvent("t2 ended", func(e Event) bool { return isEnd(e) && e.Tick == t2 })
	t4 := p.produce(t, job.Name, 1)[0]
	f.open(t4)
	evs := f.await("t4 ran", func(evs []Event) bool { return ended(evs, []string{t4}) })
	if n := len(starts(evs, t3)); n != 0 {
		t.Fatalf("the skipped tick started %d times", n)
	}
	var skipped, missed float64
	for _, m := range ms {
		m.stop()
		skipped += m.counter("worker_runs_total", map[string]string{"outcome": "skipped_overlap"})
		missed += m.counter("worker_missed_ticks_total", map[string]string{"prefer": "missed", "reason": "overlap"})
	}
	if skipped != 1 || missed != 1 {
		t.Fatalf("skipped_overlap counted %v, missed ticks (prefer missed, overlap) %v; want 1 each", skipped, missed)
	}
	if e := f.awaitEvent("t3's log line", logged("tick skipped: a previous run", t3)); e.Attrs["reason"] != "overlap" || e.Attrs["prefer"] != "missed" {
		t.Fatalf("t3 logged %q with %v: want reason overlap, prefer missed", e.Msg, e.Attrs)
	}
}
