// Package backendtest is the conformance suite that every onetick backend
// runs: the lease (acquire races, renew after loss, release and handover,
// watch), the fenced claim (stale holders, duplicates, ordering, early
// slots, batches, trimming), the history of terms, and the scheduler on top
// of the backend (catch-up, skip, one leader among three replicas).
//
// A backend package calls Exercise from its tests with a Harness. The
// suite runs on the real clock against the real store.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/clockskew"
)

// Harness adapts a backend to the suite.
type Harness struct {
	// New returns a fresh backend with empty state (its own key prefix,
	// say). The suite closes it at the end of the subtest.
	New func(t *testing.T) onetick.Backend
	// Expire makes the current lease expire at once, as if its holder had
	// paused past its TTL.
	Expire func(t *testing.T, b onetick.Backend)
	// Stream reads a stream's entries, oldest first.
	Stream func(t *testing.T, b onetick.Backend, key string) []onetick.TickRecord
	// Damage breaks one piece of the backend's state the way an
	// operator's mistake or another application would (see Damage). It
	// reports false when the backend cannot hold that kind of damage; the
	// case is then skipped with that reason.
	Damage func(t *testing.T, b onetick.Backend, d Damage) bool
	// Fix undoes a damage the way an operator would by hand: deleting the
	// damaged key or field.
	Fix func(t *testing.T, b onetick.Backend, d Damage)
	// StreamKey, if set, maps the suite's stream names to the backend's
	// keys (a Redis Cluster needs every key in the prefix's hash slot).
	StreamKey func(name string) string
	// NewRetained, if set, is New for a backend whose run ledger is kept
	// with retention r; the ledger's retention cases need it and are
	// skipped without it. Only for backends that implement onetick.Ledger.
	NewRetained func(t *testing.T, r onetick.LedgerRetention) onetick.Backend
	// SharedJobState declares a store whose shard views share the
	// job-keyed state (last-fired slots, tick and trigger records,
	// controls, ledger) and list only their shard's jobs (PostgreSQL,
	// docs/shards.md decision 5). Shards then checks each view with the
	// jobs onetick.ShardOf puts in it, the only way the engine uses a
	// view, and skips the cases that give one job to two views.
	SharedJobState bool
}

// sk is the key of the suite's stream name (see Harness.StreamKey); the
// suite sets it for the duration of Exercise.
var sk = func(name string) string { return name }

// Exercise runs the whole suite.
func Exercise(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, b onetick.Backend)
	}{
		{"AcquireRace", testAcquireRace},
		{"EpochIncreases", testEpochIncreases},
		{"RenewAfterLoss", testRenewAfterLoss},
		{"ReleaseAndHandover", testReleaseAndHandover},
		{"Leader", testLeader},
		{"ClaimFencesStaleHolder", testClaimFencesStaleHolder},
		{"ClaimFencedWithoutSuccessor", testClaimFencedWithoutSuccessor},
		{"ClaimDuplicateAcrossTerms", testClaimDuplicateAcrossTerms},
		{"ClaimRetrySameTerm", testClaimRetrySameTerm},
		{"ClaimSlotOrder", testClaimSlotOrder},
		{"ClaimOutOfOrder", testClaimOutOfOrder},
		{"ClaimEarly", testClaimEarly},
		{"ClaimBatch", testClaimBatch},
		{"ClaimMaxLen", testClaimMaxLen},
		{"History", testHistory},
		{"Time", testTime},
		{"SchedulerCatchUp", testSchedulerCatchUp},
		{"SchedulerSkipsBeyondGrace", testSchedulerSkipsBeyondGrace},
		{"SchedulerMaxCatchup", testSchedulerMaxCatchup},
		{"SchedulerNoHistoryStartsNow", testSchedulerNoHistory},
		{"ThreeReplicas", testThreeReplicas},
		{"ClockSkew", testClockSkew},
	}
	tests = append(tests, damageTests...)
	tests = append(tests, controlTests...)
	tests = append(tests, jobStoreTests...)
	tests = append(tests, ledgerTests...)
	if h.StreamKey != nil {
		sk = h.StreamKey
		defer func() { sk = func(name string) string { return name } }()
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h, fresh(t, h)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, b onetick.Backend, holder string, ttl time.Duration) onetick.Lease {
	t.Helper()
	g, err := b.Acquire(ctxT(t), holder, ttl)
	if err != nil {
		t.Fatalf("acquire %s: %v", holder, err)
	}
	if g.Lease.Holder != holder || g.Lease.Epoch <= 0 {
		t.Fatalf("acquire %s: got lease %+v", holder, g.Lease)
	}
	return g.Lease
}

