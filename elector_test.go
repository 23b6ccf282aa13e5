package onetick_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// hangingRenew is a backend whose renewals never answer, as when the store
// stalls or the network drops packets.
type hangingRenew struct {
	onetick.Backend
	renewing chan struct{}
}

func (h hangingRenew) Renew(ctx context.Context, _ onetick.Lease, _ time.Duration) (onetick.Grant, error) {
	h.renewing <- struct{}{}
	<-ctx.Done()
	return onetick.Grant{}, ctx.Err()
}

// crashable drops releases, so that stopping an elector on it looks like a
// crash to the others.
type crashable struct{ onetick.Backend }

func (crashable) Release(context.Context, onetick.Lease) error { return nil }

// crash stops r without a release (r must run on a crashable backend).
func crash(r *electorRun) {
	r.cancel()
	<-r.done
}

type electorRun struct {
	e       *onetick.Elector
	started chan *onetick.Leadership
	stopped chan onetick.Lease
	cancel  context.CancelFunc
	done    chan struct{}
}

func runElector(t *testing.T, b onetick.Leaser, holder string, clock clockwork.Clock, opts ...func(*onetick.ElectorConfig)) *electorRun {
	t.Helper()
	r := &electorRun{started: make(chan *onetick.Leadership, 4), stopped: make(chan onetick.Lease, 4), done: make(chan struct{})}
	cfg := onetick.ElectorConfig{
		Backend: b, Holder: holder, Clock: clock,
		Lease: onetick.LeaseConfig{TTL: 15 * time.Second, Renew: 5 * time.Second, SafetyMargin: 1500 * time.Millisecond},
		OnStartedLeading: func(ctx context.Context, l *onetick.Leadership) {
			r.started <- l
			<-ctx.Done()
		},
		OnStoppedLeading: func(l onetick.Lease) { r.stopped <- l },
	}
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	r.e, err = onetick.NewElector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		_ = r.e.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func block(t *testing.T, fc *clockwork.FakeClock, waiters int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, waiters); err != nil {
		t.Fatalf("waiting for %d timers: %v", waiters, err)
	}
}

// The leader stops trusting its lease at (instant it sent the acquire) +
// TTL - margin, although it never saw a renewal fail, and so before the
// store could grant the lease to anyone else.
func TestElectorStopsAtTrustDeadline(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	mem := memory.New(memory.Options{Clock: fc})
	hang := hangingRenew{mem, make(chan struct{}, 1)}
	r := runElector(t, hang, "a", fc)
	ld := <-r.started
	if want := t0.Add(13500 * time.Millisecond); !ld.Deadline().Equal(want) {
		t.Fatalf("trust deadline %s, want %s", ld.Deadline(), want)
	}
	block(t, fc, 2) // the renew and the deadline timers
	fc.Advance(5 * time.Second)
	<-hang.renewing // the renewal is sent and never answers
	block(t, fc, 1) // the deadline timer
	fc.Advance(8500*time.Millisecond - time.Millisecond)
	if !ld.Trusted() || !r.e.IsLeader() {
		t.Fatal("leader stopped trusting its lease before the deadline")
	}
	fc.Advance(time.Millisecond)
	if l := <-r.stopped; l != ld.Lease {
		t.Fatalf("stopped leading %+v, want %+v", l, ld.Lease)
	}
	if ld.Trusted() {
		t.Fatal("leader still trusts its lease after the deadline")
	}
	// The store would have kept the lease until t0+15s: the replica stopped
	// 1.5s before anyone else could have been granted it. (It released the
	// lease on the way out, so a standby need not wait for that.)
	if fc.Now().After(t0.Add(15 * time.Second)) {
		t.Fatalf("stepped down at %s, after the store's expiry", fc.Now())
	}
	terms, _ := mem.History(context.Background(), 1)
	if len(terms) != 1 || terms[0].Reason != onetick.EndReleased {
		// The replica may already have started a new term.
		if terms, _ = mem.History(context.Background(), 2); len(terms) != 2 || terms[1].Reason != onetick.EndReleased {
			t.Fatalf("history %+v, want the term released", terms)
		}
	}
}

