package onetick

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// BalancerConfig configures a Balancer.
type BalancerConfig struct {
	// Shards holds each shard's lease, indexed by shard (a shard's view of
	// the store); its length is the number of shards, 1..MaxShards.
	Shards []Leaser
	// Members is the fleet's membership, on the store itself, never on a
	// shard's view.
	Members Members
	// Holder, Lease, Clock and Logger are those of every shard's Elector
	// (ElectorConfig); the membership heartbeat lives one lease TTL. Each
	// elector keeps its own metrics; a sharded Scheduler exports them
	// labelled by shard (shard_metrics.go).
	Holder string
	Lease  LeaseConfig
	Clock  clockwork.Clock
	Logger *slog.Logger

	// The hooks of shard's Elector (ElectorConfig), with the shard. A
	// shard's OnStartedLeading is where its scheduler runner will fire.
	OnStartedLeading func(ctx context.Context, shard int, l *Leadership)
	OnStoppedLeading func(shard int, l Lease)
	OnNewLeader      func(shard int, l Lease)
}

// BalanceStatus is what a Balancer knows for status pages.
type BalanceStatus struct {
	Led  []int     // shards this replica leads with trust now, ascending
	Live []string  // live replicas at the last round's heartbeat; nil if it failed
	At   time.Time // when the last round ended, by the local clock
	Err  error     // the last round's heartbeat error, or nil
}

// Balancer spreads the leaders of a fleet's shards over its live replicas
// (docs/shards.md, "Balancing"). It runs one Elector per shard, each over
// its shard's lease and gated by the balancer (ElectorConfig.MayAcquire),
// heartbeats this replica's membership and, every renew period, when a
// shard's lease may have become free (its Watch) and after each change of
// this replica's leadership, runs a round: heartbeat, read every shard's
// leader, PlanShards, open the gate of each shard to take (one
// acquisition: the gate closes when the elector acquires) and Poke it,
// close every other gate, and StepDown the shard to release.
//
// Safety is not the balancer's: a shard is led only under its lease,
// trusted by its elector's rule (send time + TTL - safety margin) and
// fenced at every claim, as with one lease. A wrong plan (stale
// snapshots, a membership that lags) costs a refused Acquire or an uneven
// share for a while, never two trusted leaders of one shard.
//
// A heartbeat that fails takes nothing new: every gate closes. The
// shards this replica leads stay led: their leases, renewed on the
// shards' own stores, already bound them; if the store is down the
// renewals fail too and each term ends at its trust deadline; if only the
// membership failed, the others, not counting this replica as live, still
// leave its held shards alone (PlanShards). Releasing them instead would
// hand every shard of the fleet over on one failed write. A shard whose
// lease cannot be read is not taken in that round.
//
// One shard needs no Balancer: the engine keeps today's single Elector,
// unchanged, when shards = 1.
type Balancer struct {
	cfg      BalancerConfig
	lease    LeaseConfig
	clock    clockwork.Clock
	log      *slog.Logger
	electors []*Elector
	gates    []atomic.Bool   // MayAcquire of each shard's elector
	stepping []atomic.Bool   // stepped down for balance, lease not yet released
	notes    []chan struct{} // each shard's release notices, for its elector; coalesced
	wake     chan struct{}   // asks for a round; coalesced

	mu     sync.Mutex
	live   []string
	at     time.Time
	hbErr  error
	warned bool // the heartbeat failure is logged once until it recovers
}

// NewBalancer validates cfg and returns a Balancer with its electors.
func NewBalancer(cfg BalancerConfig) (*Balancer, error) {
	switch n := len(cfg.Shards); {
	case n < 1 || n > MaxShards:
		return nil, configErr("shards", "must be 1..%d leasers, got %d", MaxShards, n)
	case slices.Contains(cfg.Shards, nil):
		return nil, configErr("shards", "shard %d has no leaser", slices.Index(cfg.Shards, nil))
	case cfg.Members == nil:
		return nil, configErr("members", "is required")
	}
	if err := cfg.Lease.Validate(); err != nil {
		return nil, err
	}
	replicaDefaults(&cfg.Holder, &cfg.Clock, &cfg.Logger)
	b := &Balancer{
		cfg: cfg, lease: cfg.Lease.WithDefaults(), clock: cfg.Clock,
		log:      cfg.Logger.With("replica", cfg.Holder),
		gates:    make([]atomic.Bool, len(cfg.Shards)),
		stepping: make([]atomic.Bool, len(cfg.Shards)),
		notes:    make([]chan struct{}, len(cfg.Shards)),
		wake:     make(chan struct{}, 1),
	}
	for i := range b.notes {
		b.notes[i] = make(chan struct{}, 1)
	}
	for i, s := range cfg.Shards {
		e, err := NewElector(b.electorConfig(i, s))
		if err != nil {
			return nil, err
		}
		b.electors = append(b.electors, e)
	}
	return b, nil
}