// pastSlot is a slot-aligned instant (to step) at least back before now.
func pastSlot(back, step time.Duration) onetick.Slot {
	t := time.Now().Add(-back).Truncate(step)
	return onetick.SlotOf(t)
}

func tick(job string, slot onetick.Slot, stream string) onetick.Tick {
	return onetick.Tick{Job: job, Slot: slot, Stream: stream, Payload: `{"n":1}`, Retention: time.Minute}
}

func mustClaim(t *testing.T, b onetick.Backend, l onetick.Lease, ticks ...onetick.Tick) []onetick.Outcome {
	t.Helper()
	res, err := b.Claim(ctxT(t), l, ticks)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(res.Outcomes) != len(ticks) {
		t.Fatalf("claim: %d outcomes for %d ticks", len(res.Outcomes), len(ticks))
	}
	return res.Outcomes
}

func testAcquireRace(t *testing.T, _ Harness, b onetick.Backend) {
	const n = 32
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []onetick.Lease
		held    []onetick.Lease
		start   = make(chan struct{})
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			g, err := b.Acquire(context.Background(), fmt.Sprintf("c%d", i), 10*time.Second)
			mu.Lock()
			defer mu.Unlock()
			var he *onetick.HeldError
			switch {
			case err == nil:
				winners = append(winners, g.Lease)
			case errors.As(err, &he) && errors.Is(err, onetick.ErrLeaseHeld):
				held = append(held, he.Leader.Lease)
			default:
				t.Errorf("acquire: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d contenders won the lease, want exactly 1: %v", len(winners), winners)
	}
	for _, l := range held {
		if l != winners[0] {
			t.Errorf("a loser saw holder %+v, want the winner %+v", l, winners[0])
		}
	}
	if len(held) != n-1 {
		t.Errorf("%d losers, want %d", len(held), n-1)
	}
}

func testEpochIncreases(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	a := mustAcquire(t, b, "a", 10*time.Second)
	if err := b.Release(ctx, a); err != nil {
		t.Fatalf("release: %v", err)
	}
	a2 := mustAcquire(t, b, "a", 10*time.Second)
	if a2.Epoch <= a.Epoch {
		t.Fatalf("re-acquired epoch %d, want more than %d", a2.Epoch, a.Epoch)
	}
	// The old term of the same holder is a different lease.
	if _, err := b.Renew(ctx, a, 10*time.Second); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Fatalf("renew with the old term: %v, want ErrLeaseLost", err)
	}
	h.Expire(t, b)
	c := mustAcquire(t, b, "c", 10*time.Second)
	if c.Epoch <= a2.Epoch {
		t.Fatalf("epoch after expiry %d, want more than %d", c.Epoch, a2.Epoch)
	}
	// The epoch is at least the store's clock in milliseconds, so a store
	// that forgets its counter cannot issue an old epoch again.
	if now := onetick.Epoch(time.Now().Add(-time.Minute).UnixMilli()); c.Epoch < now {
		t.Fatalf("epoch %d is below the clock's milliseconds a minute ago (%d)", c.Epoch, now)
	}
}

func testRenewAfterLoss(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	a := mustAcquire(t, b, "a", 10*time.Second)
	g, err := b.Renew(ctx, a, 10*time.Second)
	if err != nil || g.Lease != a || g.StoreTime.IsZero() {
		t.Fatalf("renew while held: %+v, %v", g, err)
	}
	h.Expire(t, b)
	if _, err := b.Renew(ctx, a, 10*time.Second); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Fatalf("renew after expiry: %v, want ErrLeaseLost", err)
	}
	bl := mustAcquire(t, b, "b", 10*time.Second)
	if _, err := b.Renew(ctx, a, 10*time.Second); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Fatalf("renew of a lease someone else holds: %v, want ErrLeaseLost", err)
	}
	if err := b.Release(ctx, a); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Fatalf("release of a lease someone else holds: %v, want ErrLeaseLost", err)
	}
	info, err := b.Leader(ctx)
	if err != nil || !info.Held || info.Lease != bl {
		t.Fatalf("leader after the stale renew and release: %+v, %v; want %+v", info, err, bl)
	}
}

func testReleaseAndHandover(t *testing.T, _ Harness, b onetick.Backend) {
	ctx := ctxT(t)
	wctx, cancel := context.WithCancel(ctx)
	watch := b.Watch(wctx)
	a := mustAcquire(t, b, "a", 30*time.Second)
	if _, err := b.Acquire(ctx, "b", 30*time.Second); !errors.Is(err, onetick.ErrLeaseHeld) {
		t.Fatalf("acquire while held: %v", err)
	}
	// Drain notifications from before the release.
	for len(watch) > 0 {
		<-watch
	}
	start := time.Now()
	if err := b.Release(ctx, a); err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case <-watch:
	case <-time.After(5 * time.Second):
		t.Fatal("no watch notification within 5s of a release")
	}
	bl := mustAcquire(t, b, "b", 30*time.Second)
	if d := time.Since(start); d > time.Second {
		t.Errorf("handover took %s, want under 1s", d)
	}
	if bl.Epoch <= a.Epoch {
		t.Errorf("epoch %d after handover, want more than %d", bl.Epoch, a.Epoch)
	}
	if err := b.Release(ctx, a); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Errorf("second release: %v, want ErrLeaseLost", err)
	}
	cancel()
	for range watch { // closed after cancel
	}
}

