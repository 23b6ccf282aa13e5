package onetick

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Deadlines are watched on the leader (docs/ledger.md, "Deadlines"): every
// CheckEvery a DeadlineWatcher judges, for each job with a Deadline, the
// ledger records of its recent slots (Deadline.Judge) and keeps the job's
// state: ok, or late (which deadline, which slot). It acts on a change of
// state only, green to red and red to green: a log line naming the job,
// the metrics (scheduler_deadline_missed_total, scheduler_late_jobs) and
// a notice to its DeadlineNotifier. The judge (deadlines_judge.go) reads
// only the store, so a new leader finds the same state as the old one; it
// announces the jobs already late once, marked Takeover.

// The deadlines of a job (DeadlineNotice.Deadline, the metrics' label).
const (
	DeadlineStart  = "start"
	DeadlineFinish = "finish"
)

// The states of a job (DeadlineNotice.Status).
const (
	DeadlineLate = "late"
	DeadlineOK   = "ok"
)

// Watcher defaults.
const (
	DefaultDeadlineCheckEvery = 10 * time.Second
	DefaultDeadlineLookback   = time.Minute
)

// DeadlineNotice is one change of a job's deadline state.
type DeadlineNotice struct {
	Job string
	// Status is DeadlineLate or DeadlineOK.
	Status string
	// Deadline is the deadline missed (late), or the one that was missed
	// and is met again (ok): DeadlineStart or DeadlineFinish.
	Deadline string
	// Slot is the slot that missed the deadline (late), or the newest slot
	// that met it (ok).
	Slot Slot
	// Due is when the slot's deadline passed (late), or fell (ok).
	Due time.Time
	// Takeover: a new leader announces a job it found late already; the
	// previous leader may have announced it too (same ID).
	Takeover bool
	// At is the check's time (the store's clock, as this replica
	// estimates it).
	At time.Time
}

// ID names the notice, the same whichever leader sends it:
// JOB:DEADLINE:STATUS:SLOT_MS. A receiver deduplicates on it.
func (n DeadlineNotice) ID() string {
	return TickID(n.Job+":"+n.Deadline+":"+n.Status, n.Slot)
}

// DeadlineNotifier receives the changes of the jobs' deadline states
// (package notify sends them to a webhook). A failed notice is sent again
// at the next check, unless the state changed back meanwhile.
type DeadlineNotifier interface {
	NotifyDeadline(ctx context.Context, n DeadlineNotice) error
}

// DeadlineState is how a job stands against its deadline, as the leader's
// last check found it.
type DeadlineState struct {
	Job      string   `json:"job"`
	Deadline Deadline `json:"-"`
	// Start and Finish are the job's deadlines in seconds (0: none).
	Start  float64 `json:"start_seconds,omitempty"`
	Finish float64 `json:"finish_seconds,omitempty"`
	Late   bool    `json:"late"`
	// Missed is the deadline that makes the job late (start, finish) and
	// Slot the slot that missed it; empty and zero when ok.
	Missed string `json:"missed,omitempty"`
	Slot   Slot   `json:"slot,omitempty"`
	// Since is when this leader saw the state begin.
	Since time.Time `json:"since"`
	// Checked is the time of the check that judged it.
	Checked time.Time `json:"checked"`
}

// DeadlineReader gives the deadline states, for the job page and the API.
// A DeadlineWatcher implements it.
type DeadlineReader interface {
	// DeadlineState returns job's state; false when there is none: the
	// job has no deadline, this replica does not lead, or no check has
	// judged the job yet.
	DeadlineState(job string) (DeadlineState, bool)
	// DeadlineStates returns every judged job's state, by name.
	DeadlineStates() []DeadlineState
}

