package onetick

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"time"
)

// runner fires the jobs of one shard, over the shard's view of the store,
// while its elector leads the shard: the firing loop of one lease, the
// same code on both paths. With Config.Shards of 0 or 1 the Scheduler's
// only runner fires every job over the store itself, under the single
// Elector; with more, one runner per shard (scheduler_shards.go). Every field is touched only by its
// firing loop (lead), except elector and backend, which are fixed.
type runner struct {
	s       *Scheduler
	shard   int // this runner's shard, of shards
	shards  int // Config.Shards (0 or 1: one runner, the store itself)
	backend SchedulerBackend
	elector *Elector
	log     *slog.Logger
	// jobs are the state of the configured jobs of this shard. The
	// single runner (Config.Shards of 0 or 1) builds them in New and
	// keeps them; a runner of one shard of several builds them at the
	// start of each term from defs, the indexes of its jobs in
	// Config.Jobs, and drops them at its end (buildJobs).
	jobs []*jobState
	defs []int32

	// fileJob holds the names of jobs, when there is a Config.Source:
	// a run-time job of such a name is refused.
	fileJob map[string]bool

	brokenJobs int // jobs with broken set

	// Jobs defined at run time (Config.Source) that are this shard's, by
	// name.
	dyn        map[string]*jobState
	srcVersion int64

	// The leader's copy of the store's pause controls, for accounting the
	// slots it skips without claiming (grace, max_catchup) as paused
	// rather than missed. Claims are arbitrated by the store itself.
	controls   map[string]JobControl
	ctlVersion int64

	// memo remembers the last slot computations: jobs that share a
	// schedule (a million "0 * * * *") compute them once per slot.
	memo slotMemo
}

// storeNow is this replica's best estimate of the store's clock.
func (r *runner) storeNow() time.Time { return r.s.clock.Now().Add(r.elector.ClockOffset()) }

// lead is the firing loop of one leadership term.
func (r *runner) lead(ctx context.Context, ld *Leadership) {
	log := r.log.With("epoch", int64(ld.Lease.Epoch))
	began := r.s.clock.Now()
	if r.shards > 1 {
		r.buildJobs()
		defer r.dropJobs()
	}
	all := r.jobs
	if r.s.cfg.Source != nil {
		r.dyn = map[string]*jobState{}
		if jobs, v, ok := r.s.fetchJobs(ctx, log); ok {
			add, _ := r.diffJobs(jobs, v, log)
			r.dyn = make(map[string]*jobState, len(add))
			for _, j := range add {
				r.dyn[j.Name] = j
			}
			all = append(append([]*jobState(nil), r.jobs...), add...)
		}
	} else if len(r.jobs) == 0 {
		<-ctx.Done()
		return
	}
	last, damaged, ok := r.loadCursors(ctx, ld, all, log)
	if !ok {
		return
	}
	defer r.endTerm()
	r.loadControls(ctx, log)
	now := SlotOf(r.storeNow())
	h := make(jobHeap, 0, len(all))
	for _, j := range all {
		r.startJob(j, last, damaged, now)
		if d := damaged[j.Name]; d != nil {
			r.markBroken(j, d, log)
		}
		h = append(h, j)
	}
	heap.Init(&h)
	log.Info("firing", "jobs", len(h), "ready_in", r.s.clock.Since(began).Round(time.Millisecond))
	var rf refresher
	rf.last = r.s.clock.Now()
	defer rf.wg.Wait()
	minWait := time.Duration(0)
	var due []*jobState
	for {
		wait := sourceCheckEvery
		if len(h) > 0 && h[0].next != noSlot {
			wait = max(r.s.clock.Until(h[0].next.Time().Add(-r.elector.ClockOffset())), minWait)
		} else if r.s.cfg.Source == nil {
			<-ctx.Done()
			return
		}
		if r.s.cfg.Source != nil {
			// Look for changes of the run-time jobs at least this often.
			wait = min(wait, sourceCheckEvery)
		}
		rf.maybeStart(ctx, r, log)
		if wait > 0 {
			t := r.s.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.Chan():
			case got := <-rf.pending:
				t.Stop()
				rf.pending = nil
				if ld.Trusted() {
					r.applyRefresh(ctx, &h, got, log)
				}
				continue
			}
		} else if ctx.Err() != nil {
			return
		}
		// A leader that was paused (GC, SIGSTOP) wakes here with its timer:
		// if its lease is no longer trusted it must neither fire nor account
		// for slots as missed; the next leader does that.
		if !ld.Trusted() {
			return
		}
		select {
		case got := <-rf.pending:
			rf.pending = nil
			r.applyRefresh(ctx, &h, got, log)
		default:
		}
		now := SlotOf(r.storeNow())
		due = popDue(&h, now, due[:0])
		early, fenced := r.claim(ctx, ld, due, now, log)
		for _, j := range due {
			j.next = r.memo.next(j.Schedule, j.cursor)
			if j.retry {
				// Damaged state refused the job's ticks: try again at its
				// next slot or after the backoff, whichever is first.
				j.retry = false
				j.backoff = min(max(2*j.backoff, time.Second), maxDamageBackoff)
				j.next = now + Slot(j.backoff.Milliseconds())
				if n := nextSlot(j.Schedule, now); n != noSlot {
					j.next = min(j.next, n)
				}
			} else if j.broken == nil {
				j.backoff = 0
			}
		}
		pushBack(&h, due)
		if cap(due) > 4*len(due)+1024 {
			due = nil // a burst is over: do not hold its buffer
		}
		if fenced || !ld.Trusted() {
			return
		}
		minWait = 0
		if early {
			minWait = 5 * time.Millisecond
		}
	}
}

