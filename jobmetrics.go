package onetick

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// JobMetricsMode chooses which jobs get their own metric series.
type JobMetricsMode string

const (
	// JobMetricsAuto (the default): every job while there are at most
	// JobMetrics.Limit jobs, beyond that only the listed ones.
	JobMetricsAuto JobMetricsMode = "auto"
	// JobMetricsAll: every job, however many.
	JobMetricsAll JobMetricsMode = "all"
	// JobMetricsListed: only the listed jobs.
	JobMetricsListed JobMetricsMode = "listed"
	// JobMetricsNone: no job; the fleet totals only.
	JobMetricsNone JobMetricsMode = "none"
)

// DefaultJobMetricsLimit is the default JobMetrics.Limit. A job's own
// series cost about 450 bytes of every scrape and 2.8 KB of the replica's
// heap (measured: BenchmarkScrape): 1,000 jobs make a scrape of about
// 0.45 MB, which one target may reasonably send every 15 seconds; 100,000
// would make 44 MB.
const DefaultJobMetricsLimit = 1000

// JobMetrics chooses the jobs that get their own metric series
// (scheduler_job_*, labelled job_name). The fleet totals count every job
// whatever it says. The zero value is JobMetricsAuto with the default
// limit.
type JobMetrics struct {
	Mode JobMetricsMode
	// Limit applies to JobMetricsAuto. Default DefaultJobMetricsLimit.
	Limit int
	// Jobs are the names of jobs that have their own series in modes auto
	// (also beyond the limit) and listed.
	Jobs []string
}

// validate checks c against the configured job names.
func (c JobMetrics) validate(jobs map[string]int) error {
	switch c.Mode {
	case "", JobMetricsAuto, JobMetricsAll, JobMetricsListed, JobMetricsNone:
	default:
		return configErr("metrics.per_job", "must be %q, %q, %q or %q, got %q",
			JobMetricsAuto, JobMetricsAll, JobMetricsListed, JobMetricsNone, c.Mode)
	}
	if c.Limit < 0 {
		return configErr("metrics.per_job_limit", "must not be negative")
	}
	if len(c.Jobs) > 0 && (c.Mode == JobMetricsAll || c.Mode == JobMetricsNone) {
		return configErr("metrics.jobs", "has no effect with per_job %q", c.Mode)
	}
	seen := map[string]bool{}
	for i, n := range c.Jobs {
		f := "metrics.jobs[" + strconv.Itoa(i) + "]"
		if _, ok := jobs[n]; !ok {
			return configErr(f, "names no configured job: %q", n)
		}
		if seen[n] {
			return configErr(f, "lists %q twice", n)
		}
		seen[n] = true
	}
	return nil
}

// selects returns whether c gives a job of a fleet of n jobs its own
// series (by its name), and whether it does so for every job.
func (c JobMetrics) selects(n int) (own func(name string) bool, all bool) {
	mode, limit := c.Mode, c.Limit
	if mode == "" {
		mode = JobMetricsAuto
	}
	if limit == 0 {
		limit = DefaultJobMetricsLimit
	}
	switch {
	case mode == JobMetricsAll || mode == JobMetricsAuto && n <= limit:
		return func(string) bool { return true }, true
	case mode == JobMetricsNone:
		return func(string) bool { return false }, n == 0
	}
	listed := make(map[string]bool, len(c.Jobs))
	for _, j := range c.Jobs {
		listed[j] = true
	}
	return func(name string) bool { return listed[name] }, false
}

// tickCounters count the fates of ticks. delivery is nil in a job's own
// series (see jobSeries.deliveryVec).
type tickCounters struct {
	enqueued, duplicate, fenced, missed, catchup, broken, paused, delivery prometheus.Counter
}

// jobSeries are one job's own series.
type jobSeries struct {
	tickCounters
	lastFired prometheus.Gauge
	name      string
	// The delivery-error series is looked up on each error: most fleets
	// have no sink, and a series that can only be zero costs every scrape.
	deliveryVec *prometheus.CounterVec
}

// jobMetrics is where one job's events are counted: in the fleet totals
// always, in the job's own series when it has them. The series are looked
// up once, when the scheduler is built: at 100,000 jobs a label lookup per
// tick would cost more than the claim.
type jobMetrics struct {
	fleet *tickCounters // shared by the jobs of one preference
	own   *jobSeries    // nil: the job has no series of its own
	relay *relaySeries  // nil: the job has no relay
}