// A successful renewal moves the trust deadline to (instant the renewal
// was sent) + TTL - margin.
func TestElectorRenewExtendsTrust(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	mem := memory.New(memory.Options{Clock: fc})
	r := runElector(t, mem, "a", fc)
	ld := <-r.started
	for i := 1; i <= 3; i++ {
		block(t, fc, 2)
		fc.Advance(5 * time.Second)
		want := t0.Add(time.Duration(i)*5*time.Second + 13500*time.Millisecond)
		for !ld.Deadline().Equal(want) { // the renewal runs in its own goroutine
			block(t, fc, 2)
		}
		info, err := mem.Leader(context.Background())
		if err != nil || info.Lease != ld.Lease || info.TTL != 15*time.Second {
			t.Fatalf("renewal %d: store holds %+v, %v", i, info, err)
		}
	}
}

// recordHandler sends each record it handles, at any level, to its channel.
type recordHandler struct {
	ch    chan slog.Record
	attrs []slog.Attr
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.ch <- r
	return nil
}
func (h recordHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return recordHandler{ch: h.ch, attrs: append(append([]slog.Attr{}, h.attrs...), a...)}
}
func (h recordHandler) WithGroup(string) slog.Handler { return h }

// Each renewal is logged at DEBUG with its epoch and new trust deadline
// (the chaos run records them as "renewed" leader events).
func TestElectorLogsRenewal(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	mem := memory.New(memory.Options{Clock: fc})
	recs := make(chan slog.Record, 64)
	r := runElector(t, mem, "a", fc, func(c *onetick.ElectorConfig) { c.Logger = slog.New(recordHandler{ch: recs}) })
	ld := <-r.started
	block(t, fc, 2)
	fc.Advance(5 * time.Second)
	want := t0.Add(5*time.Second + 13500*time.Millisecond)
	for {
		var rec slog.Record
		select {
		case rec = <-recs:
		case <-time.After(30 * time.Second):
			t.Fatal("no \"renewed leadership\" record")
		}
		if rec.Message != "renewed leadership" {
			continue
		}
		got := map[string]any{}
		rec.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.Any(); return true })
		if rec.Level != slog.LevelDebug || got["epoch"] != int64(ld.Lease.Epoch) {
			t.Fatalf("record %v %q %v; want DEBUG with epoch %d", rec.Level, rec.Message, got, ld.Lease.Epoch)
		}
		if tu, ok := got["trusted_until"].(time.Time); !ok || !tu.Equal(want) {
			t.Fatalf("trusted_until %v, want %v", got["trusted_until"], want)
		}
		return
	}
}

