package onetick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// Schedule yields a job's slots. Package cron implements it; any type whose
// Next is deterministic (same input, same output on every replica) will do.
type Schedule interface {
	// Next returns the first slot strictly after t (UTC, millisecond
	// precision), or the zero time when there is none.
	Next(t time.Time) time.Time
}

// counter is implemented by schedules that count slots faster than by
// calling Next repeatedly (cron.Schedule does).
type counter interface {
	Count(a, b time.Time, max int64) int64
}

// minGrace is the smallest grace the scheduler applies: an on-time tick
// that the machine's scheduling noise delays by a few milliseconds must
// never count as missed.
const minGrace = time.Second

// Job is one periodic job.
type Job struct {
	Name     string
	Schedule Schedule
	// Prefer chooses between a missed and a duplicate tick. Default
	// PreferMissed.
	Prefer Prefer
	// Grace: with PreferMissed, a slot that came due while no leader fired
	// is still fired if it is at most Grace old. Default twice the lease TTL,
	// so an ordinary failover loses nothing. Values below one second act as
	// one second.
	Grace time.Duration
	// MaxCatchup bounds how many late slots one wake-up fires for this job;
	// older ones are skipped and counted as missed. Default 100.
	MaxCatchup int
	// Stream is the key of the stream the job's ticks are appended to.
	// Default "onetick:stream:<name>".
	Stream string
	// MaxLen trims the stream approximately to this many entries (Redis
	// XADD MAXLEN ~). Zero keeps every entry.
	MaxLen int64
	// Payload is the job's JSON payload, copied into every tick. Default {}.
	Payload string
	// Since, when set, is when the job was defined (jobs defined at run
	// time): it never fires a slot at or before it.
	Since time.Time
	// Version names the job's definition (jobs defined at run time): it
	// travels with each of its ticks (the stream entry's "version"), so
	// a worker runs a tick with the definition it was claimed under.
	Version string
	// Deadline is when each scheduled slot must have started and
	// finished (zero: none); the leader's DeadlineWatcher judges it.
	Deadline Deadline
	// Relay, when set, hands the job's ticks to another queue instead of
	// Stream (see Relay); the store must be a Relayer that can.
	Relay *Relay
}

// Config configures a Scheduler.
type Config struct {
	// Backend is the store; any Backend will do, since a Scheduler calls
	// only the methods of a SchedulerBackend.
	Backend SchedulerBackend
	// Replica is this replica's holder identity; default DefaultHolder().
	Replica string
	// Jobs are the jobs of the configuration. The Scheduler keeps the
	// slice and reads its elements while it runs: do not modify them
	// after New.
	Jobs  []Job
	Lease LeaseConfig
	// ClaimBatch is the most ticks sent to the store in one call. Default
	// 2000: large enough that 10,000 jobs due together cost five round
	// trips, small enough that one call does not block Redis for long.
	// In a large burst (more than 10·ClaimBatch jobs due at once) the
	// calls after the first two carry up to 5·ClaimBatch: per tick, Redis
	// spends about a quarter less on larger batches (a million jobs due
	// together: 8.8 s in batches of 10,000, 11.6 s in batches of 2,000),
	// and the first ticks of the burst still leave in small calls.
	ClaimBatch int
	// Sink, if set, receives every claimed tick after the store accepted it.
	// With Shards > 1 each shard's runner calls it, concurrently.
	Sink       Sink
	Clock      clockwork.Clock       // default the real clock
	Logger     *slog.Logger          // default slog.Default()
	Registerer prometheus.Registerer // nil: metrics are not registered
	// Metrics, if set, is used instead of creating metrics on Registerer.
	Metrics *Metrics
	// JobMetrics chooses the jobs that get their own metric series; the
	// fleet totals count every job. Default: every job while there are at
	// most 1,000, beyond that only JobMetrics.Jobs.
	JobMetrics JobMetrics
	// OnNewLeader is passed to the elector (with Shards > 1, to every
	// shard's: it sees each shard's leaders).
	OnNewLeader func(Lease)
	// Source, if set, adds the jobs defined at run time (kept in the
	// store): read at the start of each term and whenever they change.
	Source JobSource
	// Shards spreads the jobs over this many shards (docs/shards.md), each
	// led by one replica of the fleet under its own lease: 0 or 1, one
	// lease for every job. Above 1 the Backend must be a Sharder and a
	// Members (the fleet's membership), and a Balancer spreads the shards'
	// leaders over the live replicas (scheduler_shards.go).
	Shards int
}

