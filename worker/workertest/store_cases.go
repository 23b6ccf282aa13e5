package workertest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick/worker"
)

// fetchN fetches until it has n deliveries.
func fetchN(t *testing.T, s worker.Store, consumer string, streams []string, n int) []*worker.Delivery {
	t.Helper()
	var out []*worker.Delivery
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		ds, err := s.Fetch(ctxT(t), consumer, streams, n-len(out), 200*time.Millisecond)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		out = append(out, ds...)
		if time.Now().After(deadline) {
			t.Fatalf("fetched %d entries, want %d", len(out), n)
		}
	}
	return out
}

func begin(t *testing.T, s worker.Store, consumer string, o worker.Overlap, ds ...*worker.Delivery) []worker.Admission {
	t.Helper()
	starts := make([]worker.Start, len(ds))
	for i, d := range ds {
		starts[i] = worker.Start{D: d, Overlap: o}
	}
	res, err := s.Begin(ctxT(t), consumer, time.Minute, starts)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if len(res.Admissions) != len(ds) || res.StoreTime.IsZero() {
		t.Fatalf("begin: %+v for %d starts", res, len(ds))
	}
	return res.Admissions
}

func finish(t *testing.T, s worker.Store, consumer string, fs ...worker.Finish) []bool {
	t.Helper()
	owned, err := s.Finish(ctxT(t), consumer, fs)
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	if len(owned) != len(fs) {
		t.Fatalf("finish: %d answers for %d", len(owned), len(fs))
	}
	return owned
}