// A renewal refused by the store (someone else holds the lease now) ends
// leadership at once, without releasing the other holder's lease.
func TestElectorStepsDownWhenRenewRefused(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	mem := memory.New(memory.Options{Clock: fc})
	r := runElector(t, mem, "a", fc)
	ld := <-r.started
	mem.ForceExpire()
	other, err := mem.Acquire(context.Background(), "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	block(t, fc, 2)
	fc.Advance(5 * time.Second)
	if l := <-r.stopped; l != ld.Lease {
		t.Fatalf("stopped %+v", l)
	}
	info, _ := mem.Leader(context.Background())
	if info.Lease != other.Lease {
		t.Fatalf("the new holder's lease was touched: %+v", info)
	}
}

// A standby takes over at once when the leader releases, and within one
// TTL when the leader vanishes without releasing.
func TestElectorTakeover(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	mem := memory.New(memory.Options{Clock: fc})
	a := runElector(t, mem, "a", fc)
	la := <-a.started
	b := runElector(t, crashable{Backend: mem}, "b", fc)
	block(t, fc, 3) // a's renew and deadline timers, b's retry timer
	a.cancel()      // graceful: a releases
	<-a.stopped
	lb := <-b.started // b hears the release; no clock advance needed
	if lb.Lease.Holder != "b" || lb.Lease.Epoch <= la.Lease.Epoch {
		t.Fatalf("b leads with %+v", lb.Lease)
	}

	// c stands by; b crashes: it neither renews nor releases. c takes
	// over when the lease expires, having learned the instant from the
	// store, without waiting longer.
	c := runElector(t, mem, "c", fc)
	block(t, fc, 3) // b's renew and deadline timers, c's wait
	crash(b)
	block(t, fc, 1) // c's wait
	fc.Advance(15*time.Second + time.Millisecond)
	lc := <-c.started
	if lc.Lease.Holder != "c" || lc.Lease.Epoch <= lb.Lease.Epoch {
		t.Fatalf("c leads with %+v", lc.Lease)
	}
}

// A standby whose MayAcquire says no never takes the lease, although it is
// free, the retry timer fires and a release is announced; once the gate
// opens, Poke makes it acquire at once, with no clock advance.
func TestElectorGatedStandby(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	mem := memory.New(memory.Options{Clock: fc})
	var allow atomic.Bool
	asked := make(chan bool, 64)
	r := runElector(t, mem, "a", fc, func(c *onetick.ElectorConfig) {
		c.MayAcquire = func() bool {
			ok := allow.Load()
			select {
			case asked <- ok:
			default:
			}
			return ok
		}
	})
	ctx := context.Background()
	// stillFree waits for the elector's answer (false) and for its next
	// wait to begin, then checks that nobody holds the lease.
	stillFree := func(when string) {
		t.Helper()
		if ok := <-asked; ok {
			t.Fatalf("%s: the gate answered true", when)
		}
		block(t, fc, 1) // the retry timer: the loop is back to waiting
		if info, err := mem.Leader(ctx); err != nil || info.Held {
			t.Fatalf("%s: a gated standby acquired: %+v, %v", when, info, err)
		}
		if r.e.IsLeader() {
			t.Fatalf("%s: a gated standby says it leads", when)
		}
	}
	stillFree("at start")
	for i := range 3 {
		fc.Advance(time.Hour) // past any retry period and TTL
		stillFree("after retry " + strconv.Itoa(i+1))
	}
	// Another replica takes and releases the lease: the release notice
	// wakes the gated standby, which still does not acquire.
	g, err := mem.Acquire(ctx, "b", 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	stillFree("after a release notice")

	now := fc.Now()
	allow.Store(true)
	r.e.Poke()
	ld := <-r.started
	if ld.Lease.Holder != "a" || ld.Lease.Epoch <= g.Lease.Epoch {
		t.Fatalf("leads with %+v", ld.Lease)
	}
	if !fc.Now().Equal(now) {
		t.Fatal("the clock moved")
	}
	if info, err := mem.Leader(ctx); err != nil || info.Lease != ld.Lease {
		t.Fatalf("store holds %+v, %v; want %+v", info, err, ld.Lease)
	}
}

// StepDown hands the lease over at once: the term's work in flight
// finishes under its lease (a claim made after leadership's ctx is done
// is accepted), then the lease is released, so a standby takes it without
// waiting for the TTL. The term is recorded as released, a claim under it
// is fenced from then on, and the stepped-down elector, its gate closed,
// stays standby.
func TestElectorStepDown(t *testing.T) {
	fc := clockwork.NewFakeClockAt(t0)
	mem := memory.New(memory.Options{Clock: fc})
	ctx := context.Background()
	tk := func(job string) []onetick.Tick {
		return []onetick.Tick{{Job: job, Slot: onetick.SlotOf(t0.Add(-time.Minute)), Stream: "s", Retention: time.Minute}}
	}
	var allowA atomic.Bool
	allowA.Store(true)
	inFlight := make(chan onetick.ClaimResult, 4)
	a := runElector(t, mem, "a", fc, func(c *onetick.ElectorConfig) {
		c.MayAcquire = allowA.Load
		started := c.OnStartedLeading
		c.OnStartedLeading = func(lctx context.Context, l *onetick.Leadership) {
			started(lctx, l) // reports the term, returns when it ends
			res, err := mem.Claim(ctx, l.Lease, tk("in-flight"))
			if err != nil {
				t.Errorf("the claim in flight while stepping down: %v", err)
			}
			inFlight <- res
		}
	})
	la := <-a.started
	b := runElector(t, mem, "b", fc)
	block(t, fc, 3) // a's renew and deadline timers, b's wait for the TTL

	allowA.Store(false)
	if !a.e.StepDown() {
		t.Fatal("StepDown of a leader reports no term")
	}
	if l := <-a.stopped; l != la.Lease {
		t.Fatalf("stopped %+v, want %+v", l, la.Lease)
	}
	if res := <-inFlight; len(res.Outcomes) != 1 || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("the claim in flight: %+v, want claimed (before the release)", res)
	}
	var lb *onetick.Leadership
	select {
	case lb = <-b.started: // woken by the release: no clock advance
	case <-time.After(30 * time.Second):
		t.Fatal("b did not take the lease after a's step-down without waiting for its TTL")
	}
	if lb.Lease.Holder != "b" || lb.Lease.Epoch <= la.Lease.Epoch {
		t.Fatalf("b leads with %+v", lb.Lease)
	}
	if !fc.Now().Equal(t0) {
		t.Fatalf("the clock moved to %s", fc.Now())
	}
	if _, err := mem.Claim(ctx, la.Lease, tk("late")); !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("claim under the stepped-down term: %v, want ErrFenced", err)
	}
	terms, err := mem.History(ctx, 2)
	if err != nil || len(terms) != 2 || terms[1].Epoch != la.Lease.Epoch || terms[1].Reason != onetick.EndReleased {
		t.Fatalf("history %+v, %v; want a's term released", terms, err)
	}
	// a stands by with its gate closed: b's step-down frees the lease and
	// a does not take it.
	if a.e.StepDown() {
		t.Fatal("StepDown of a standby reports a term")
	}
	if !b.e.StepDown() {
		t.Fatal("StepDown of b reports no term")
	}
	<-b.stopped
	lb2 := <-b.started // b's gate is open: it takes the lease back
	if lb2.Lease.Holder != "b" || lb2.Lease.Epoch <= lb.Lease.Epoch {
		t.Fatalf("after b's step-down the lease went to %+v", lb2.Lease)
	}
	select {
	case l := <-a.started:
		t.Fatalf("a, gated, led again: %+v", l.Lease)
	default:
	}
}

