package onetick

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// ElectorConfig configures an Elector.
type ElectorConfig struct {
	Backend Leaser
	// Holder identifies this replica in the lease; default DefaultHolder().
	Holder string
	Lease  LeaseConfig
	Clock  clockwork.Clock // default the real clock
	Logger *slog.Logger    // default slog.Default()
	// Metrics may be nil.
	Metrics *Metrics

	// OnStartedLeading runs in its own goroutine when this replica becomes
	// leader. Its ctx is cancelled when leadership ends for any reason; the
	// elector waits for it to return before releasing the lease, so work in
	// flight finishes first. It must return promptly once ctx is done.
	OnStartedLeading func(ctx context.Context, l *Leadership)
	// OnStoppedLeading runs after every leadership term, always.
	OnStoppedLeading func(l Lease)
	// OnNewLeader runs whenever the elector sees a different leader (itself
	// included). It must not block.
	OnNewLeader func(l Lease)
	// MayAcquire, if set, gates the standby loop: while it returns false
	// the elector does not try to acquire (nor learns of other leaders),
	// and tries again when Poke wakes it, a release is announced, or the
	// retry period passes. Nil: always. It must not block; a shard's
	// balancer opens it for the shards it may take.
	MayAcquire func() bool
}

// Leadership is one term of this replica as leader.
type Leadership struct {
	Lease Lease

	clock    clockwork.Clock
	deadline atomic.Int64 // trust deadline as nanoseconds since base
	base     time.Time
	lost     chan struct{}
	lostWhy  string // written before lost is closed
	loseOnce sync.Once
	resign   chan struct{} // closed by StepDown
	stepOnce sync.Once
}

func newLeadership(l Lease, clock clockwork.Clock, deadline time.Time) *Leadership {
	ld := &Leadership{Lease: l, clock: clock, base: clock.Now(), lost: make(chan struct{}), resign: make(chan struct{})}
	ld.setDeadline(deadline)
	return ld
}

func (l *Leadership) setDeadline(t time.Time) { l.deadline.Store(int64(t.Sub(l.base))) }

// Deadline is the instant until which the lease may be trusted.
func (l *Leadership) Deadline() time.Time {
	return l.base.Add(time.Duration(l.deadline.Load()))
}

// Trusted reports whether the lease may still be trusted now: the instant
// the last successful acquire or renew was sent, plus TTL minus the safety
// margin, has not passed on the monotonic clock.
func (l *Leadership) Trusted() bool { return l.clock.Now().Before(l.Deadline()) }

// Lose tells the elector that the store refused this term (a fenced
// claim). The elector steps down at once, without releasing.
func (l *Leadership) Lose() { l.LoseBecause("fenced by the store") }

// LoseBecause is Lose with the reason the elector logs.
func (l *Leadership) LoseBecause(reason string) {
	l.loseOnce.Do(func() {
		l.lostWhy = reason
		close(l.lost)
	})
}

func (l *Leadership) untrust() { l.deadline.Store(-1 << 62) }

// Elector runs the lease election for one replica.
type Elector struct {
	cfg    ElectorConfig
	lease  LeaseConfig
	clock  clockwork.Clock
	log    *slog.Logger
	offset atomic.Int64 // store clock minus local clock, ns
	health *health
	poke   chan struct{} // wakes the standby loop (Poke); coalesced

	mu      sync.Mutex
	samples []offsetSample // recent clock-offset measurements, oldest first
	seen    Lease          // newest leader seen
	leading *Leadership
}

// NewElector validates cfg and returns an Elector.
func NewElector(cfg ElectorConfig) (*Elector, error) {
	if cfg.Backend == nil {
		return nil, configErr("backend", "is required")
	}
	if err := cfg.Lease.Validate(); err != nil {
		return nil, err
	}
	replicaDefaults(&cfg.Holder, &cfg.Clock, &cfg.Logger)
	if cfg.Metrics == nil {
		cfg.Metrics, _ = NewMetrics(nil)
	}
	log := cfg.Logger.With("replica", cfg.Holder)
	return &Elector{
		cfg:    cfg,
		lease:  cfg.Lease.WithDefaults(),
		clock:  cfg.Clock,
		log:    log,
		health: newHealth(log, cfg.Metrics, cfg.Clock.Now),
		poke:   make(chan struct{}, 1),
	}, nil
}