func testLeader(t *testing.T, _ Harness, b onetick.Backend) {
	ctx := ctxT(t)
	info, err := b.Leader(ctx)
	if err != nil || info.Held {
		t.Fatalf("leader of an empty store: %+v, %v", info, err)
	}
	a := mustAcquire(t, b, "host:1:abc|weird", 20*time.Second)
	info, err = b.Leader(ctx)
	if err != nil || !info.Held || info.Lease != a {
		t.Fatalf("leader: %+v, %v; want %+v", info, err, a)
	}
	if info.TTL <= 10*time.Second || info.TTL > 20*time.Second {
		t.Errorf("leader ttl %s, want within (10s, 20s]", info.TTL)
	}
}

func testClaimFencesStaleHolder(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	stream := sk("fence:stream")
	a := mustAcquire(t, b, "a", 10*time.Second)
	s0 := pastSlot(10*time.Second, time.Second)
	if o := mustClaim(t, b, a, tick("j", s0, stream)); o[0] != onetick.Claimed {
		t.Fatalf("first claim: %v", o)
	}
	// a pauses past its ttl; b takes over.
	h.Expire(t, b)
	bl := mustAcquire(t, b, "b", 10*time.Second)
	// a wakes and tries to fire the next slots: the store refuses all of it.
	_, err := b.Claim(ctx, a, []onetick.Tick{tick("j", s0+1000, stream), tick("j", s0+2000, stream)})
	if !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("stale claim: %v, want ErrFenced", err)
	}
	// Even an empty claim is fenced (found by the claim fuzzer).
	if _, err := b.Claim(ctx, a, nil); !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("stale empty claim: %v, want ErrFenced", err)
	}
	if got := h.Stream(t, b, stream); len(got) != 1 {
		t.Fatalf("stream after a fenced claim has %d entries, want 1: %+v", len(got), got)
	}
	last, _ := b.LastFired(ctx, []string{"j"})
	if last["j"] != s0 {
		t.Fatalf("last fired moved by a fenced claim: %v", last)
	}
	// The new leader goes on from the same sequence.
	if o := mustClaim(t, b, bl, tick("j", s0+1000, stream)); o[0] != onetick.Claimed {
		t.Fatalf("new leader's claim: %v", o)
	}
	got := h.Stream(t, b, stream)
	if len(got) != 2 || got[1].Epoch != bl.Epoch || got[1].Replica != "b" || got[0].Epoch != a.Epoch {
		t.Fatalf("stream: %+v", got)
	}
	terms, err := b.History(ctx, 10)
	if err != nil || len(terms) != 2 {
		t.Fatalf("history: %+v, %v", terms, err)
	}
	if terms[1].Epoch != a.Epoch || terms[1].Reason != onetick.EndFenced {
		t.Errorf("a's term: %+v, want reason fenced", terms[1])
	}
}

func testClaimFencedWithoutSuccessor(t *testing.T, h Harness, b onetick.Backend) {
	a := mustAcquire(t, b, "a", 10*time.Second)
	h.Expire(t, b)
	_, err := b.Claim(ctxT(t), a, []onetick.Tick{tick("j", pastSlot(time.Second, time.Second), sk("s"))})
	if !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("claim with an expired lease and no successor: %v, want ErrFenced", err)
	}
	if got := h.Stream(t, b, sk("s")); len(got) != 0 {
		t.Fatalf("stream: %+v", got)
	}
}

func testClaimDuplicateAcrossTerms(t *testing.T, _ Harness, b onetick.Backend) {
	ctx := ctxT(t)
	a := mustAcquire(t, b, "a", 10*time.Second)
	s := pastSlot(5*time.Second, time.Second)
	mustClaim(t, b, a, tick("j", s, sk("st")))
	if err := b.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	bl := mustAcquire(t, b, "b", 10*time.Second)
	if o := mustClaim(t, b, bl, tick("j", s, sk("st"))); o[0] != onetick.Duplicate {
		t.Fatalf("claim of a tick another term claimed: %v, want duplicate", o[0])
	}
}