// Validate checks cfg, naming the field that is wrong. It does not modify
// cfg.
func (c *Config) Validate() error {
	if c.Backend == nil {
		return configErr("backend", "is required")
	}
	if err := c.Lease.Validate(); err != nil {
		return err
	}
	if c.ClaimBatch < 0 {
		return configErr("claim_batch", "must not be negative")
	}
	if err := c.validateShards(); err != nil {
		return err
	}
	if _, ok := c.Backend.(Layouter); c.Shards > 1 && !ok {
		return configErr("shards", "%d shards need a store that records its shard layout (%T does not)", c.Shards, c.Backend)
	}
	seen := make(map[string]int, len(c.Jobs))
	for i, j := range c.Jobs {
		f := func(name string) string {
			if j.Name == "" {
				return "jobs[" + strconv.Itoa(i) + "]." + name
			}
			return "jobs[" + j.Name + "]." + name
		}
		if err := ValidJobName(j.Name); err != nil {
			return configErr(f("name"), "%v", err)
		}
		if k, dup := seen[j.Name]; dup {
			return configErr(f("name"), "duplicate job name (also jobs[%d])", k)
		}
		seen[j.Name] = i
		if j.Schedule == nil {
			return configErr(f("schedule"), "is required")
		}
		switch j.Prefer {
		case "", PreferMissed, PreferDuplicate:
		default:
			return configErr(f("prefer"), "must be %q or %q, got %q", PreferMissed, PreferDuplicate, j.Prefer)
		}
		if j.Grace < 0 {
			return configErr(f("grace"), "must not be negative")
		}
		if j.MaxCatchup < 0 {
			return configErr(f("max_catchup"), "must not be negative")
		}
		if j.MaxLen < 0 {
			return configErr(f("max_len"), "must not be negative")
		}
		if j.Payload != "" && !json.Valid([]byte(j.Payload)) {
			return configErr(f("payload"), "is not valid JSON")
		}
		if j.Deadline.Start < 0 || j.Deadline.Finish < 0 {
			return configErr(f("deadline"), "must not be negative")
		}
		if j.Relay != nil {
			if err := j.Relay.Validate(); err != nil {
				return configErr(f("relay"), "%v", err)
			}
		}
	}
	return c.JobMetrics.validate(seen)
}

// ValidJobName checks a job name: required, at most 200 bytes, no spaces
// or control characters (it becomes part of keys, tick ids and labels).
func ValidJobName(n string) error {
	if n == "" {
		return errors.New("is required")
	}
	if len(n) > 200 {
		return errors.New("is longer than 200 bytes")
	}
	ascii := true
	for i := 0; i < len(n); i++ {
		if c := n[i]; c >= 0x80 {
			ascii = false
			break
		} else if c <= ' ' || c == 0x7f { // space or control
			return errors.New("must not contain spaces or control characters")
		}
	}
	if !ascii && strings.IndexFunc(n, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return errors.New("must not contain spaces or control characters")
	}
	return nil
}

// Scheduler fires jobs while its replica leads: with one shard, under one
// Elector; with Config.Shards > 1, a runner per shard, each firing while
// the Balancer's elector of its shard leads it (scheduler_shards.go).
type Scheduler struct {
	// runner is shard 0's: the only one unless Config.Shards > 1.
	runner
	runners  []*runner // one per shard; runners[0] is &s.runner
	balancer *Balancer // nil unless Config.Shards > 1
	cfg      Config
	lease    LeaseConfig
	metrics  *Metrics
	log      *slog.Logger
	clock    clockwork.Clock
	leading  leadCount // shards led (Shards > 1): Metrics().IsLeader in Go is 1 while any is
}

// Problems lists damaged store state this replica ran into (see
// Elector.Problems), every shard's, and each job the store currently
// refuses as broken.
func (s *Scheduler) Problems() []Problem {
	var ps []Problem
	for _, r := range s.runners {
		ps = append(ps, r.elector.Problems()...)
	}
	return ps
}