// Heartbeats reset an entry's idle time without counting a delivery, so
// that a live owner keeps it; once they stop, the entry is taken over and
// the old owner's heartbeat reports it lost.
func testStoreHeartbeat(t *testing.T, env Env) {
	ctx := ctxT(t)
	job := name("hb")
	ids := newProducer(env.Backend).produce(t, job, 1)
	a, b := env.Store(t), env.Store(t)
	streams := []string{streamOf(job)}
	d := fetchN(t, a, "a", streams, 1)[0]
	if d.Tick != ids[0] || d.Job != job || d.Attempt != 1 || d.Deliveries != 1 || d.Epoch <= 0 ||
		d.Stream != streams[0] || d.Payload != `{"n":0}` || d.Enqueued.IsZero() {
		t.Fatalf("delivery %+v", d)
	}
	if more, err := a.Fetch(ctx, "a", streams, 10, 10*time.Millisecond); err != nil || len(more) != 0 {
		t.Fatalf("a second fetch got %v, %v: want nothing, the entry was delivered", more, err)
	}
	for range 3 {
		lost, err := a.Heartbeat(ctx, "a", time.Minute, time.Minute, []worker.Hold{{D: d}})
		if err != nil || len(lost) != 0 {
			t.Fatalf("heartbeat of an owned entry: lost %v, %v", lost, err)
		}
	}
	// Idle time has to pass for these checks; no signal stands in for it.
	// It is long enough that a stalled test process does not make the
	// entry idle between the heartbeat and the reclaim right after it.
	const idle = time.Second
	time.Sleep(idle + 100*time.Millisecond)
	if _, err := a.Heartbeat(ctx, "a", time.Minute, time.Minute, []worker.Hold{{D: d}}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Reclaim(ctx, "b", streams, idle, 10); err != nil || len(got) != 0 {
		t.Fatalf("reclaim right after a heartbeat took %v, %v: the heartbeat must reset the idle time", got, err)
	}
	time.Sleep(idle + 100*time.Millisecond)
	got, err := b.Reclaim(ctx, "b", streams, idle, 10)
	if err != nil || len(got) != 1 || got[0].ID != d.ID || got[0].Tick != d.Tick {
		t.Fatalf("reclaim of an idle entry: %v, %v", got, err)
	}
	if got[0].Deliveries != 2 {
		t.Fatalf("delivery count after one fetch, four heartbeats and one takeover: %d, want 2 (heartbeats must not count)", got[0].Deliveries)
	}
	lost, err := a.Heartbeat(ctx, "a", time.Minute, time.Minute, []worker.Hold{{D: d}})
	if err != nil || len(lost) != 1 || lost[0] != 0 {
		t.Fatalf("heartbeat of an entry taken over: lost %v, %v; want [0]", lost, err)
	}
	if adm := begin(t, a, "a", worker.OverlapAllow, d); adm[0] != worker.NotOwned {
		t.Fatalf("begin by the old owner: %v, want not_owned", adm[0])
	}
	d2 := got[0]
	if adm := begin(t, b, "b", worker.OverlapSkip, d2); adm[0] != worker.Run || d2.Deliveries != 2 {
		t.Fatalf("begin by the new owner: %v (deliveries %d)", adm[0], d2.Deliveries)
	}
	// The run marker is heartbeated with the entry, and lost with it.
	if lost, err := b.Heartbeat(ctx, "b", time.Minute, time.Minute, []worker.Hold{{D: d2, Marker: worker.MarkerRun}}); err != nil || len(lost) != 0 {
		t.Fatalf("heartbeat with the run marker: lost %v, %v", lost, err)
	}
	if lost, err := b.Heartbeat(ctx, "b", time.Minute, time.Minute, []worker.Hold{{D: d2, Marker: worker.MarkerWait}}); err != nil || len(lost) != 1 {
		t.Fatalf("heartbeat claiming a waiter place it does not hold: lost %v, %v; want it lost", lost, err)
	}
	st, err := b.Status(ctx, []string{job})
	if err != nil || st.Jobs[0].InFlight != 1 {
		t.Fatalf("status while running: %+v, %v; want one in flight", st, err)
	}
}

// Settling is fenced by ownership, and a done record answers a retried
// call.
func testStoreFinishFenced(t *testing.T, env Env) {
	ctx := ctxT(t)
	job := name("fence")
	p := newProducer(env.Backend)
	ids := p.produce(t, job, 1)
	a, b := env.Store(t), env.Store(t)
	streams := []string{streamOf(job)}
	d := fetchN(t, a, "a", streams, 1)[0]
	if adm := begin(t, a, "a", worker.OverlapSkip, d); adm[0] != worker.Run {
		t.Fatalf("begin: %v", adm[0])
	}
	got, err := b.Reclaim(ctx, "b", streams, 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("takeover: %v, %v", got, err)
	}
	if owned := finish(t, a, "a", worker.Finish{D: d, Kind: worker.FinishDone, Retention: time.Minute}); owned[0] {
		t.Fatal("the old owner's finish was accepted after a takeover")
	}
	if recs := doneRecords(t, a, ids); len(recs) != 0 {
		t.Fatalf("a fenced finish wrote a done record: %v", recs)
	}
	d2 := got[0]
	// The marker names the same entry: it passes to the new owner.
	if adm := begin(t, b, "b", worker.OverlapSkip, d2); adm[0] != worker.Run {
		t.Fatalf("begin by the new owner: %v, want run (the marker is this entry's)", adm[0])
	}
	for range 2 { // the second call is a retry after a lost reply
		if owned := finish(t, b, "b", worker.Finish{D: d2, Kind: worker.FinishDone, Retention: time.Minute}); !owned[0] {
			t.Fatal("the owner's finish was refused")
		}
	}
	recs := doneRecords(t, b, append(ids, job+":1"))
	if len(recs) != 1 || recs[ids[0]].Entry != d2.ID || recs[ids[0]].Consumer != "b" || recs[ids[0]].At.IsZero() {
		t.Fatalf("done records %+v", recs)
	}
	if owned := finish(t, a, "a", worker.Finish{D: d, Kind: worker.FinishRetry, Err: "x"}); owned[0] {
		t.Fatal("a retry by a consumer that never owned the entry again was accepted")
	}
	st, err := b.Status(ctx, []string{job, "nothing-" + job})
	if err != nil {
		t.Fatal(err)
	}
	if j := st.Jobs[0]; j.LastOutcome != worker.OutcomeSucceeded || j.LastTick != ids[0] || j.InFlight != 0 || j.LastAt.IsZero() {
		t.Fatalf("status %+v", j)
	}
	if j := st.Jobs[1]; j.LastOutcome != "" || j.InFlight != 0 || j.Dead != 0 {
		t.Fatalf("status of a job never seen: %+v", j)
	}
	// The marker was released with the finish: the next tick of the job runs.
	p.produce(t, job, 1)
	d3 := fetchN(t, b, "b", streams, 1)[0]
	if adm := begin(t, b, "b", worker.OverlapSkip, d3); adm[0] != worker.Run {
		t.Fatalf("begin after the previous run finished: %v, want run", adm[0])
	}
}

// Any number of workers may promote due retries at once; each retry
// re-enters its stream exactly once, with the next attempt number.
func testStorePromote(t *testing.T, env Env) {
	ctx := ctxT(t)
	job := name("promote")
	const n = 20
	ids := newProducer(env.Backend).produce(t, job, n)
	s := env.Store(t)
	streams := []string{streamOf(job)}
	ds := fetchN(t, s, "a", streams, n)
	for _, a := range begin(t, s, "a", worker.OverlapAllow, ds...) {
		if a != worker.Run {
			t.Fatalf("begin: %v", a)
		}
	}
	fs := make([]worker.Finish, n)
	for i, d := range ds {
		fs[i] = worker.Finish{D: d, Kind: worker.FinishRetry, Err: "again"}
	}
	for _, ok := range finish(t, s, "a", fs...) {
		if !ok {
			t.Fatal("retry refused")
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := env.Store(t)
			for {
				p, err := st.PromoteDue(ctx, 3)
				if err != nil {
					t.Errorf("promote: %v", err)
					return
				}
				mu.Lock()
				total += p.N
				mu.Unlock()
				if p.N == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if total != n {
		t.Fatalf("promoted %d retries, want %d", total, n)
	}
	again := fetchN(t, s, "a", streams, n)
	seen := map[string]bool{}
	for i, d := range again {
		if d.Attempt != 2 || seen[d.Tick] || d.ID == ds[i].ID {
			t.Fatalf("promoted entry %+v: want attempt 2, each tick once, a new entry", d)
		}
		seen[d.Tick] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("tick %s was not promoted", id)
		}
	}
	if extra, err := s.Fetch(ctx, "a", streams, 10, 50*time.Millisecond); err != nil || len(extra) != 0 {
		t.Fatalf("entries beyond the promoted ones: %v, %v", extra, err)
	}
	p, err := s.PromoteDue(ctx, 10)
	if err != nil || p.N != 0 || p.Next >= 0 {
		t.Fatalf("promote with nothing scheduled: %+v, %v", p, err)
	}
	begin(t, s, "a", worker.OverlapAllow, again[0])
	finish(t, s, "a", worker.Finish{D: again[0], Kind: worker.FinishRetry, Err: "later", Delay: time.Hour})
	p, err = s.PromoteDue(ctx, 10)
	if err != nil || p.N != 0 || p.Next <= 59*time.Minute || p.Next > time.Hour {
		t.Fatalf("promote before a retry is due: %+v, %v; want none promoted, next in about an hour", p, err)
	}
}

// Two groups each run every tick, and a retry or a done record of one
// group is nothing to the other.
func testStoreGroups(t *testing.T, env Env) {
	ctx := ctxT(t)
	job := name("groups")
	ids := newProducer(env.Backend).produce(t, job, 1)
	g1, g2 := env.StoreOf(t, "g1"), env.StoreOf(t, "g2")
	streams := []string{streamOf(job)}
	d1 := fetchN(t, g1, "a", streams, 1)[0]
	d2 := fetchN(t, g2, "a", streams, 1)[0]
	begin(t, g1, "a", worker.OverlapSkip, d1)
	if adm := begin(t, g2, "a", worker.OverlapSkip, d2); adm[0] != worker.Run {
		t.Fatalf("group 2 skipped because of group 1's marker: %v", adm[0])
	}
	finish(t, g1, "a", worker.Finish{D: d1, Kind: worker.FinishRetry, Err: "x"})
	finish(t, g2, "a", worker.Finish{D: d2, Kind: worker.FinishDone, Retention: time.Minute})
	if p, err := g1.PromoteDue(ctx, 10); err != nil || p.N != 1 {
		t.Fatalf("promote in group 1: %+v, %v", p, err)
	}
	if got, err := g2.Fetch(ctx, "a", streams, 10, 100*time.Millisecond); err != nil || len(got) != 0 {
		t.Fatalf("group 2 received group 1's retry: %v, %v", got, err)
	}
	r := fetchN(t, g1, "a", streams, 1)[0]
	if r.Tick != ids[0] || r.Attempt != 2 {
		t.Fatalf("group 1's retry: %+v", r)
	}
	if recs := doneRecords(t, g1, ids); len(recs) != 0 {
		t.Fatalf("group 2's done record is visible in group 1: %v", recs)
	}
	if recs := doneRecords(t, g2, ids); len(recs) != 1 {
		t.Fatalf("group 2's done record: %v", recs)
	}
}

// Dead letters are listed oldest first, page by id, and a replay puts the
// tick back on its stream (same tick id, attempt 1) exactly once.
func testStoreDeadLetters(t *testing.T, env Env) {
	ctx := ctxT(t)
	job := name("dead")
	ids := newProducer(env.Backend).produce(t, job, 2)
	s := env.Store(t)
	streams := []string{streamOf(job)}
	ds := fetchN(t, s, "a", streams, 2)
	begin(t, s, "a", worker.OverlapAllow, ds...)
	finish(t, s, "a", worker.Finish{D: ds[0], Kind: worker.FinishDead, Err: "boom 0"},
		worker.Finish{D: ds[1], Kind: worker.FinishDead, Err: "boom 1"})
	dls := deadLetters(t, s)
	if len(dls) != 2 {
		t.Fatalf("dead letters: %+v", dls)
	}
	for i, dl := range dls {
		if dl.Tick != ids[i] || dl.Job != job || dl.Error != "boom "+string(rune('0'+i)) || dl.Attempts != 1 ||
			dl.Deliveries != 1 || dl.Stream != streams[0] || dl.Entry != ds[i].ID || dl.Consumer != "a" ||
			dl.Slot != ds[i].Slot || dl.Epoch != ds[i].Epoch || dl.Payload != ds[i].Payload || dl.At.IsZero() || dl.ID == "" {
			t.Fatalf("dead letter %d: %+v", i, dl)
		}
	}
	if page, err := s.DeadLetters(ctx, dls[0].ID, 10); err != nil || len(page) != 1 || page[0].ID != dls[1].ID {
		t.Fatalf("dead letters after the first: %+v, %v", page, err)
	}
	st, err := s.Status(ctx, []string{job})
	if err != nil || st.Dead != 2 || st.Jobs[0].Dead != 2 || st.Jobs[0].LastOutcome != worker.OutcomeDead {
		t.Fatalf("status: %+v, %v", st, err)
	}
	dl, err := s.Replay(ctx, dls[0].ID)
	if err != nil || dl.Tick != ids[0] {
		t.Fatalf("replay: %+v, %v", dl, err)
	}
	if _, err := s.Replay(ctx, dls[0].ID); !errors.Is(err, worker.ErrDeadLetterNotFound) {
		t.Fatalf("second replay of one dead letter: %v, want ErrDeadLetterNotFound", err)
	}
	r := fetchN(t, s, "a", streams, 1)[0]
	if r.Tick != ids[0] || r.Attempt != 1 || r.ID == ds[0].ID || r.Payload != ds[0].Payload {
		t.Fatalf("replayed entry %+v", r)
	}
	if rest := deadLetters(t, s); len(rest) != 1 || rest[0].ID != dls[1].ID {
		t.Fatalf("dead letters after the replay: %+v", rest)
	}
	st, err = s.Status(ctx, []string{job})
	if err != nil || st.Dead != 1 || st.Jobs[0].Dead != 1 {
		t.Fatalf("status after the replay: %+v, %v", st, err)
	}
	if !strings.Contains(dls[1].Error, "boom") {
		t.Fatal(dls[1].Error)
	}
}