// maxDamageBackoff bounds the retry delay of a job whose state is
// damaged: a repaired job fires again within this long at the latest.
const maxDamageBackoff = 30 * time.Second

// loadCursors reads the persisted last-fired slots, retrying while the
// lease is trusted. Jobs whose own slot is damaged come back in damaged;
// the last-fired state as a whole being damaged is reported once and
// retried with a backoff until it is repaired.
func (r *runner) loadCursors(ctx context.Context, ld *Leadership, jobs []*jobState, log *slog.Logger) (map[string]Slot, map[string]*DamageError, bool) {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	wait := 100 * time.Millisecond
	for {
		last, err := r.backend.LastFired(ctx, names)
		var whole *DamageError
		switch {
		case err == nil:
			r.elector.health.clear(StateClaim)
			return last, nil, true
		case last != nil && errors.Is(err, ErrDamaged):
			// Some jobs' slots are damaged: the others start normally.
			r.elector.health.clear(StateClaim)
			damaged := map[string]*DamageError{}
			for _, d := range Damages(err) {
				damaged[d.Job] = d
			}
			return last, damaged, true
		case errors.As(err, &whole):
			r.elector.health.set(StateClaim, whole)
			wait = min(max(2*wait, time.Second), maxDamageBackoff)
		case ctx.Err() != nil:
		default:
			log.Warn("reading last-fired slots failed; retrying", "err", err)
		}
		if ctx.Err() != nil || !ld.Trusted() {
			return nil, nil, false
		}
		t := r.s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, false
		case <-t.Chan():
		}
	}
}

// loadControls reads the pause controls at the start of a term (later
// changes arrive through the background refresh). Failing to read them is
// not fatal: the store still refuses paused slots; only the accounting of
// skipped slots may then count a paused slot as missed.
func (r *runner) loadControls(ctx context.Context, log *slog.Logger) {
	ctl, v, err := r.backend.Controls(ctx)
	if err != nil && ctl == nil {
		if ctx.Err() == nil {
			log.Warn("reading the pause controls failed; the store still refuses paused slots", "err", err)
		}
		return
	}
	r.controls, r.ctlVersion = ctl, v
}

// markBroken records that the store refused j's ticks because of d:
// logged once per change of the damage, counted in scheduler_broken_jobs.
func (r *runner) markBroken(j *jobState, d *DamageError, log *slog.Logger) {
	j.retry = true
	if j.broken != nil && j.broken.Key == d.Key && j.broken.Reason == d.Reason {
		return
	}
	if j.broken == nil {
		r.brokenJobs++
		r.s.metrics.BrokenJobs.Inc()
		j.broken = &jobDamage{at: r.s.clock.Now()}
	}
	j.broken.DamageError = d
	attrs := []any{"job", j.Name, "key", d.Key, "reason", d.Reason}
	if d.Field != "" {
		attrs = append(attrs, "field", d.Field)
	}
	log.Error("job's store state is damaged: its ticks are refused until repaired (other jobs are unaffected)", attrs...)
}

// repaired records that the store accepted j's ticks again.
func (r *runner) repaired(j *jobState, log *slog.Logger) {
	if j.broken == nil {
		return
	}
	log.Info("job's store state usable again; firing by its preference", "job", j.Name, "key", j.broken.Key,
		"damaged_for", r.s.clock.Since(j.broken.at).Round(time.Millisecond))
	j.broken = nil
	j.backoff = 0
	r.brokenJobs--
	r.s.metrics.BrokenJobs.Dec()
}

// endTerm forgets the damage seen in a leadership term: the next term
// reads the store afresh.
func (r *runner) endTerm() {
	for _, j := range r.jobs {
		j.broken, j.skips = nil, nil
	}
	for _, j := range r.dyn {
		j.broken, j.skips = nil, nil
	}
	// The gauge counts every runner's broken jobs: take this one's out.
	r.s.metrics.BrokenJobs.Sub(float64(r.brokenJobs))
	r.brokenJobs = 0
}

// buildJobs builds the state of the jobs of a shard of several, at the
// start of a term (the single runner's were built by New).
func (r *runner) buildJobs() {
	own, _ := r.s.cfg.JobMetrics.selects(len(r.s.cfg.Jobs))
	states := make([]jobState, len(r.defs)) // one allocation
	r.jobs = make([]*jobState, len(states))
	var opts optsTable
	for i, k := range r.defs {
		j := &r.s.cfg.Jobs[k]
		r.s.initJobState(&states[i], j, own(j.Name), &opts)
		r.jobs[i] = &states[i]
	}
	r.fileJob = fileJobs(r.jobs, r.s.cfg.Source)
}

// dropJobs releases what buildJobs and the term built: a replica holds
// the state of the jobs of the shards it leads, not of the others.
func (r *runner) dropJobs() {
	r.jobs, r.fileJob, r.dyn = nil, nil, nil
	r.memo = slotMemo{}
}

// fileJobs returns the names of jobs when there is a source of run-time
// jobs (whose names must differ), else nil.
func fileJobs(jobs []*jobState, src JobSource) map[string]bool {
	if src == nil {
		return nil
	}
	m := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		m[j.Name] = true
	}
	return m
}