// Ready returns nil unless damaged shared state stops this replica's work
// (the lease, the epoch, the last-fired slots as a whole) in some shard.
func (s *Scheduler) Ready() error {
	for _, r := range s.runners {
		if err := r.elector.Ready(); err != nil {
			return err
		}
	}
	return nil
}

// jobState is a job's state in its runner. A runner of one shard of
// several has it only while it leads the shard (runner.buildJobs): a
// replica holds the state of the jobs of the shards it leads, and only
// the definitions (Config.Jobs) of the others.
//
// The settings withJobDefaults defaults are in jobOpts and stream, with
// the defaults applied: use j.prefer, j.grace, j.maxCatchup, j.payload
// and j.stream, not Job's fields of those names (as configured).
type jobState struct {
	// Job is the job as defined: Config.Jobs' element (which New keeps)
	// or a copy of a run-time job's. Read only.
	*Job
	*jobOpts        // shared by the runner's jobs of equal settings
	stream   string // Job.Stream, defaulted

	retention time.Duration
	cursor    Slot  // last slot fired or accounted for
	next      Slot  // first slot after cursor
	planTop   Slot  // newest slot of the last plan; older planned slots are catch-up
	index     int32 // heap index
	retry     bool  // set by the last claim: wake by backoff

	// Damage: while broken is set the store refuses this job's ticks as
	// Broken; the job is retried at its next slot or after backoff,
	// whichever is first, and resumes by its preference once repaired.
	broken    *jobDamage
	brokenTop Slot          // newest slot counted in brokenCtr
	backoff   time.Duration // current retry delay while damaged

	// skips are the ranges of slots this term skipped that no claim has
	// recorded yet: the job's next tick carries them (Tick.Skipped).
	skips []SkipRange

	metrics *jobMetrics // jobOpts.plain unless the job has series of its own
}

// jobDamage is why and since when the store refuses a job's ticks.
type jobDamage struct {
	*DamageError
	at time.Time
}

// jobOpts are a job's settings that withJobDefaults defaults (but its
// stream, which defaults to one of its own), and the metrics of a job of
// that preference without series of its own. Jobs of equal settings
// share one (optsTable): a fleet of a million jobs holds a few.
type jobOpts struct {
	prefer     Prefer
	grace      time.Duration
	maxCatchup int
	payload    string
	plain      jobMetrics
}

// optsTable shares the jobOpts of the jobs built together; a nil table
// shares none.
type optsTable struct {
	m    map[jobOpts]*jobOpts
	last *jobOpts // the last one shared: most jobs have the settings of the one before
}

// initJobState sets js to the new state of job j (which it keeps); own:
// the job has its own metric series.
func (s *Scheduler) initJobState(js *jobState, j *Job, own bool, t *optsTable) {
	d := withJobDefaults(*j, s.lease.TTL)
	k := jobOpts{prefer: d.Prefer, grace: d.Grace, maxCatchup: d.MaxCatchup, payload: d.Payload,
		plain: jobMetrics{fleet: s.metrics.fleet[d.Prefer]}}
	var o *jobOpts
	switch {
	case t == nil:
	case t.last != nil && *t.last == k:
		o = t.last
	default:
		o = t.m[k]
	}
	if o == nil {
		o = new(jobOpts) // only here: k itself stays on the stack
		*o = k
		if t != nil {
			if t.m == nil {
				t.m = map[jobOpts]*jobOpts{}
			}
			t.m[k] = o
		}
	}
	if t != nil {
		t.last = o
	}
	*js = jobState{Job: j, jobOpts: o, stream: d.Stream, index: -1, metrics: &o.plain}
	if jm := s.metrics.forJob(j.Name, d.Prefer, own); jm.own != nil || j.Relay != nil {
		jm.relay = s.metrics.forRelay(j.Relay)
		js.metrics = new(jobMetrics)
		*js.metrics = jm
	}
}