// Problems lists damaged store state this replica ran into and has not
// yet seen repaired: the lease or epoch (it cannot acquire), the
// last-fired slots as a whole (as leader, it cannot claim), the history
// (auxiliary). A job whose own state is damaged is not listed here; the
// scheduler counts it in scheduler_broken_jobs and logs it.
func (e *Elector) Problems() []Problem { return e.health.list() }

// Ready returns nil when no blocking damage is known, else the first one.
func (e *Elector) Ready() error {
	for _, p := range e.health.list() {
		if p.Blocking {
			return p.Error
		}
	}
	return nil
}

// Holder is this replica's identity in the lease.
func (e *Elector) Holder() string { return e.cfg.Holder }

// ClockOffset is the store's clock minus this replica's, as last measured.
func (e *Elector) ClockOffset() time.Duration { return time.Duration(e.offset.Load()) }

// IsLeader reports whether this replica leads and trusts its lease now.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading != nil && e.leading.Trusted()
}

// StepDown ends the current term as a shutdown does, but keeps the
// elector running: the firing loop stops, the claim in flight finishes,
// OnStartedLeading returns, then the lease is released (compare-and-delete,
// the term recorded as released) so that a standby elsewhere takes it at
// once. The elector then stands by again, gated by MayAcquire: without a
// gate it may take the lease straight back, so a balancer closes the gate
// first. StepDown does not wait (OnStoppedLeading reports the end of the
// term) and may be called from OnStartedLeading. It reports whether a term
// was being led; in standby it does nothing.
func (e *Elector) StepDown() bool {
	e.mu.Lock()
	ld := e.leading
	e.mu.Unlock()
	if ld == nil {
		return false
	}
	ld.stepOnce.Do(func() { close(ld.resign) })
	return true
}

// Poke wakes the standby loop to ask MayAcquire and try to acquire now,
// instead of at the next release notice or retry. Pokes coalesce; a
// leader ignores them.
func (e *Elector) Poke() {
	select {
	case e.poke <- struct{}{}:
	default:
	}
}

// mayAcquire applies the MayAcquire gate.
func (e *Elector) mayAcquire() bool { return e.cfg.MayAcquire == nil || e.cfg.MayAcquire() }

// offsetSample is one measurement of the store's clock against ours.
type offsetSample struct {
	offset time.Duration // store minus the midpoint of the round trip
	rtt    time.Duration // the error of offset is at most rtt/2
	at     time.Time
}

// offsetAging is how fast an old sample loses credibility against a new
// one: a generous bound on the drift between two clocks.
const offsetAging = time.Millisecond // per second of age

// observeStoreTime updates the clock offset from a store timestamp taken
// between local instants sent and received. Like NTP, it trusts the sample
// with the smallest error bound (half its round trip, plus an allowance
// for its age) among the recent ones, so a slow or lopsided round trip
// (a congested link) cannot swing the estimate by half its length.
func (e *Elector) observeStoreTime(store, sent, received time.Time) {
	if store.IsZero() {
		return
	}
	rtt := received.Sub(sent)
	sample := offsetSample{offset: store.Sub(sent.Add(rtt / 2)), rtt: rtt, at: received}
	e.mu.Lock()
	if len(e.samples) == 32 {
		copy(e.samples, e.samples[1:])
		e.samples = e.samples[:31]
	}
	e.samples = append(e.samples, sample)
	best, bestErr := sample, time.Duration(1<<62)
	for _, x := range e.samples {
		if bound := x.rtt/2 + time.Duration(received.Sub(x.at).Seconds()*float64(offsetAging)); bound < bestErr {
			best, bestErr = x, bound
		}
	}
	e.mu.Unlock()
	e.offset.Store(int64(best.offset))
	e.cfg.Metrics.StoreClockOffset.Set(best.offset.Seconds())
}

