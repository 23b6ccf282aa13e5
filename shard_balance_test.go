package onetick_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
)

// The fleet of these tests: each shard's leases in its own memory store
// (a stand-in for the shards' views), the membership in another, one
// fake clock for all of them and for every replica.
type fleet struct {
	t       *testing.T
	fc      *clockwork.FakeClock
	lease   onetick.LeaseConfig
	shards  []*memory.Backend
	members *memory.Backend
	events  chan struct{} // a term began or ended somewhere; coalesced

	mu      sync.Mutex
	leading []map[string]*onetick.Leadership // by shard: holder -> current term
	running []*replica
}

type replica struct {
	name   string
	b      *onetick.Balancer
	dead   atomic.Bool  // releases are dropped: stopping looks like a crash
	noHB   atomic.Bool  // membership heartbeats fail
	beats  atomic.Int64 // heartbeats that succeeded
	subs   atomic.Int64 // Watch subscriptions to the shards' stores
	cancel context.CancelFunc
	done   chan struct{}
}

// killable drops releases once its replica is dead, so that its leases
// stay until they expire, as after kill -9.
type killable struct {
	onetick.Leaser
	r *replica
}

func (k killable) Release(ctx context.Context, l onetick.Lease) error {
	if k.r.dead.Load() {
		return nil
	}
	return k.Leaser.Release(ctx, l)
}

func (k killable) Watch(ctx context.Context) <-chan struct{} {
	k.r.subs.Add(1)
	return k.Leaser.Watch(ctx)
}

// heartbeats fails every heartbeat while its replica's noHB is set, and
// counts those that succeed.
type heartbeats struct {
	onetick.Members
	r *replica
	f *fleet
}

func (h heartbeats) Heartbeat(ctx context.Context, holder string, ttl time.Duration) ([]string, error) {
	if h.r.noHB.Load() {
		return nil, errors.New("membership store unreachable")
	}
	live, err := h.Members.Heartbeat(ctx, holder, ttl)
	if err == nil {
		h.r.beats.Add(1)
		h.f.signal()
	}
	return live, err
}