// electorConfig is shard i's ElectorConfig: the balancer's, gated, with
// hooks that close the gate on acquisition and ask for a round on every
// change of leadership.
func (b *Balancer) electorConfig(i int, s Leaser) ElectorConfig {
	cfg := b.cfg
	ec := ElectorConfig{
		Backend: sharedWatch{s, b.notes[i]}, Holder: cfg.Holder, Lease: cfg.Lease, Clock: cfg.Clock,
		Logger:     cfg.Logger.With("shard", i),
		MayAcquire: b.gates[i].Load,
		OnStartedLeading: func(ctx context.Context, l *Leadership) {
			b.gates[i].Store(false) // one acquisition per opening
			b.poke()
			if cfg.OnStartedLeading != nil {
				cfg.OnStartedLeading(ctx, i, l)
			}
		},
		OnStoppedLeading: func(l Lease) {
			b.stepping[i].Store(false)
			b.poke()
			if cfg.OnStoppedLeading != nil {
				cfg.OnStoppedLeading(i, l)
			}
		},
	}
	if cfg.OnNewLeader != nil {
		ec.OnNewLeader = func(l Lease) { cfg.OnNewLeader(i, l) }
	}
	return ec
}

// Elector is shard's elector, for status (clock offset, problems).
func (b *Balancer) Elector(shard int) *Elector { return b.electors[shard] }

// Holder is this replica's identity in the leases and the membership.
func (b *Balancer) Holder() string { return b.cfg.Holder }

// Led returns the shards this replica leads with trust now, ascending.
func (b *Balancer) Led() []int {
	var led []int
	for i, e := range b.electors {
		if e.IsLeader() {
			led = append(led, i)
		}
	}
	return led
}

// Status reports the shards led now and the last round's membership.
func (b *Balancer) Status() BalanceStatus {
	led := b.Led()
	b.mu.Lock()
	defer b.mu.Unlock()
	return BalanceStatus{Led: led, Live: slices.Clone(b.live), At: b.at, Err: b.hbErr}
}

func (b *Balancer) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Run runs the electors and the rounds until ctx is done. On return no
// shard is led, every lease this replica held has been released (each
// elector's shutdown), and this replica has left the membership. Run is
// called once.
//
// A clean stop hands every shard over at once, without a TTL's wait:
// when ctx is done the rounds stop (no heartbeat may follow), the
// replica leaves the membership (Members.Leave, bounded by the lease's
// ReleaseTimeout), and only then do the electors stop firing and release
// their leases. The order is what makes the hand-over prompt: a
// survivor's round runs on each release notice (Watch), and its
// heartbeat, which follows the leave, no longer counts this replica, so
// it deals the released shards among the survivors and takes its own.
// Leaving after the releases instead would race them: a round woken by
// the last release could still count this replica live, deal it its own
// shards, and nothing would wake the survivors again before their next
// renew period. Leaving first is safe: a shard still held is never dealt
// (PlanShards), whether its holder is live or not, so the survivors take
// nothing before it is released. If the leave fails, the survivors count
// this replica live until its entry expires (a TTL), as after a crash.
func (b *Balancer) Run(ctx context.Context) error {
	// The electors run until the leave is done, not until ctx is: their
	// releases must follow it.
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i, e := range b.electors {
		watch := b.cfg.Shards[i].Watch(ectx)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = e.Run(ectx)
		}()
		go func() { // one subscription per shard, for the rounds and the elector
			defer wg.Done()
			for range watch {
				b.poke()
				select {
				case b.notes[i] <- struct{}{}:
				default:
				}
			}
		}()
	}
	for {
		b.round(ctx)
		t := b.clock.NewTimer(b.lease.Renew)
		select {
		case <-ctx.Done():
			t.Stop()
			b.leave(ctx)
			return nil
		case <-b.wake:
		case <-t.Chan():
		}
		t.Stop()
	}
}