func (e *Elector) sawLeader(l Lease) {
	e.mu.Lock()
	changed := l != e.seen
	if changed {
		e.seen = l
	}
	e.mu.Unlock()
	if !changed {
		return
	}
	e.cfg.Metrics.LeaseEpoch.Set(float64(l.Epoch))
	if e.cfg.OnNewLeader != nil {
		e.cfg.OnNewLeader(l)
	}
}

// Run takes part in the election until ctx is done. On return this replica
// no longer leads, and a lease it held has been released.
func (e *Elector) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	watch := e.cfg.Backend.Watch(wctx)
	defer func() {
		cancel()
		for range watch { //nolint:revive // drain until the backend closes it
		}
	}()
	for {
		ld := e.standby(ctx, watch)
		if ld == nil {
			return nil
		}
		e.lead(ctx, ld)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// standby tries to acquire until it succeeds (returning the new term) or
// ctx is done (returning nil).
func (e *Elector) standby(ctx context.Context, watch <-chan struct{}) *Leadership {
	m := e.cfg.Metrics
	m.setStandby(true)
	defer m.setStandby(false)
	select { // a poke from an earlier term: this loop tries at once anyway
	case <-e.poke:
	default:
	}
	for {
		if ctx.Err() != nil {
			return nil
		}
		if !e.mayAcquire() {
			if !e.standbyWait(ctx, watch, e.lease.Retry) {
				return nil
			}
			continue
		}
		sent := e.clock.Now()
		g, err := e.cfg.Backend.Acquire(ctx, e.cfg.Holder, e.lease.TTL)
		recv := e.clock.Now()
		m.RenewalLatency.Observe(recv.Sub(sent).Seconds())
		wait := e.lease.Retry
		var held *HeldError
		var dmg *DamageError
		switch {
		case err == nil:
			e.health.clear(StateElection)
			e.noteHistory(g.Damage)
			e.observeStoreTime(g.StoreTime, sent, recv)
			return newLeadership(g.Lease, e.clock, sent.Add(e.lease.TTL-e.lease.SafetyMargin))
		case errors.As(err, &dmg):
			// The lease or the epoch is damaged: nobody can lead until an
			// operator repairs it. Said once, retried quietly.
			e.health.set(StateElection, dmg)
		case errors.As(err, &held):
			e.health.clear(StateElection)
			e.sawLeader(held.Leader.Lease)
			// Wake when the lease would expire if its holder stopped
			// renewing: a crashed leader is replaced within one TTL even
			// where the store sends no expiry notification.
			wait = min(held.Leader.TTL+time.Millisecond, e.lease.TTL)
		case ctx.Err() != nil:
			return nil
		default:
			e.log.Warn("lease acquire failed", "err", err)
		}
		if !e.standbyWait(ctx, watch, wait) {
			return nil
		}
	}
}

// standbyWait waits for a release notice, a poke or wait to pass; it
// reports false when ctx is done.
func (e *Elector) standbyWait(ctx context.Context, watch <-chan struct{}, wait time.Duration) bool {
	t := e.clock.NewTimer(max(wait, time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-watch:
	case <-e.poke:
	case <-t.Chan():
	}
	return true
}

// noteHistory reports damage of the leadership history that an acquire
// skipped, or that the history is usable again (an acquire reads all of
// it; a renew only its newest entry, so only an acquire clears).
func (e *Elector) noteHistory(d *DamageError) {
	if d != nil {
		e.health.set(StateHistory, d)
	} else {
		e.health.clear(StateHistory)
	}
}

type renewResult struct {
	g          Grant
	err        error
	sent, recv time.Time
}

// lead runs one leadership term until it ends.
func (e *Elector) lead(ctx context.Context, ld *Leadership) {
	m := e.cfg.Metrics
	log := e.log.With("epoch", int64(ld.Lease.Epoch))
	e.mu.Lock()
	e.leading = ld
	e.mu.Unlock()
	m.LeadershipChanges.Inc()
	m.IsLeader.Set(1)
	log.Info("became leader", "trusted_until", ld.Deadline())
	e.sawLeader(ld.Lease)

	leadCtx, cancelLead := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if e.cfg.OnStartedLeading != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.cfg.OnStartedLeading(leadCtx, ld)
		}()
	}

	var (
		renewWG  sync.WaitGroup
		resCh    chan renewResult
		cancelRq context.CancelFunc = func() {}
		renewAt                     = e.clock.Now().Add(e.lease.Renew)
		release                     = true
		reason   string
	)
	deadline := e.clock.NewTimer(e.clock.Until(ld.Deadline()))
loop:
	for {
		var renewC <-chan time.Time
		var renewT clockwork.Timer
		if resCh == nil {
			renewT = e.clock.NewTimer(max(e.clock.Until(renewAt), 0))
			renewC = renewT.Chan()
		}
		select {
		case <-ctx.Done():
			reason = "shutdown"
		case <-ld.lost:
			reason, release = ld.lostWhy, false
		case <-ld.resign:
			reason = "stepped down"
		case <-deadline.Chan():
			reason = "lease no longer trusted (renewals failed until the trust deadline)"
		case <-renewC:
			resCh = make(chan renewResult, 1)
			var rctx context.Context
			rctx, cancelRq = context.WithTimeout(ctx, max(e.clock.Until(ld.Deadline()), time.Millisecond))
			sent := e.clock.Now()
			renewWG.Add(1)
			go func(ch chan renewResult) {
				defer renewWG.Done()
				g, err := e.cfg.Backend.Renew(rctx, ld.Lease, e.lease.TTL)
				ch <- renewResult{g: g, err: err, sent: sent, recv: e.clock.Now()}
			}(resCh)
			continue
		case r := <-resCh:
			resCh = nil
			cancelRq()
			m.RenewalLatency.Observe(r.recv.Sub(r.sent).Seconds())
			switch {
			case r.err == nil:
				if r.g.Damage != nil {
					e.health.set(StateHistory, r.g.Damage)
				}
				e.observeStoreTime(r.g.StoreTime, r.sent, r.recv)
				ld.setDeadline(r.sent.Add(e.lease.TTL - e.lease.SafetyMargin))
				log.Debug("renewed leadership", "trusted_until", ld.Deadline())
				deadline.Stop()
				deadline = e.clock.NewTimer(max(e.clock.Until(ld.Deadline()), 0))
				renewAt = r.sent.Add(e.lease.Renew)
			case errors.Is(r.err, ErrLeaseLost):
				reason, release = "lease lost (renewal refused by the store)", false
				break loop
			default:
				log.Warn("lease renewal failed; retrying until the trust deadline", "err", r.err, "trusted_until", ld.Deadline())
				renewAt = e.clock.Now().Add(max(e.lease.Renew/4, time.Millisecond))
			}
			continue
		}
		if renewT != nil {
			renewT.Stop()
		}
		break
	}
	deadline.Stop()

	// Stop firing first, then wait for the firing loop (and an in-flight
	// claim) to finish, then hand the lease over.
	ld.untrust()
	m.IsLeader.Set(0)
	cancelLead()
	cancelRq()
	wg.Wait()
	renewWG.Wait()
	e.mu.Lock()
	e.leading = nil
	e.mu.Unlock()
	if release {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.lease.ReleaseTimeout)
		err := e.cfg.Backend.Release(rctx, ld.Lease)
		cancel()
		switch {
		case err == nil:
			log.Info("released lease")
		case errors.Is(err, ErrLeaseLost):
		default:
			log.Warn("lease release failed; a standby takes over when the lease expires", "err", err)
		}
	}
	log.Info("stopped leading", "reason", reason)
	if e.cfg.OnStoppedLeading != nil {
		e.cfg.OnStoppedLeading(ld.Lease)
	}
}