// DeadlineConfig configures a DeadlineWatcher. Scheduler.DeadlineWatcher
// fills in the jobs, the metrics, the clock, the leadership and the
// logger from the scheduler.
type DeadlineConfig struct {
	// Ledger is the store's run ledger; nil: the store keeps none, and Run
	// says once that deadlines need one.
	Ledger Ledger
	// Jobs and Source are the jobs, as the scheduler's (only those with a
	// Deadline are watched).
	Jobs   []Job
	Source JobSource
	// CheckEvery is the time between checks (DefaultDeadlineCheckEvery).
	CheckEvery time.Duration
	// Lookback: each check reads the records of the slots since the
	// longest deadline plus Lookback ago in one paged query
	// (DefaultDeadlineLookback); an older slot is read alone, and only
	// when it is the newest whose deadline has passed.
	Lookback time.Duration
	// Notifier, if set, receives each change of state.
	Notifier DeadlineNotifier
	// Metrics counts the changes (nil: metrics not registered).
	Metrics *Metrics
	// JobMetrics chooses the jobs with their own series, as the
	// scheduler's.
	JobMetrics JobMetrics
	// Leading reports whether this replica leads now (nil: always); only
	// a leader checks.
	Leading func() bool
	// Now is the store's clock as this replica estimates it (nil:
	// Clock.Now).
	Now    func() time.Time
	Clock  clockwork.Clock
	Logger *slog.Logger

	// perShard, set by a sharded Scheduler's DeadlineWatcher, judges each
	// job through its shard: its ledger, its store clock, and only while
	// this replica leads that shard.
	perShard *shardWatch
}

// shardWatch is how a sharded scheduler's watcher sees each job's shard
// (docs/shards.md, "Who reads the fleet").
type shardWatch struct {
	leads  func(job string) bool
	ledger func(job string) Ledger
	now    func(job string) time.Time
}

// DeadlineWatcher watches the jobs' deadlines; see the top of deadlines.go.
type DeadlineWatcher struct {
	cfg DeadlineConfig
	log *slog.Logger

	mu     sync.Mutex
	states map[string]DeadlineState // published by each check

	// The rest belongs to Check (one at a time).
	check      sync.Mutex
	leading    bool
	synced     bool // the jobs were read in this term
	jobs       map[string]*watchedJob
	srcVersion int64
	srcJobs    []Job // the run-time jobs with a deadline
	srcCount   int   // all the run-time jobs
	srcRead    bool
	noLedger   bool   // said that deadlines need a ledger
	lastErr    string // the last check's error, logged once
}

// watchedJob is a job with a deadline and what the watcher knows of it.
type watchedJob struct {
	Job
	kinds [2]kindState // start, finish
	// shown is the state the log and the metrics last reported (valid:
	// one has been); sent the state the notifier last accepted.
	shown, sent stateMark
	// takeover: the job was found at the start of this term; its first
	// state is announced as one found, not as a change.
	takeover bool
	since    time.Time
	// oldest is the oldest slot of j's records seen (hasOldest: one was).
	oldest    Slot
	hasOldest bool
	judged    bool
	metrics   *deadlineSeries
}

type stateMark struct {
	valid, late bool
	kind        string
	slot        Slot
}

// kindState is the newest decided slot of one deadline: met or missed.
type kindState struct {
	known, missed bool
	slot          Slot
}

// NewDeadlineWatcher validates cfg and builds a watcher.
func NewDeadlineWatcher(cfg DeadlineConfig) (*DeadlineWatcher, error) {
	switch {
	case cfg.CheckEvery < 0:
		return nil, configErr("deadlines.check_every", "must not be negative")
	case cfg.Lookback < 0:
		return nil, configErr("deadlines.lookback", "must not be negative")
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = DefaultDeadlineCheckEvery
	}
	if cfg.Lookback == 0 {
		cfg.Lookback = DefaultDeadlineLookback
	}
	replicaDefaults(nil, &cfg.Clock, &cfg.Logger)
	if cfg.Now == nil {
		cfg.Now = cfg.Clock.Now
	}
	if cfg.Leading == nil {
		cfg.Leading = func() bool { return true }
	}
	if cfg.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		cfg.Metrics = m
	}
	return &DeadlineWatcher{cfg: cfg, log: cfg.Logger, jobs: map[string]*watchedJob{}}, nil
}