// Leave is dropped once the replica is dead: a crash leaves no word.
func (h heartbeats) Leave(ctx context.Context, holder string) error {
	if h.r.dead.Load() {
		return nil
	}
	return h.Members.Leave(ctx, holder)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func newFleet(t *testing.T, shards int) *fleet {
	f := &fleet{
		t: t, fc: clockwork.NewFakeClockAt(t0),
		lease:   onetick.LeaseConfig{TTL: 15 * time.Second, Renew: 5 * time.Second, SafetyMargin: 1500 * time.Millisecond},
		events:  make(chan struct{}, 1),
		leading: make([]map[string]*onetick.Leadership, shards),
	}
	f.members = memory.New(memory.Options{Clock: f.fc})
	for i := range shards {
		f.shards = append(f.shards, memory.New(memory.Options{Clock: f.fc}))
		f.leading[i] = map[string]*onetick.Leadership{}
	}
	return f
}

func (f *fleet) signal() {
	select {
	case f.events <- struct{}{}:
	default:
	}
}

// start runs a replica's balancer until the test ends or it is killed.
// Every term that begins is checked against the others' terms of its
// shard: none may still trust its lease.
func (f *fleet) start(name string, opts ...func(*replica)) *replica {
	r := &replica{name: name, done: make(chan struct{})}
	for _, o := range opts {
		o(r)
	}
	var leasers []onetick.Leaser
	for _, s := range f.shards {
		leasers = append(leasers, killable{s, r})
	}
	var err error
	r.b, err = onetick.NewBalancer(onetick.BalancerConfig{
		Shards: leasers, Members: heartbeats{f.members, r, f}, Holder: name,
		Lease: f.lease, Clock: f.fc, Logger: slog.New(slog.NewTextHandler(tWriter{f.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnStartedLeading: func(_ context.Context, shard int, l *onetick.Leadership) {
			f.mu.Lock()
			for h, o := range f.leading[shard] {
				if h != name && o.Trusted() {
					f.t.Errorf("shard %d: %s starts leading (epoch %d) while %s trusts epoch %d", shard, name, l.Lease.Epoch, h, o.Lease.Epoch)
				}
			}
			f.leading[shard][name] = l
			f.mu.Unlock()
			f.signal()
		},
		OnStoppedLeading: func(shard int, l onetick.Lease) {
			f.mu.Lock()
			if o := f.leading[shard][name]; o != nil && o.Lease == l {
				delete(f.leading[shard], name)
			}
			f.mu.Unlock()
			f.signal()
		},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		_ = r.b.Run(ctx)
	}()
	f.mu.Lock()
	f.running = append(f.running, r)
	f.mu.Unlock()
	f.t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// join starts a replica, waits for its first heartbeat, and moves the
// clock a renew period, so that every other replica's next round sees it.
// What follows (the handovers) needs no clock: await it.
func (f *fleet) join(name string) *replica {
	r := f.start(name)
	f.await(name+" heartbeats", func() bool { return r.beats.Load() > 0 })
	f.quiet()
	f.fc.Advance(f.lease.Renew)
	return r
}

// kill stops r as a crash does: no release, no last heartbeat.
func (f *fleet) kill(r *replica) {
	r.dead.Store(true)
	r.cancel()
	<-r.done
	f.mu.Lock()
	f.running = slices.DeleteFunc(f.running, func(x *replica) bool { return x == r })
	f.mu.Unlock()
}

// stop stops r cleanly: its balancer leaves the membership and its
// electors release their leases.
func (f *fleet) stop(r *replica) {
	r.cancel()
	<-r.done
	f.mu.Lock()
	f.running = slices.DeleteFunc(f.running, func(x *replica) bool { return x == r })
	f.mu.Unlock()
	f.signal()
}

// checkTrust fails the test if two replicas trust one shard's lease now.
func (f *fleet) checkTrust() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for s, m := range f.leading {
		var trusting []string
		for h, l := range m {
			if l.Trusted() {
				trusting = append(trusting, h)
			}
		}
		if len(trusting) > 1 {
			f.t.Errorf("shard %d: %v all trust their leases", s, trusting)
		}
	}
}

// waiters is how many timers the fleet holds when every part waits: a
// balancer between rounds has one, an elector in standby one, a leader
// two (renewal, trust deadline). None ever holds more, so the count is
// reached only when all of them wait.
func (f *fleet) waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.running {
		n += 1 + len(f.shards) + len(r.b.Led())
	}
	return n
}

// quiet returns once every part of the fleet waits for the clock.
func (f *fleet) quiet() {
	f.t.Helper()
	for {
		want := f.waiters()
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() { got <- f.fc.BlockUntilContext(ctx, want) }()
		select {
		case <-got:
			cancel()
			if f.waiters() == want {
				f.checkTrust()
				return
			}
		case <-f.events: // a term began or ended: count again
			cancel()
			<-got
		case <-time.After(30 * time.Second):
			cancel()
			f.t.Fatalf("the fleet never waited with %d timers", want)
		}
	}
}

// await waits, without moving the clock, until cond holds.
func (f *fleet) await(what string, cond func() bool) {
	f.t.Helper()
	for {
		f.checkTrust()
		if cond() {
			return
		}
		select {
		case <-f.events:
		case <-time.After(30 * time.Second):
			f.t.Fatalf("never: %s", what)
		}
	}
}

// settle waits for the fleet to wait, and moves the clock a renew period
// at a time, at most steps times, until cond holds. (The fleet may look
// quiet while a poke or step-down is on its way; cond then holds one step
// later.)
func (f *fleet) settle(what string, cond func() bool, steps int) {
	f.t.Helper()
	for i := 0; ; i++ {
		f.quiet()
		if cond() {
			return
		}
		if i == steps {
			f.t.Fatalf("never, in %d renew periods: %s", steps, what)
		}
		f.fc.Advance(f.lease.Renew)
	}
}

// rounds moves the clock n renew periods, each once the fleet waits.
func (f *fleet) rounds(n int) {
	f.t.Helper()
	for range n {
		f.quiet()
		f.fc.Advance(f.lease.Renew)
	}
	f.quiet()
}

func leads(r *replica, n int) func() bool { return func() bool { return len(r.b.Led()) == n } }

func both(a, b func() bool) func() bool { return func() bool { return a() && b() } }

// One replica alone takes every shard at once, with no clock advance, and
// keeps them round after round.
func TestBalancerOneReplicaLeadsAll(t *testing.T) {
	f := newFleet(t, 4)
	a := f.start("a")
	f.await("a leads all 4 shards", leads(a, 4))
	if !f.fc.Now().Equal(t0) {
		t.Fatalf("the clock moved to %s", f.fc.Now())
	}
	if n := a.subs.Load(); n != 4 {
		t.Fatalf("%d subscriptions to the shards' release notices, want one per shard (4)", n)
	}
	epochs := make([]onetick.Epoch, 4)
	for i, s := range f.shards {
		info, err := s.Leader(context.Background())
		if err != nil || info.Lease.Holder != "a" {
			t.Fatalf("shard %d: leader %+v, %v", i, info, err)
		}
		epochs[i] = info.Lease.Epoch
	}
	f.rounds(4) // past the TTL: the leases are renewed, not retaken
	st := a.b.Status()
	if !slices.Equal(st.Led, []int{0, 1, 2, 3}) || !slices.Equal(st.Live, []string{"a"}) || st.Err != nil {
		t.Fatalf("status %+v", st)
	}
	for i, s := range f.shards {
		if info, _ := s.Leader(context.Background()); info.Lease.Epoch != epochs[i] {
			t.Fatalf("shard %d changed term: %+v", i, info.Lease)
		}
	}
}

// A replica that joins takes its share from the first round in which the
// leader sees it: the leader releases one shard a round, each release
// wakes the joiner, which acquires at once; nobody waits for a TTL.
func TestBalancerJoinHandsOverByRelease(t *testing.T) {
	f := newFleet(t, 5)
	a := f.start("a")
	f.await("a leads all 5 shards", leads(a, 5))
	b := f.join("b")
	f.await("a leads 3, b 2", both(leads(a, 3), leads(b, 2)))
	if d := f.fc.Since(t0); d != f.lease.Renew {
		t.Fatalf("balanced after %s, want the round that first sees b (%s), well before a TTL", d, f.lease.Renew)
	}
	for _, s := range b.b.Led() {
		terms, err := f.shards[s].History(context.Background(), 2)
		if err != nil || len(terms) != 2 || terms[0].Holder != "b" || terms[1].Holder != "a" || terms[1].Reason != onetick.EndReleased {
			t.Fatalf("shard %d: history %+v, %v; want a's term released to b", s, terms, err)
		}
	}
	if st := a.b.Status(); !slices.Equal(st.Live, []string{"a", "b"}) {
		t.Fatalf("a sees live %v", st.Live)
	}
	f.rounds(3) // settled: no more handovers
	if !leads(a, 3)() || !leads(b, 2)() {
		t.Fatalf("unsettled: a %v, b %v", a.b.Led(), b.b.Led())
	}
}

// A replica that crashes (no release, no last heartbeat) keeps its shards
// until its leases expire; then the survivors share them, within a round
// after the TTL.
func TestBalancerCrashSurvivorsTakeOver(t *testing.T) {
	f := newFleet(t, 6)
	a := f.start("a")
	f.await("a leads all 6 shards", leads(a, 6))
	b := f.join("b")
	f.await("a and b lead 3 each", both(leads(a, 3), leads(b, 3)))
	c := f.join("c")
	f.await("a, b and c lead 2 each", both(leads(a, 2), both(leads(b, 2), leads(c, 2))))
	f.quiet()

	cShards := c.b.Led()
	f.kill(c)
	killed := f.fc.Now()
	f.settle("a and b lead 3 each after c's crash", both(leads(a, 3), leads(b, 3)), 8)
	if d := f.fc.Since(killed); d > f.lease.TTL+2*f.lease.Renew {
		t.Fatalf("took over %s after the crash, want within the TTL and a round (and a step of the test)", d)
	}
	for _, s := range cShards {
		terms, err := f.shards[s].History(context.Background(), 2)
		if err != nil || len(terms) != 2 || terms[1].Holder != "c" || terms[1].Reason != onetick.EndExpired || terms[0].Start.Before(terms[1].End) {
			t.Fatalf("shard %d: history %+v, %v; want c's term expired, then a survivor's", s, terms, err)
		}
	}
	if st := a.b.Status(); !slices.Equal(st.Live, []string{"a", "b"}) {
		t.Fatalf("a sees live %v after c's membership expired", st.Live)
	}
}

// While its heartbeat fails a replica takes no shard, free as they are;
// once it succeeds the replica takes them; when it fails again the
// replica keeps the shards it leads (their leases bound them).
func TestBalancerHeartbeatFails(t *testing.T) {
	f := newFleet(t, 3)
	a := f.start("a", func(r *replica) { r.noHB.Store(true) })
	f.rounds(3)
	if led := a.b.Led(); len(led) != 0 {
		t.Fatalf("a took %v without a heartbeat", led)
	}
	if st := a.b.Status(); st.Err == nil || st.Live != nil {
		t.Fatalf("status %+v, want the heartbeat's error", st)
	}
	for i, s := range f.shards {
		if info, _ := s.Leader(context.Background()); info.Held {
			t.Fatalf("shard %d held: %+v", i, info)
		}
	}
	a.noHB.Store(false)
	f.fc.Advance(f.lease.Renew)
	f.await("a leads all 3 shards", leads(a, 3))
	a.noHB.Store(true)
	f.rounds(4)
	if !leads(a, 3)() || a.b.Status().Err == nil {
		t.Fatalf("a leads %v after failed heartbeats, want all 3 kept", a.b.Led())
	}
}

// A replica stopped cleanly leaves the membership, then releases its
// shards: each release wakes the survivor, whose round no longer counts
// the leaver, so it takes them all at once, the clock unmoved (without
// the leave it would deal them to the leaver until its entry expired).
func TestBalancerCleanStopHandsOverAtOnce(t *testing.T) {
	f := newFleet(t, 4)
	a := f.start("a")
	f.await("a leads all 4 shards", leads(a, 4))
	b := f.join("b")
	f.await("a and b lead 2 each", both(leads(a, 2), leads(b, 2)))
	f.quiet()
	bShards := b.b.Led()
	stopped := f.fc.Now()
	f.stop(b)
	f.await("a leads all 4 shards after b's clean stop", leads(a, 4))
	if d := f.fc.Since(stopped); d != 0 {
		t.Fatalf("the clock moved %s before a took b's shards, want none", d)
	}
	for _, s := range bShards {
		terms, err := f.shards[s].History(context.Background(), 2)
		if err != nil || len(terms) != 2 || terms[0].Holder != "a" || terms[1].Holder != "b" || terms[1].Reason != onetick.EndReleased {
			t.Fatalf("shard %d: history %+v, %v; want b's term released to a", s, terms, err)
		}
	}
	live, err := f.members.Heartbeat(context.Background(), "a", f.lease.TTL)
	if err != nil || !slices.Equal(live, []string{"a"}) {
		t.Fatalf("membership after b's stop: %q, %v; want a alone", live, err)
	}
	f.rounds(2) // settled
	if !leads(a, 4)() {
		t.Fatalf("a leads %v, want all 4", a.b.Led())
	}
}
