package onetick

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// The claim: a wake-up's due jobs planned batch by batch and sent to the
// store, a few calls in flight, their outcomes accounted for in order.

// claimDepth is how many claim calls may be in flight at once: with two,
// the next batch is planned and sent while the store runs the previous
// one.
const claimDepth = 2

type claimCall struct {
	ticks      []Tick
	owners     []*jobState // owners[i] is the job of ticks[i]
	res        ClaimResult
	err        error
	sent, recv time.Time
	done       chan struct{}
}

// planBatch plans the ticks of due[pos:] into c until it holds about
// size ticks, and returns the position after the last job planned.
// A job's ticks are never split between batches: batches may run
// concurrently, and a job's slots must reach the store in order.
func (r *runner) planBatch(c *claimCall, due []*jobState, pos, size int, now Slot, log *slog.Logger) int {
	c.ticks, c.owners, c.res, c.err = c.ticks[:0], c.owners[:0], ClaimResult{}, nil
	for pos < len(due) && len(c.ticks) < size {
		j := due[pos]
		pos++
		n := len(c.ticks)
		c.ticks = r.plan(j, now, log, c.ticks)
		for range len(c.ticks) - n {
			c.owners = append(c.owners, j)
		}
	}
	return pos
}

// send starts one claim call in its own goroutine; c.done closes when
// the store has answered or the call failed.
func (r *runner) send(ctx context.Context, ld *Leadership, c *claimCall) {
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		rctx, cancel := context.WithTimeout(ctx, max(r.s.clock.Until(ld.Deadline()), time.Millisecond))
		defer cancel()
		c.sent = r.s.clock.Now()
		c.res, c.err = r.backend.Claim(rctx, ld.Lease, c.ticks)
		c.recv = r.s.clock.Now()
	}()
}

// claim plans the due jobs' ticks batch by batch and sends them to the
// store, up to claimDepth calls at a time, accounting for the outcomes in
// order: a burst of a million due jobs starts claiming after its first
// batch is planned, not after all of them. It reports whether any tick was
// early and whether the store fenced this leader. Once the store fenced
// this term or the lease is no longer trusted nothing more is planned or
// sent.
func (r *runner) claim(ctx context.Context, ld *Leadership, due []*jobState, now Slot, log *slog.Logger) (early, fenced bool) {
	// A claim in flight is finished even when leadership is being given up:
	// its outcome must be known and accounted for.
	cctx := context.WithoutCancel(ctx)
	var inflight, free []*claimCall
	defer func() {
		for _, c := range inflight {
			<-c.done
		}
	}()
	pos, sent := 0, 0
	for {
		// Keep up to claimDepth calls in flight.
		for len(inflight) < claimDepth && pos < len(due) && !fenced && ld.Trusted() {
			c := &claimCall{}
			if n := len(free); n > 0 {
				c, free = free[n-1], free[:n-1]
			}
			size := r.s.cfg.ClaimBatch
			if sent >= claimDepth && len(due)-pos > 10*size {
				size *= 5 // a large burst: larger calls (see Config.ClaimBatch)
			}
			pos = r.planBatch(c, due, pos, size, now, log)
			sent++
			if len(c.ticks) == 0 {
				free = append(free, c)
				continue
			}
			r.send(cctx, ld, c)
			inflight = append(inflight, c)
		}
		if len(inflight) == 0 {
			return early, fenced
		}
		c := inflight[0]
		inflight = inflight[1:]
		for {
			<-c.done
			if relayCallFailed(c.err) {
				for _, j := range c.owners {
					j.metrics.relay.failed()
				}
			}
			if c.err == nil || errors.Is(c.err, ErrFenced) || errors.Is(c.err, ErrDamaged) || errors.Is(c.err, ErrNotReplicated) ||
				fenced || !ld.Trusted() {
				break
			}
			// The claim's fate is unknown. Retrying is safe: the store
			// recognises a tick this same term already claimed.
			log.Warn("claim failed; retrying while the lease is trusted", "err", c.err, "ticks", len(c.ticks))
			t := r.s.clock.NewTimer(50 * time.Millisecond)
			<-t.Chan()
			if fenced || !ld.Trusted() {
				break
			}
			r.send(cctx, ld, c)
		}
		switch {
		case errors.Is(c.err, ErrFenced):
			for _, j := range c.owners {
				j.metrics.fenced()
			}
			if !fenced {
				log.Error("claim fenced by the store: this replica's lease was superseded; stepping down", "ticks", len(c.ticks))
				ld.Lose()
			}
			fenced = true
		case errors.Is(c.err, ErrNotReplicated):
			// Applied on the primary, not acknowledged by enough replicas:
			// account for it, then step down, so that this leader does not
			// go on writing to a primary a failover may roll back.
			if r.account(ld, c, log) {
				early = true
			}
			if !fenced {
				log.Error("claim not acknowledged by enough replicas; stepping down", "err", c.err, "ticks", len(c.ticks))
				ld.LoseBecause("a claim was not acknowledged by enough replicas")
			}
			fenced = true
		case errors.Is(c.err, ErrDamaged):
			// The last-fired state as a whole is damaged: nothing was
			// written. Said once; the jobs retry with a backoff.
			var d *DamageError
			if errors.As(c.err, &d) {
				r.elector.health.set(StateClaim, d)
			}
			for _, j := range c.owners {
				j.retry = true
			}
		case c.err != nil:
			// Given up: the lease is no longer trusted. The next leader
			// continues from the store's last-fired slots.
		default:
			r.elector.health.clear(StateClaim)
			if r.account(ld, c, log) {
				early = true
			}
		}
		free = append(free, c)
	}
}