// New validates cfg and builds a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lease := cfg.Lease.WithDefaults()
	replicaDefaults(&cfg.Replica, &cfg.Clock, &cfg.Logger)
	if cfg.ClaimBatch == 0 {
		cfg.ClaimBatch = 2000
	}
	m := cfg.Metrics
	if m == nil {
		var err error
		if m, err = NewMetrics(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	m.now = cfg.Clock.Now
	m.LeaseTTL.Set(lease.TTL.Seconds())
	s := &Scheduler{cfg: cfg, lease: lease, metrics: m, clock: cfg.Clock,
		log: cfg.Logger.With("replica", cfg.Replica)}
	s.runner = runner{s: s, shards: cfg.Shards, backend: cfg.Backend, log: s.log}
	s.runners = []*runner{&s.runner}
	if cfg.Shards > 1 {
		if err := s.shardRunners(); err != nil {
			return nil, err
		}
	}
	if len(cfg.Jobs) > math.MaxInt32 {
		return nil, configErr("jobs", "%d jobs: at most %d", len(cfg.Jobs), math.MaxInt32)
	}
	own, all := cfg.JobMetrics.selects(len(cfg.Jobs))
	exported := 0
	if cfg.Shards > 1 {
		// Each shard's runner builds its jobs' state when its replica
		// starts leading the shard, and drops it when the term ends; here
		// only which jobs are whose, and the jobs' own metric series,
		// which every replica shows from the start, as with one shard.
		for i := range s.cfg.Jobs {
			j := &s.cfg.Jobs[i]
			if own(j.Name) {
				s.metrics.forJob(j.Name, withJobDefaults(*j, lease.TTL).Prefer, true)
				exported++
			}
			r := s.runners[ShardOf(j.Name, cfg.Shards)]
			r.defs = append(r.defs, int32(i))
		}
	} else {
		states := make([]jobState, len(s.cfg.Jobs)) // one allocation
		s.jobs = make([]*jobState, len(states))
		var opts optsTable
		for i := range s.cfg.Jobs {
			js := &states[i]
			s.initJobState(js, &s.cfg.Jobs[i], own(s.cfg.Jobs[i].Name), &opts)
			if js.metrics.own != nil {
				exported++
			}
			s.jobs[i] = js
		}
		s.fileJob = fileJobs(s.jobs, cfg.Source)
	}
	if !all {
		s.logJobMetrics(exported)
	}
	if cfg.Shards > 1 {
		if err := s.balance(); err != nil {
			return nil, err
		}
		return s, nil
	}
	e, err := NewElector(ElectorConfig{
		Backend: cfg.Backend, Holder: cfg.Replica, Lease: cfg.Lease, Clock: cfg.Clock,
		Logger: cfg.Logger, Metrics: m, OnStartedLeading: s.lead, OnNewLeader: cfg.OnNewLeader,
	})
	if err != nil {
		return nil, err
	}
	s.elector = e
	return s, nil
}

// Run takes part in the election and fires due ticks while leading, until
// ctx is done. On return the lease is released.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := s.checkRelays(ctx); err != nil {
		return err
	}
	if err := s.checkLayout(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if s.balancer != nil {
		return s.balancer.Run(ctx)
	}
	return s.elector.Run(ctx)
}

// checkRelays refuses to start with a job whose relay the store cannot
// hand ticks to: appending them to the job's stream instead would
// quietly deliver them where no consumer of the relay looks.
func (s *Scheduler) checkRelays(ctx context.Context) error {
	for i, j := range s.cfg.Jobs {
		if !j.Relay.InClaim() {
			// None, or NATS: its ticks go to the stream as any tick.
			continue
		}
		r, ok := s.runners[ShardOf(j.Name, s.cfg.Shards)].backend.(Relayer)
		if !ok {
			return configErr(fmt.Sprintf("Jobs[%d].Relay", i), "job %s: this store cannot relay ticks to %s", j.Name, j.Relay.Kind)
		}
		if err := r.CanRelay(ctx, *j.Relay); err != nil {
			return configErr(fmt.Sprintf("Jobs[%d].Relay", i), "job %s: %v", j.Name, err)
		}
	}
	return nil
}

// Elector returns the scheduler's elector; nil with Config.Shards > 1,
// where each shard has its own (Balancer).
func (s *Scheduler) Elector() *Elector {
	if s.balancer != nil {
		return nil
	}
	return s.elector
}

// Metrics returns the scheduler's metrics.
func (s *Scheduler) Metrics() *Metrics { return s.metrics }

// pausedSlots counts j's slots in (a, b] that fall in a pause interval.
func pausedSlots(sch Schedule, ctl JobControl, a, b Slot) int64 {
	var n int64
	for _, p := range ctl.Intervals {
		lo := max(a, SlotOf(p.Since)-1)
		hi := b
		if !p.Until.IsZero() {
			hi = min(b, SlotOf(p.Until)-1)
		}
		if hi > lo {
			n += countSlots(sch, lo, hi, maxCount)
		}
	}
	return n
}