// leave removes this replica from the membership on shutdown, under a
// context that ctx's end does not cancel, bounded like a lease's release.
func (b *Balancer) leave(ctx context.Context) {
	for i := range b.gates { // nothing new is taken meanwhile
		b.gates[i].Store(false)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.lease.ReleaseTimeout)
	defer cancel()
	if err := b.cfg.Members.Leave(lctx, b.cfg.Holder); err != nil {
		b.log.Warn("leaving the membership failed; the others count this replica live until its entry expires", "err", err)
		return
	}
	b.log.Info("left the membership")
}

// round is one balancing round (docs/shards.md, "Balancing").
func (b *Balancer) round(ctx context.Context) {
	n := len(b.electors)
	live, err := b.cfg.Members.Heartbeat(ctx, b.cfg.Holder, b.lease.TTL)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		for i := range b.gates {
			b.gates[i].Store(false)
		}
		b.record(nil, err)
		return
	}
	// One time base: each lease's expiry is the local instant its read
	// returned plus the TTL it had left (never earlier than the store's
	// own expiry), and now is read after every lease.
	leases := make([]ShardLease, 0, n)
	unread := make([]bool, n)
	var readErr error
	for i, s := range b.cfg.Shards {
		info, err := s.Leader(ctx)
		at := b.clock.Now()
		switch {
		case err != nil:
			unread[i], readErr = true, err
		case info.Held:
			leases = append(leases, ShardLease{Shard: i, Holder: info.Lease.Holder, Expires: at.Add(info.TTL)})
		}
	}
	if readErr != nil && ctx.Err() == nil {
		b.log.Warn("shard leases unread; not taking them this round", "err", readErr)
	}
	// Mine: the shards led, and those stepping down, still held in the
	// store until released; without them a round during a hand-over
	// would count this replica short and release a second shard.
	mine := b.Led()
	for i := range b.stepping {
		if b.stepping[i].Load() && !slices.Contains(mine, i) {
			mine = append(mine, i)
		}
	}
	take, release := PlanShards(mine, leases, live, b.cfg.Holder, n, b.clock.Now())
	b.log.Debug("balancing round", "live", live, "led", mine, "take", take, "release", release)
	open := make([]bool, n)
	for _, s := range take {
		open[s] = !unread[s]
	}
	for i := range b.gates {
		b.gates[i].Store(open[i])
	}
	for i, o := range open {
		if o {
			b.electors[i].Poke()
		}
	}
	for _, s := range release {
		if b.stepping[s].Load() {
			continue // its hand-over is under way
		}
		// Set before StepDown: the term's OnStoppedLeading clears it.
		b.stepping[s].Store(true)
		if !b.electors[s].StepDown() {
			b.stepping[s].Store(false) // no term: it ended meanwhile
			continue
		}
		b.log.Info("handing a shard over for balance", "shard", s, "live", len(live))
	}
	b.record(live, nil)
}

// record keeps the round's outcome for Status, and logs a heartbeat
// failure once until a heartbeat succeeds again.
func (b *Balancer) record(live []string, err error) {
	b.mu.Lock()
	b.live, b.hbErr, b.at = live, err, b.clock.Now()
	warn, recovered := err != nil && !b.warned, err == nil && b.warned
	b.warned = err != nil
	b.mu.Unlock()
	switch {
	case warn:
		b.log.Warn("membership heartbeat failed; taking no shard until it succeeds, keeping those led", "err", err)
	case recovered:
		b.log.Info("membership heartbeat succeeds again")
	}
}

// sharedWatch is a shard's Leaser as its elector sees it: its Watch
// relays the notices of the balancer's one subscription to the shard
// (note) instead of subscribing a second time.
type sharedWatch struct {
	Leaser
	note <-chan struct{}
}

// Watch relays note until ctx is done, then closes the channel, as a
// store's Watch does.
func (w sharedWatch) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.note:
				select {
				case out <- struct{}{}:
				default: // one is pending: coalesced
				}
			}
		}
	}()
	return out
}