// DeadlineWatcher builds a watcher of s's jobs that checks while s leads;
// cfg gives the ledger, the timing and the notifier.
func (s *Scheduler) DeadlineWatcher(cfg DeadlineConfig) (*DeadlineWatcher, error) {
	cfg.Jobs, cfg.Source, cfg.JobMetrics = s.cfg.Jobs, s.cfg.Source, s.cfg.JobMetrics
	cfg.Metrics, cfg.Clock, cfg.Now = s.metrics, s.clock, s.storeNow
	cfg.Logger = s.log
	if s.balancer == nil {
		cfg.Leading = s.elector.IsLeader
		return NewDeadlineWatcher(cfg)
	}
	// Sharded: one watcher checks while this replica leads any shard, and
	// judges a job only while it leads the job's shard, from that shard's
	// ledger. A job whose shard it stops leading is forgotten, as every
	// job is when a single leader steps down.
	of := func(job string) *runner { return s.runners[ShardOf(job, s.cfg.Shards)] }
	cfg.Leading = func() bool { return len(s.balancer.Led()) > 0 }
	fleet := cfg.Ledger
	cfg.perShard = &shardWatch{
		leads: func(job string) bool { return of(job).elector.IsLeader() },
		ledger: func(job string) Ledger {
			if fleet == nil {
				return nil
			}
			lg, _ := of(job).backend.(Ledger)
			return lg
		},
		now: func(job string) time.Time { return of(job).storeNow() },
	}
	return NewDeadlineWatcher(cfg)
}

// ledger is the ledger that holds job's records.
func (w *DeadlineWatcher) ledger(job string) Ledger {
	if w.cfg.perShard != nil {
		return w.cfg.perShard.ledger(job)
	}
	return w.cfg.Ledger
}

// judgesNow says whether this replica judges job now (a sharded
// scheduler: it leads the job's shard) and the store's time for it.
func (w *DeadlineWatcher) judgesNow(job string, now time.Time) (time.Time, bool) {
	if w.cfg.perShard == nil {
		return now, true
	}
	if !w.cfg.perShard.leads(job) {
		return now, false
	}
	return w.cfg.perShard.now(job), true
}

// Run checks every CheckEvery until ctx is done.
func (w *DeadlineWatcher) Run(ctx context.Context) error {
	t := w.cfg.Clock.NewTicker(w.cfg.CheckEvery)
	defer t.Stop()
	defer w.standDown()
	for {
		err := w.Check(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && err.Error() != w.lastErr:
			w.log.Warn("checking the job deadlines failed; trying again", "err", err, "check_every", w.cfg.CheckEvery.String())
		case err == nil && w.lastErr != "":
			w.log.Info("checking the job deadlines works again")
		}
		w.lastErr = ""
		if err != nil {
			w.lastErr = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.Chan():
		}
	}
}

// Check judges every job with a deadline once and acts on the changes;
// on a replica that does not lead it forgets the states. A job the store
// cannot answer for keeps its state; the first such error is returned.
func (w *DeadlineWatcher) Check(ctx context.Context) error {
	w.check.Lock()
	defer w.check.Unlock()
	if !w.cfg.Leading() {
		if w.leading {
			w.standDownLocked()
		}
		return nil
	}
	w.leading = true
	if err := w.syncJobs(ctx); err != nil {
		return err
	}
	w.synced = true
	if len(w.jobs) == 0 {
		w.publish(time.Time{})
		return nil
	}
	if w.cfg.Ledger == nil {
		w.sayNoLedger()
		return nil
	}
	now := w.cfg.Now()
	var first error
	names := w.names()
	for _, name := range names {
		j := w.jobs[name]
		jnow, ok := w.judgesNow(name, now)
		if !ok { // another replica leads its shard: forget, as on a step-down
			if j.judged || !j.takeover {
				w.jobs[name] = &watchedJob{Job: j.Job, takeover: true, metrics: j.metrics}
			}
			continue
		}
		if err := w.judge(ctx, j, jnow); err != nil {
			if errors.Is(err, ErrLedgerOff) {
				w.sayNoLedger()
				return nil
			}
			if first == nil {
				first = err
			}
			continue
		}
		w.note(j, jnow)
	}
	// The states are readable, and the gauge set, before the notices go
	// out: a slow receiver delays only them.
	w.publish(now)
	for _, name := range names {
		if j := w.jobs[name]; j.judged {
			w.notify(ctx, j, now)
		}
	}
	return first
}

func (w *DeadlineWatcher) sayNoLedger() {
	if !w.noLedger {
		w.noLedger = true
		w.log.Warn("job deadlines are not checked: they need the run ledger, which this store does not keep (ledger.off, or a store without one; see docs/ledger.md)", "jobs_with_deadline", len(w.jobs))
	}
}