// plan appends to ticks those to claim for j at store time now, applying
// the job's preference to slots that are late, and moves j.cursor past the
// slots it skips.
func (r *runner) plan(j *jobState, now Slot, log *slog.Logger, ticks []Tick) []Tick {
	c := j.cursor
	lo := c // fire slots in (lo, now]
	if j.prefer == PreferMissed {
		lo = max(c, now-Slot(max(j.grace, minGrace).Milliseconds())-1)
	}
	p := r.memo.plan(j.Schedule, c, lo, now, j.maxCatchup)
	slots := p.slots
	// Everything after the cursor and before the first slot to fire (or,
	// when none is young enough to fire, up to now) is skipped.
	end := now
	if len(slots) > 0 {
		end = slots[0] - 1
	}
	if skipped := p.skipped; skipped > 0 {
		// Slots of a pause interval are paused, not missed.
		if ctl, ok := r.controls[j.Name]; ok {
			if p := pausedSlots(j.Schedule, ctl, c, end); p > 0 {
				j.metrics.paused(p)
				skipped -= p
			}
		}
		j.metrics.missed(skipped)
		lastSkipped := p.lastSkipped
		attrs := []any{"job", j.Name, "prefer", string(j.prefer), "from", nextSlot(j.Schedule, c).String(),
			"to", lastSkipped.String(), "skipped", skipped}
		if skipped >= maxCount {
			attrs = append(attrs, "skipped_at_least", true)
		}
		if skipped > 0 {
			log.Warn("gap: slots skipped", attrs...)
			j.skipped(SkipRange{From: nextSlot(j.Schedule, c), Through: lastSkipped, Count: skipped, Reason: skipReason(j.prefer)})
		}
		// Accounted for: the next wake-up waits for the next slot.
		j.cursor = max(j.cursor, lastSkipped)
	}
	if len(slots) == 0 {
		return ticks
	}
	if n := len(slots) - 1; n > 0 {
		log.Info("catching up late slots", "job", j.Name, "from", slots[0].String(), "count", n)
	}
	j.planTop = slots[len(slots)-1]
	for i, sl := range slots {
		t := Tick{Job: j.Name, Slot: sl, Stream: j.stream, Payload: j.payload,
			Retention: j.retention, MaxLen: j.MaxLen, Version: j.Version, Relay: j.Relay.claimed()}
		if i == 0 && len(j.skips) > 0 {
			t.Skipped = slices.Clone(j.skips)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// maxSkips bounds the skipped ranges a job carries until a claim records
// them; past it the two oldest are merged into one.
const maxSkips = 16

// skipped remembers a range of slots the job skipped, for its next tick.
func (j *jobState) skipped(r SkipRange) {
	if len(j.skips) >= maxSkips {
		a, b := j.skips[0], j.skips[1]
		j.skips[1] = SkipRange{From: a.From, Through: b.Through, Count: a.Count + b.Count, Reason: b.Reason}
		j.skips = j.skips[1:]
	}
	j.skips = append(j.skips, r)
}

// recorded forgets the skipped ranges a claim of the job has answered
// for (recorded them, or found the tick claimed before): those up to the
// last range tick t carried.
func (j *jobState) recorded(t Tick) {
	if len(t.Skipped) == 0 {
		return
	}
	last := t.Skipped[len(t.Skipped)-1].Through
	k := 0
	for k < len(j.skips) && j.skips[k].Through <= last {
		k++
	}
	j.skips = j.skips[k:]
}

// skipReason is why a job with preference p skips late slots.
func skipReason(p Prefer) string {
	if p == PreferDuplicate {
		return SkipMaxCatchup
	}
	return SkipGrace
}

// retentionFor is how long per-tick records live: three intervals of the
// schedule (the gap after now), at least a second. In-order claims are
// deduplicated by the last-fired slot for as long as the store keeps it;
// the records serve claims out of slot order and retried claims.
func retentionFor(s Schedule, now Slot) time.Duration {
	a := nextSlot(s, now)
	b := nextSlot(s, a)
	d := time.Duration(b-a) * time.Millisecond
	if a == noSlot || b == noSlot {
		d = 0
	}
	return max(3*d, time.Second)
}