func testClaimRetrySameTerm(t *testing.T, h Harness, b onetick.Backend) {
	a := mustAcquire(t, b, "a", 10*time.Second)
	s := pastSlot(5*time.Second, time.Second)
	mustClaim(t, b, a, tick("j", s, sk("st")))
	// A claim whose answer was lost is retried: the store recognises the
	// term's own tick, answers claimed, and appends nothing.
	if o := mustClaim(t, b, a, tick("j", s, sk("st"))); o[0] != onetick.Claimed {
		t.Fatalf("retried claim: %v, want claimed", o[0])
	}
	if got := h.Stream(t, b, sk("st")); len(got) != 1 {
		t.Fatalf("stream after a retried claim has %d entries, want 1", len(got))
	}
}

func testClaimSlotOrder(t *testing.T, h Harness, b onetick.Backend) {
	a := mustAcquire(t, b, "a", 10*time.Second)
	s := pastSlot(30*time.Second, time.Second)
	mustClaim(t, b, a, tick("j", s+5000, sk("st")))
	// An in-order claim for a slot at or before the last-fired one is a
	// duplicate even though no tick record exists for it.
	o := mustClaim(t, b, a, tick("j", s, sk("st")), tick("j", s+5000-1, sk("st")), tick("other", s, sk("st")))
	if o[0] != onetick.Duplicate || o[1] != onetick.Duplicate || o[2] != onetick.Claimed {
		t.Fatalf("outcomes %v, want [duplicate duplicate claimed]", o)
	}
	if got := h.Stream(t, b, sk("st")); len(got) != 2 {
		t.Fatalf("stream has %d entries, want 2", len(got))
	}
}

func testClaimOutOfOrder(t *testing.T, _ Harness, b onetick.Backend) {
	ctx := ctxT(t)
	a := mustAcquire(t, b, "a", 10*time.Second)
	s := pastSlot(30*time.Second, time.Second)
	mustClaim(t, b, a, tick("j", s+10000, sk("st")))
	back := tick("j", s, sk("st"))
	back.OutOfOrder = true
	if o := mustClaim(t, b, a, back); o[0] != onetick.Claimed {
		t.Fatalf("backfill claim: %v", o[0])
	}
	last, _ := b.LastFired(ctx, []string{"j"})
	if last["j"] != s+10000 {
		t.Fatalf("a backfill moved last fired to %v", last["j"])
	}
	if err := b.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	bl := mustAcquire(t, b, "b", 10*time.Second)
	if o := mustClaim(t, b, bl, back); o[0] != onetick.Duplicate {
		t.Fatalf("second backfill of the same tick by another term: %v, want duplicate", o[0])
	}
}

func testClaimEarly(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	a := mustAcquire(t, b, "a", 10*time.Second)
	st, err := b.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	future := onetick.SlotOf(st.Add(10 * time.Second))
	o := mustClaim(t, b, a, tick("j", future, sk("st")), tick("k", onetick.SlotOf(st.Add(-time.Second)), sk("st")))
	if o[0] != onetick.Early || o[1] != onetick.Claimed {
		t.Fatalf("outcomes %v, want [early claimed]", o)
	}
	last, _ := b.LastFired(ctx, []string{"j"})
	if _, ok := last["j"]; ok {
		t.Fatalf("an early tick moved last fired: %v", last)
	}
	if got := h.Stream(t, b, sk("st")); len(got) != 1 || got[0].Job != "k" {
		t.Fatalf("stream: %+v", got)
	}
}

func testClaimBatch(t *testing.T, h Harness, b onetick.Backend) {
	a := mustAcquire(t, b, "a", 10*time.Second)
	s := pastSlot(time.Hour, time.Second)
	var ticks []onetick.Tick
	for i := 0; i < 1000; i++ {
		ticks = append(ticks, tick(fmt.Sprintf("job%d", i%10), s+onetick.Slot(i/10*1000), sk(fmt.Sprintf("st%d", i%10))))
	}
	o := mustClaim(t, b, a, ticks...)
	for i, x := range o {
		if x != onetick.Claimed {
			t.Fatalf("tick %d: %v", i, x)
		}
	}
	for k := 0; k < 10; k++ {
		got := h.Stream(t, b, sk(fmt.Sprintf("st%d", k)))
		if len(got) != 100 {
			t.Fatalf("stream %d has %d entries, want 100", k, len(got))
		}
		for i, r := range got {
			want := s + onetick.Slot(i*1000)
			if r.Slot != want || r.Job != fmt.Sprintf("job%d", k) || r.Tick != onetick.TickID(r.Job, want) ||
				r.Epoch != a.Epoch || r.Replica != "a" || r.Payload != `{"n":1}` {
				t.Fatalf("stream %d entry %d: %+v", k, i, r)
			}
		}
	}
	last, err := b.LastFired(ctxT(t), []string{"job0", "job9", "nope"})
	if err != nil || len(last) != 2 || last["job0"] != s+99000 || last["job9"] != s+99000 {
		t.Fatalf("last fired: %v, %v", last, err)
	}
}