// account records the outcomes of one claim call.
func (r *runner) account(ld *Leadership, c *claimCall, log *slog.Logger) (early bool) {
	res := c.res
	r.elector.observeStoreTime(res.StoreTime, c.sent, c.recv)
	var delivered []TickRecord
	for i, t := range c.ticks {
		j := c.owners[i]
		switch res.Outcomes[i] {
		case Claimed:
			j.metrics.claimed(t.Slot, t.Slot < j.planTop)
			r.s.metrics.TickDelay.Observe(res.StoreTime.Sub(t.Slot.Time()).Seconds())
			j.cursor = max(j.cursor, t.Slot)
			if r.s.cfg.Sink != nil {
				delivered = append(delivered, TickRecord{Job: t.Job, Slot: t.Slot, Tick: t.ID(),
					Epoch: ld.Lease.Epoch, Replica: ld.Lease.Holder, Payload: t.Payload})
			}
		case Duplicate:
			j.metrics.duplicate()
			log.Warn("duplicate tick refused by the store", "job", t.Job, "slot", t.Slot.String())
			j.cursor = max(j.cursor, t.Slot)
		case Paused:
			j.metrics.paused(1)
			j.cursor = max(j.cursor, t.Slot)
		case Early:
			early = true
			log.Warn("store refused an early tick: this replica's clock runs ahead of the store's",
				"job", t.Job, "slot", t.Slot.String(), "store_time", res.StoreTime)
		case Broken:
			d := res.Damaged[i]
			if d == nil {
				d = &DamageError{Reason: "damaged state (the store gave no detail)"}
			}
			r.markBroken(j, d, log)
			if t.Slot > j.brokenTop {
				j.brokenTop = t.Slot
				j.metrics.broken()
			}
		}
		j.metrics.relay.outcome(res.Outcomes[i])
		if o := res.Outcomes[i]; o == Claimed || o == Duplicate || o == Paused {
			r.repaired(j, log)
			j.recorded(t)
		}
	}
	if len(delivered) > 0 {
		ctx := context.WithValue(context.Background(), claimWindowKey{}, claimWindow{c.sent, c.recv})
		if err := r.s.cfg.Sink.Deliver(ctx, delivered); err != nil {
			for i, o := range res.Outcomes {
				if o == Claimed {
					c.owners[i].metrics.deliveryFailed()
				}
			}
			log.Error("sink delivery failed", "err", err, "ticks", len(delivered))
		}
	}
	return early
}