// forJob returns the counters of the job name with preference p, creating
// its own series (at zero, so that increase() sees the first event) when
// own is set.
func (m *Metrics) forJob(name string, p Prefer, own bool) jobMetrics {
	jm := jobMetrics{fleet: m.fleet[p]}
	if own {
		jm.own = &jobSeries{tickCounters: tickCounters{
			enqueued:  m.JobEnqueuedTicks.WithLabelValues(name),
			duplicate: m.JobDuplicateTicks.WithLabelValues(name),
			fenced:    m.JobFencedTicks.WithLabelValues(name),
			missed:    m.JobMissedTicks.WithLabelValues(name, string(p)),
			catchup:   m.JobCatchupTicks.WithLabelValues(name),
			broken:    m.JobBrokenTicks.WithLabelValues(name),
			paused:    m.JobPausedTicks.WithLabelValues(name),
		}, lastFired: m.JobLastFiredSlot.WithLabelValues(name), name: name, deliveryVec: m.JobDeliveryErrors}
	}
	return jm
}

// claimed counts a tick the store accepted for slot; catchup: a late slot
// fired by catch-up.
func (j jobMetrics) claimed(slot Slot, catchup bool) {
	j.fleet.enqueued.Inc()
	if catchup {
		j.fleet.catchup.Inc()
	}
	if j.own != nil {
		j.own.enqueued.Inc()
		if catchup {
			j.own.catchup.Inc()
		}
		j.own.lastFired.Set(float64(slot) / 1000)
	}
}

func (j jobMetrics) duplicate() {
	j.fleet.duplicate.Inc()
	if j.own != nil {
		j.own.duplicate.Inc()
	}
}

func (j jobMetrics) fenced() {
	j.fleet.fenced.Inc()
	if j.own != nil {
		j.own.fenced.Inc()
	}
}

func (j jobMetrics) broken() {
	j.fleet.broken.Inc()
	if j.own != nil {
		j.own.broken.Inc()
	}
}

func (j jobMetrics) paused(n int64) {
	j.fleet.paused.Add(float64(n))
	if j.own != nil {
		j.own.paused.Add(float64(n))
	}
}

func (j jobMetrics) missed(n int64) {
	j.fleet.missed.Add(float64(n))
	if j.own != nil {
		j.own.missed.Add(float64(n))
	}
}

// deliveryFailed counts a claimed tick the sink did not take.
func (j jobMetrics) deliveryFailed() {
	j.fleet.delivery.Inc()
	if j.own != nil {
		j.own.deliveryVec.WithLabelValues(j.own.name).Inc()
	}
}

// logJobMetrics says once, at start, that some jobs have no series of
// their own, so that whoever looks for one learns why it is absent.
func (s *Scheduler) logJobMetrics(exported int) {
	c := s.cfg.JobMetrics
	attrs := []any{"jobs", len(s.cfg.Jobs), "jobs_with_own_series", exported}
	switch c.Mode {
	case JobMetricsNone:
		s.log.Info("no per-job metric series (metrics.per_job: none); the fleet totals count every job", attrs...)
	case JobMetricsListed:
		s.log.Info("per-job metric series only for the jobs in metrics.jobs (metrics.per_job: listed); the fleet totals count every job", attrs...)
	default:
		limit := c.Limit
		if limit == 0 {
			limit = DefaultJobMetricsLimit
		}
		attrs = append(attrs, "per_job_limit", limit)
		s.log.Info("more jobs than metrics.per_job_limit: per-job metric series only for the jobs in metrics.jobs; the fleet totals count every job", attrs...)
	}
}

// dropJob deletes the own series of a job that is gone (a job defined at
// run time and removed), so that they do not linger in every scrape.
func (m *Metrics) dropJob(name string) {
	for _, v := range []*prometheus.CounterVec{m.JobEnqueuedTicks, m.JobDuplicateTicks, m.JobFencedTicks,
		m.JobCatchupTicks, m.JobBrokenTicks, m.JobPausedTicks, m.JobDeliveryErrors} {
		v.DeleteLabelValues(name)
	}
	m.JobMissedTicks.DeletePartialMatch(prometheus.Labels{labelJob: name})
	m.JobLastFiredSlot.DeleteLabelValues(name)
}

// deadlineSeries counts the times one job turned late, in the fleet
// totals and in its own series when it has them.
type deadlineSeries struct {
	fleet [2]prometheus.Counter // start, finish
	own   [2]prometheus.Counter // nil: no series of its own
	vec   *prometheus.CounterVec
	name  string
}

// deadlineSeries returns the counters of job name; own: with its own
// series (created at zero).
func (m *Metrics) deadlineSeries(name string, own bool) *deadlineSeries {
	s := &deadlineSeries{name: name}
	for k, kind := range kindNames {
		s.fleet[k] = m.DeadlineMissed.WithLabelValues(kind)
		if own {
			s.vec = m.JobDeadlineMissed
			s.own[k] = m.JobDeadlineMissed.WithLabelValues(name, kind)
		}
	}
	return s
}

func (s *deadlineSeries) missed(k int) {
	s.fleet[k].Inc()
	if s.own[k] != nil {
		s.own[k].Inc()
	}
}

// drop deletes the job's own series (the job is gone, or has no deadline
// any more).
func (s *deadlineSeries) drop() {
	if s.vec != nil {
		s.vec.DeletePartialMatch(prometheus.Labels{labelJob: s.name})
	}
}