func testClaimMaxLen(t *testing.T, h Harness, b onetick.Backend) {
	a := mustAcquire(t, b, "a", 10*time.Second)
	s := pastSlot(time.Hour, time.Second)
	var ticks []onetick.Tick
	for i := 0; i < 1000; i++ {
		tk := tick("j", s+onetick.Slot(i*1000), sk("trim"))
		tk.MaxLen = 10
		ticks = append(ticks, tk)
	}
	mustClaim(t, b, a, ticks...)
	got := h.Stream(t, b, sk("trim"))
	// Approximate trimming keeps at least MaxLen and far fewer than all.
	if len(got) < 10 || len(got) >= 500 {
		t.Fatalf("trimmed stream has %d entries, want between 10 and 500", len(got))
	}
	if got[len(got)-1].Slot != s+999000 {
		t.Fatalf("trimming dropped the newest entry: %+v", got[len(got)-1])
	}
}

func testHistory(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	a := mustAcquire(t, b, "a", 10*time.Second)
	if err := b.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	bl := mustAcquire(t, b, "b", 10*time.Second)
	h.Expire(t, b)
	c := mustAcquire(t, b, "c", 10*time.Second)
	terms, err := b.History(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(terms) != 3 {
		t.Fatalf("history has %d terms, want 3: %+v", len(terms), terms)
	}
	want := []struct {
		l      onetick.Lease
		reason onetick.EndReason
		ended  bool
	}{{c, "", false}, {bl, onetick.EndExpired, true}, {a, onetick.EndReleased, true}}
	for i, w := range want {
		tm := terms[i]
		if tm.Epoch != w.l.Epoch || tm.Holder != w.l.Holder || tm.Reason != w.reason || tm.End.IsZero() == w.ended || tm.Start.IsZero() {
			t.Errorf("term %d: %+v, want %+v reason %q ended %v", i, tm, w.l, w.reason, w.ended)
		}
		if w.ended && tm.End.Before(tm.Start) {
			t.Errorf("term %d ends before it starts: %+v", i, tm)
		}
	}
	if one, _ := b.History(ctx, 1); len(one) != 1 || one[0].Epoch != c.Epoch {
		t.Errorf("History(1): %+v", one)
	}
}

func testTime(t *testing.T, _ Harness, b onetick.Backend) {
	st, err := b.Time(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(st); d > 5*time.Second || d < -5*time.Second {
		t.Fatalf("store time %s is %s away from the local clock", st, d)
	}
}

// --- the scheduler over the backend ---

// recorder is a Sink that lets a test wait for a slot to be delivered.
type recorder struct {
	mu   sync.Mutex
	got  []onetick.TickRecord
	wake chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) Deliver(_ context.Context, ticks []onetick.TickRecord) error {
	r.mu.Lock()
	r.got = append(r.got, ticks...)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

// waitSlot waits until a tick of job at or after slot was delivered.
func (r *recorder) waitSlot(t *testing.T, job string, slot onetick.Slot) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		for _, x := range r.got {
			if x.Job == job && x.Slot >= slot {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("no tick of %s at or after %s within 20s", job, slot)
		}
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

type runner struct {
	s      *onetick.Scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

func startScheduler(t *testing.T, cfg onetick.Config) *runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := onetick.New(cfg)
	if err != nil {
		t.Fatalf("new scheduler: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *runner) stop() {
	r.cancel()
	<-r.done
}

func every(t *testing.T, expr string) onetick.Schedule {
	s, err := cron.Parse(expr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var fastLease = onetick.LeaseConfig{TTL: time.Second, Renew: 300 * time.Millisecond}

// seed records slot as job's last fired slot through a term of its own.
func seed(t *testing.T, b onetick.Backend, job string, slot onetick.Slot, stream string) {
	t.Helper()
	l := mustAcquire(t, b, "seed", 10*time.Second)
	if o := mustClaim(t, b, l, tick(job, slot, stream)); o[0] != onetick.Claimed {
		t.Fatalf("seed claim: %v", o)
	}
	if err := b.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
}

// checkContiguous asserts the entries of job are distinct, ascending and
// step apart, and returns them.
func checkContiguous(t *testing.T, recs []onetick.TickRecord, job string, step onetick.Slot) []onetick.Slot {
	t.Helper()
	var slots []onetick.Slot
	seen := map[onetick.Slot]bool{}
	for _, r := range recs {
		if r.Job != job {
			continue
		}
		if seen[r.Slot] {
			t.Fatalf("slot %s of %s appears twice", r.Slot, job)
		}
		seen[r.Slot] = true
		if n := len(slots); n > 0 && r.Slot != slots[n-1]+step {
			t.Fatalf("slot %s follows %s: want every slot exactly once, in order", r.Slot, slots[n-1])
		}
		slots = append(slots, r.Slot)
	}
	return slots
}

// checkAscending asserts the entries of job are distinct and ascending
// (gaps allowed) and returns their slots.
func checkAscending(t *testing.T, recs []onetick.TickRecord, job string) []onetick.Slot {
	t.Helper()
	var slots []onetick.Slot
	for _, r := range recs {
		if r.Job != job {
			continue
		}
		if n := len(slots); n > 0 && r.Slot <= slots[n-1] {
			t.Fatalf("slot %s of %s follows %s: want each slot once, ascending", r.Slot, job, slots[n-1])
		}
		slots = append(slots, r.Slot)
	}
	if len(slots) == 0 {
		t.Fatalf("no slot of %s fired", job)
	}
	return slots
}

// lateRun seeds a slot of job back in the past as its last fired one
// (none when back is 0), runs one scheduler with job (every 100ms) until it
// fired a slot after it started, and returns the seeded slot, the start,
// the job's stream and the scheduler.
func lateRun(t *testing.T, h Harness, b onetick.Backend, job onetick.Job, back time.Duration) (s0, start onetick.Slot, recs []onetick.TickRecord, s *onetick.Scheduler) {
	t.Helper()
	const step = 100
	if back > 0 {
		s0 = pastSlot(back, step*time.Millisecond)
		seed(t, b, job.Name, s0, job.Stream)
	}
	job.Schedule = every(t, "@every 100ms")
	rec := newRecorder()
	start = onetick.SlotOf(time.Now())
	r := startScheduler(t, onetick.Config{Backend: b, Replica: "r", Lease: fastLease, Sink: rec, Jobs: []onetick.Job{job}})
	rec.waitSlot(t, job.Name, start+step)
	r.stop()
	return s0, start, h.Stream(t, b, job.Stream), r.s
}

func testSchedulerCatchUp(t *testing.T, h Harness, b onetick.Backend) {
	const step = 100
	s0, _, recs, s := lateRun(t, h, b, onetick.Job{Name: "dup", Prefer: onetick.PreferDuplicate, Stream: sk("cu")}, 2*time.Second)
	slots := checkContiguous(t, recs, "dup", step)
	if slots[0] != s0 || slots[1] != s0+step {
		t.Fatalf("catch-up did not resume right after the persisted slot: %v...", slots[:2])
	}
	m := s.Metrics()
	got := testutil.ToFloat64(m.JobCatchupTicks.WithLabelValues("dup"))
	if got < 15 {
		t.Errorf("catch-up counter %v, want at least 15 (2s of 100ms slots)", got)
	}
	if total := testutil.ToFloat64(m.CatchupTicks); total != got {
		t.Errorf("fleet catch-up total %v, want the one job's %v", total, got)
	}
	if got := testutil.ToFloat64(m.JobMissedTicks.WithLabelValues("dup", "duplicate")); got != 0 {
		t.Errorf("missed counter %v, want 0", got)
	}
}

func testSchedulerSkipsBeyondGrace(t *testing.T, h Harness, b onetick.Backend) {
	const step = 100
	s0, start, recs, s := lateRun(t, h, b, onetick.Job{Name: "miss", Prefer: onetick.PreferMissed,
		Grace: time.Second, Stream: sk("sk")}, 4*time.Second)
	first := recs[1].Slot
	if first < start-1000-step {
		t.Fatalf("fired slot %s, more than the 1s grace before the leader started (%s)", first, start)
	}
	// Every slot from the seeded one to the last fired is fired once or
	// counted as missed: the gap before the first, and any other a loaded
	// machine causes (a lost 1 s lease, a new term beyond the grace).
	slots := checkAscending(t, recs[1:], "miss")
	missed := testutil.ToFloat64(s.Metrics().JobMissedTicks.WithLabelValues("miss", "missed"))
	if want := float64((slots[len(slots)-1]-s0)/step - onetick.Slot(len(slots))); missed != want || missed < float64((first-s0)/step-1) {
		t.Fatalf("missed counter %v, want %v (every slot between %s and %s not fired)", missed, want, s0, slots[len(slots)-1])
	}
	// The alerts read the fleet total of the jobs that prefer missed.
	if total := testutil.ToFloat64(s.Metrics().MissedTicks.WithLabelValues("missed")); total != missed {
		t.Fatalf("fleet total of missed slots (prefer missed) %v, want the one job's %v", total, missed)
	}
	checkSkipLedger(t, b, "miss", s0, slots, missed, onetick.SkipGrace)
}

func testSchedulerMaxCatchup(t *testing.T, h Harness, b onetick.Backend) {
	const step = 100
	s0, start, recs, s := lateRun(t, h, b, onetick.Job{Name: "cap", Prefer: onetick.PreferDuplicate,
		MaxCatchup: 5, Stream: sk("mc")}, 3*time.Second)
	// The first wake-up fires at most max_catchup slots: the oldest it
	// fires is at most 5 steps before the leader started; the older ones
	// are skipped and counted. A loaded machine may wake the leader late
	// again later (another batch, capped alike), so the count is checked
	// against every slot not fired, not against the first gap alone.
	slots := checkAscending(t, recs[1:], "cap")
	if slots[0] < start-5*step {
		t.Fatalf("the first wake-up fired %s, more than max_catchup (5) slots before the leader started at %s", slots[0], start)
	}
	missed := testutil.ToFloat64(s.Metrics().JobMissedTicks.WithLabelValues("cap", "duplicate"))
	if want := float64((slots[len(slots)-1]-s0)/step - onetick.Slot(len(slots))); missed != want || missed < 20 {
		t.Fatalf("missed counter %v, want %v (>= 20): every slot not fired beyond max_catchup", missed, want)
	}
	if total := testutil.ToFloat64(s.Metrics().MissedTicks.WithLabelValues("duplicate")); total != missed {
		t.Fatalf("fleet total of missed slots (prefer duplicate) %v, want the one job's %v", total, missed)
	}
	if total := testutil.ToFloat64(s.Metrics().MissedTicks.WithLabelValues("missed")); total != 0 {
		t.Fatalf("fleet total of missed slots (prefer missed) %v, want 0: the job prefers duplicate", total)
	}
	checkSkipLedger(t, b, "cap", s0, slots, missed, onetick.SkipMaxCatchup)
}

func testSchedulerNoHistory(t *testing.T, h Harness, b onetick.Backend) {
	_, start, recs, _ := lateRun(t, h, b, onetick.Job{Name: "new", Prefer: onetick.PreferDuplicate, Stream: sk("nh")}, 0)
	slots := checkContiguous(t, recs, "new", 100)
	if slots[0] < start {
		t.Fatalf("a job with no history fired %s, before the scheduler started (%s)", slots[0], start)
	}
}

// testThreeReplicas: one leader at a time, handover on release in under a
// second, and every slot exactly once across forced leadership changes
// and a stale leader's attempt.
func testThreeReplicas(t *testing.T, h Harness, b onetick.Backend) {
	const step = 50
	type event struct {
		replica string
		lease   onetick.Lease
		at      time.Time
	}
	became := make(chan event, 64)
	rec := newRecorder()
	// A handover on release must come well before the lease could have
	// expired: a TTL of 4 s tells "woken by the release" from "waited for
	// the expiry" with 2 s of room for a loaded machine.
	lease := onetick.LeaseConfig{TTL: 4 * time.Second, Renew: time.Second}
	runners := map[string]*runner{}
	var leaders atomic.Int32
	var maxLeaders atomic.Int32
	var mu sync.Mutex
	start := func(name string) {
		var r *runner
		r = startScheduler(t, onetick.Config{Backend: b, Replica: name, Lease: lease, Sink: rec,
			Jobs: []onetick.Job{{Name: "hb", Schedule: every(t, "@every 50ms"), Prefer: onetick.PreferDuplicate, Stream: sk("three"), MaxCatchup: 10000}},
			OnNewLeader: func(l onetick.Lease) {
				if l.Holder == name {
					became <- event{name, l, time.Now()}
				}
			}})
		mu.Lock()
		runners[name] = r
		mu.Unlock()
	}
	// Watch the invariant: at no sampled instant do two replicas trust
	// their lease at once.
	stopMon := make(chan struct{})
	monDone := make(chan struct{})
	go func() {
		defer close(monDone)
		for {
			select {
			case <-stopMon:
				return
			default:
			}
			mu.Lock()
			n := int32(0)
			for _, r := range runners {
				if r.s.Elector().IsLeader() {
					n++
				}
			}
			mu.Unlock()
			leaders.Store(n)
			if n > maxLeaders.Load() {
				maxLeaders.Store(n)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for _, n := range []string{"r0", "r1", "r2"} {
		start(n)
	}
	first := <-became
	var old []onetick.Lease
	old = append(old, first.lease)
	cur := first
	// Three graceful handovers: stop the leader, a standby takes over.
	for round := 0; round < 3; round++ {
		rec.waitSlot(t, "hb", onetick.SlotOf(time.Now())+4*step)
		mu.Lock()
		r := runners[cur.replica]
		delete(runners, cur.replica)
		mu.Unlock()
		t0 := time.Now()
		r.stop()
		start(fmt.Sprintf("%s-%d", cur.replica, round))
		next := <-became
		if d := next.at.Sub(t0); d > lease.TTL/2 {
			t.Errorf("round %d: handover from %s to %s took %s, want well under the %s TTL (woken by the release)", round, cur.replica, next.replica, d, lease.TTL)
		} else {
			t.Logf("round %d: handover from %s to %s in %s", round, cur.replica, next.replica, d)
		}
		if next.lease.Epoch <= cur.lease.Epoch {
			t.Errorf("round %d: epoch went from %d to %d", round, cur.lease.Epoch, next.lease.Epoch)
		}
		old = append(old, next.lease)
		cur = next
	}
	close(stopMon)
	<-monDone
	if m := maxLeaders.Load(); m > 1 {
		t.Errorf("%d replicas trusted their lease at the same instant", m)
	}
	// A forced change: the lease vanishes under the leader (as after a
	// long pause); another replica takes over within the TTL.
	rec.waitSlot(t, "hb", onetick.SlotOf(time.Now())+step)
	h.Expire(t, b)
	next := <-became
	if next.lease.Epoch <= cur.lease.Epoch {
		t.Fatalf("epoch after the forced change went from %d to %d", cur.lease.Epoch, next.lease.Epoch)
	}
	rec.waitSlot(t, "hb", onetick.SlotOf(time.Now())+4*step)
	// Every superseded leader tries to fire: the store refuses it.
	for _, l := range old {
		_, err := b.Claim(ctxT(t), l, []onetick.Tick{tick("hb", onetick.SlotOf(time.Now())+step, sk("three")),
			tick("hb", onetick.SlotOf(time.Now()), sk("three"))})
		if !errors.Is(err, onetick.ErrFenced) {
			t.Errorf("claim by superseded epoch %d: %v, want ErrFenced", l.Epoch, err)
		}
	}
	mu.Lock()
	all := make([]*runner, 0, len(runners))
	for _, r := range runners {
		all = append(all, r)
	}
	mu.Unlock()
	for _, r := range all {
		r.stop()
	}
	recs := h.Stream(t, b, sk("three"))
	slots := checkContiguous(t, recs, "hb", step)
	if len(slots) < 20 {
		t.Fatalf("only %d slots fired", len(slots))
	}
	var dups float64
	for _, r := range all {
		dups += testutil.ToFloat64(r.s.Metrics().JobDuplicateTicks.WithLabelValues("hb")) + testutil.ToFloat64(r.s.Metrics().DuplicateTicks)
	}
	if dups != 0 {
		t.Errorf("duplicate counter %v, want 0", dups)
	}
	epochs := map[onetick.Epoch]bool{}
	for _, x := range recs {
		epochs[x.Epoch] = true
	}
	if len(epochs) < 4 {
		t.Errorf("ticks came from %d epochs, want at least 4 (one per leader)", len(epochs))
	}
}

// testClockSkew: a replica whose clock runs ahead or behind the store's by
// much more than the tolerance fires no tick before its slot by the
// store's clock, and none twice.
func testClockSkew(t *testing.T, h Harness, b onetick.Backend) {
	for _, off := range []time.Duration{700 * time.Millisecond, -700 * time.Millisecond} {
		stream := sk(fmt.Sprintf("skew%d", off.Milliseconds()))
		rec := newRecorder()
		start := onetick.SlotOf(time.Now())
		r := startScheduler(t, onetick.Config{Backend: b, Replica: "skewed", Lease: fastLease, Sink: rec,
			Clock: clockskew.New(off),
			Jobs:  []onetick.Job{{Name: stream, Schedule: every(t, "@every 100ms"), Prefer: onetick.PreferDuplicate, Stream: stream}}})
		rec.waitSlot(t, stream, start+1000)
		r.stop()
		recs := h.Stream(t, b, stream)
		checkContiguous(t, recs, stream, 100)
		for _, x := range recs {
			at, err := strconv.ParseInt(strings.SplitN(x.ID, "-", 2)[0], 10, 64)
			if err != nil {
				t.Fatalf("entry id %q: %v", x.ID, err)
			}
			// The entry id is the store's clock at append (ms). The store
			// admits at most its tolerance (100ms by default).
			if onetick.Slot(at) < x.Slot-100 {
				t.Errorf("offset %s: slot %s enqueued at store time %s, early", off, x.Slot, onetick.Slot(at))
			}
		}
		if off > 0 {
			if got := testutil.ToFloat64(r.s.Metrics().StoreClockOffset); got > -0.5 {
				t.Errorf("clock offset metric %v, want about -0.7", got)
			}
		}
	}
}
