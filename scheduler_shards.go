package onetick

import (
	"context"
	"sync"
)

// The sharded path of the Scheduler (Config.Shards > 1, docs/shards.md
// "Who reads the fleet"): a runner per shard over the shard's view of the
// store, holding the jobs ShardOf puts in it, and a Balancer that runs one
// Elector per shard and spreads the shards' leaders over the live
// replicas. A runner's firing loop is the one a single lease runs (lead,
// loadCursors, loadControls, claim), over its view and its jobs.
//
// The lease series are per shard (shard_metrics.go):
// scheduler_is_leader{shard} and the other series each shard's elector
// keeps, and scheduler_shards_led; scheduler_leadership_changes_total
// counts every shard's terms. One DeadlineWatcher judges each job while
// this replica leads the job's shard, from that shard's ledger
// (deadlines.go, Scheduler.DeadlineWatcher).

// validateShards checks Config.Shards and that the store can shard.
func (c *Config) validateShards() error {
	switch {
	case c.Shards < 0 || c.Shards > MaxShards:
		return configErr("shards", "must be 1 to %d, got %d", MaxShards, c.Shards)
	case c.Shards <= 1:
		return nil
	}
	if _, ok := c.Backend.(Sharder); !ok {
		return configErr("shards", "%d shards need a store that shards (%T does not)", c.Shards, c.Backend)
	}
	if _, ok := c.Backend.(Members); !ok {
		return configErr("shards", "%d shards need the fleet's membership on the store (%T has none)", c.Shards, c.Backend)
	}
	return nil
}

// shardRunners makes a runner per shard over the shard's view; runners[0]
// is s.runner.
func (s *Scheduler) shardRunners() error {
	n := s.cfg.Shards
	sh := s.cfg.Backend.(Sharder) // validateShards
	s.runners = make([]*runner, n)
	for i := range n {
		v, err := sh.Shard(i, n)
		if err != nil {
			return configErr("shards", "shard %d of %d: %v", i, n, err)
		}
		r := &runner{}
		if i == 0 {
			r = &s.runner
		}
		*r = runner{s: s, shard: i, shards: n, backend: v, log: s.log.With("shard", i)}
		s.runners[i] = r
	}
	return nil
}

// balance builds the Balancer whose electors start each shard's runner.
func (s *Scheduler) balance() error {
	leasers := make([]Leaser, len(s.runners))
	for i, r := range s.runners {
		leasers[i] = r.backend
	}
	cfg := BalancerConfig{
		Shards: leasers, Members: s.cfg.Backend.(Members),
		Holder: s.cfg.Replica, Lease: s.cfg.Lease, Clock: s.clock, Logger: s.cfg.Logger,
		OnStartedLeading: func(ctx context.Context, shard int, l *Leadership) {
			s.leading.add(s.metrics, 1)
			s.runners[shard].lead(ctx, l)
		},
		OnStoppedLeading: func(int, Lease) { s.leading.add(s.metrics, -1) },
	}
	if f := s.cfg.OnNewLeader; f != nil {
		cfg.OnNewLeader = func(_ int, l Lease) { f(l) }
	}
	b, err := NewBalancer(cfg)
	if err != nil {
		return err
	}
	s.balancer = b
	for i, r := range s.runners {
		r.elector = b.Elector(i)
	}
	return s.metrics.shardSeries(b, len(s.runners))
}

// Balancer returns the balancer of the shards' leaders; nil unless
// Config.Shards > 1.
func (s *Scheduler) Balancer() *Balancer { return s.balancer }

// leadCount counts the shards a replica leads, for Metrics.IsLeader: 1
// while any is led (not exported with shards: scheduler_is_leader{shard}
// is, shard_metrics.go).
type leadCount struct {
	mu sync.Mutex
	n  int
}

// add counts a term's start (+1) or end (-1). A term's end is counted by
// OnStoppedLeading, which runs after its OnStartedLeading has returned.
func (c *leadCount) add(m *Metrics, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	if d > 0 {
		m.LeadershipChanges.Inc()
	}
	if c.n > 0 {
		m.IsLeader.Set(1)
	} else {
		m.IsLeader.Set(0)
	}
}