// gatedClaims pauses the first claim after it is armed, as a leader
// stopped by GC or SIGSTOP between deciding to fire and reaching the store.
type gatedClaims struct {
	onetick.Backend
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedClaims) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	g.mu.Lock()
	pause := g.armed
	g.armed = false
	g.mu.Unlock()
	if pause {
		close(g.entered)
		<-g.gate
	}
	return g.Backend.Claim(ctx, l, ticks)
}

// A leader paused past its TTL in the middle of a claim wakes after another
// replica took over: the store refuses its claim, counts it as fenced, and
// the replica steps down. No slot is enqueued twice.
func TestStaleLeaderIsFenced(t *testing.T) {
	mem := memory.New(memory.Options{})
	sched, _ := cron.Parse("@every 50ms", nil)
	jobs := []onetick.Job{{Name: "hb", Schedule: sched, Prefer: onetick.PreferDuplicate, Stream: "s"}}
	lease := onetick.LeaseConfig{TTL: time.Second, Renew: 300 * time.Millisecond}
	g := &gatedClaims{Backend: mem, entered: make(chan struct{}), gate: make(chan struct{})}
	fired := make(chan onetick.Epoch, 1000)
	sink := onetick.SinkFunc(func(_ context.Context, ticks []onetick.TickRecord) error {
		for _, x := range ticks {
			fired <- x.Epoch
		}
		return nil
	})
	newSched := func(b onetick.Backend, name string) (*onetick.Scheduler, func()) {
		s, err := onetick.New(onetick.Config{Backend: b, Replica: name, Lease: lease, Jobs: jobs, Sink: sink})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return s, stop
	}
	a, stopA := newSched(g, "a")
	epochA := <-fired // a leads and fires
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	<-g.entered // a is now paused inside a claim
	mem.ForceExpire()
	_, stopB := newSched(mem, "b")
	for e := range fired { // wait until b fires
		if e > epochA {
			break
		}
	}
	close(g.gate) // a wakes
	stopB()
	stopA()
	if got := testutil.ToFloat64(a.Metrics().JobFencedTicks.WithLabelValues("hb")); got < 1 {
		t.Fatalf("fenced counter of the stale leader %v, want >= 1", got)
	}
	if got := testutil.ToFloat64(a.Metrics().FencedTicks); got < 1 {
		t.Fatalf("fleet total of fenced ticks of the stale leader %v, want >= 1", got)
	}
	seen := map[onetick.Slot]onetick.Epoch{}
	var maxA onetick.Slot
	minB := onetick.Slot(1 << 62)
	for _, x := range mem.Stream("s") {
		if e, dup := seen[x.Slot]; dup {
			t.Fatalf("slot %s enqueued twice (epochs %d and %d)", x.Slot, e, x.Epoch)
		}
		seen[x.Slot] = x.Epoch
		if x.Epoch == epochA {
			maxA = max(maxA, x.Slot)
		} else {
			minB = min(minB, x.Slot)
		}
	}
	if maxA >= minB {
		t.Fatalf("the stale leader enqueued slot %s after the new leader started at %s", maxA, minB)
	}
	if errors.Is(nil, onetick.ErrFenced) {
		t.Fatal("unreachable")
	}
}