func (w *DeadlineWatcher) names() []string {
	names := make([]string, 0, len(w.jobs))
	for n := range w.jobs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// syncJobs brings the watched jobs in line with the file's and the run-time
// ones (read again when their version changes).
func (w *DeadlineWatcher) syncJobs(ctx context.Context) error {
	if src := w.cfg.Source; src != nil {
		v, err := src.Version(ctx)
		if err != nil {
			return err
		}
		if !w.srcRead || v != w.srcVersion {
			// Read again as the scheduler reads them; only those with a
			// deadline are kept (a fleet may hold a million).
			jobs, v, err := src.Jobs(ctx)
			if err != nil {
				return err
			}
			w.srcJobs, w.srcCount, w.srcVersion, w.srcRead = w.srcJobs[:0], len(jobs), v, true
			for _, j := range jobs {
				if j.Deadline.Set() {
					w.srcJobs = append(w.srcJobs, j)
				}
			}
		}
	}
	own, _ := w.cfg.JobMetrics.selects(len(w.cfg.Jobs) + w.srcCount)
	seen := map[string]bool{}
	add := func(j Job) {
		if !j.Deadline.Set() || j.Schedule == nil || seen[j.Name] {
			return
		}
		seen[j.Name] = true
		cur, ok := w.jobs[j.Name]
		if ok && cur.Since.Equal(j.Since) && cur.Deadline == j.Deadline && cur.Version == j.Version {
			return
		}
		// A job found as the term begins is announced as found.
		nj := &watchedJob{Job: j, takeover: !w.synced}
		if ok { // changed: keep what was announced, judge anew
			nj.shown, nj.sent, nj.since, nj.takeover, nj.metrics = cur.shown, cur.sent, cur.since, cur.takeover, cur.metrics
		}
		if nj.metrics == nil {
			nj.metrics = w.cfg.Metrics.deadlineSeries(j.Name, own(j.Name))
		}
		w.jobs[j.Name] = nj
	}
	for _, j := range w.cfg.Jobs {
		add(j)
	}
	for _, j := range w.srcJobs {
		add(j)
	}
	for name, j := range w.jobs {
		if !seen[name] {
			j.metrics.drop()
			delete(w.jobs, name)
		}
	}
	return nil
}

// standDown forgets the states when this replica stops leading: the next
// term judges and announces afresh.
func (w *DeadlineWatcher) standDown() {
	w.check.Lock()
	defer w.check.Unlock()
	w.standDownLocked()
}

func (w *DeadlineWatcher) standDownLocked() {
	w.leading, w.synced = false, false
	for name, j := range w.jobs {
		w.jobs[name] = &watchedJob{Job: j.Job, takeover: true, metrics: j.metrics}
	}
	w.cfg.Metrics.LateJobs.Set(0)
	w.mu.Lock()
	w.states = nil
	w.mu.Unlock()
}

// publish makes the judged states readable and sets the gauge.
func (w *DeadlineWatcher) publish(now time.Time) {
	states := make(map[string]DeadlineState, len(w.jobs))
	late := 0
	for name, j := range w.jobs {
		if !j.judged {
			continue
		}
		st := DeadlineState{Job: name, Deadline: j.Deadline, Start: j.Deadline.Start.Seconds(),
			Finish: j.Deadline.Finish.Seconds(), Since: j.since, Checked: now}
		if m := j.mark(); m.late {
			late++
			st.Late, st.Missed, st.Slot = true, m.kind, m.slot
		}
		states[name] = st
	}
	w.cfg.Metrics.LateJobs.Set(float64(late))
	w.mu.Lock()
	w.states = states
	w.mu.Unlock()
}

// DeadlineState implements DeadlineReader.
func (w *DeadlineWatcher) DeadlineState(job string) (DeadlineState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.states[job]
	return st, ok
}

// DeadlineStates implements DeadlineReader.
func (w *DeadlineWatcher) DeadlineStates() []DeadlineState {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]DeadlineState, 0, len(w.states))
	for _, st := range w.states {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b DeadlineState) int {
		switch {
		case a.Job < b.Job:
			return -1
		case a.Job > b.Job:
			return 1
		}
		return 0
	})
	return out
}

var _ DeadlineReader = (*DeadlineWatcher)(nil)
