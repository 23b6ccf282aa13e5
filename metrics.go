package onetick

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's Prometheus metrics. Create them with
// NewMetrics on a Registerer of the caller's choosing; a library never
// registers on the global registry by itself.
//
// The tick counters come twice: as fleet totals, which count every job
// and are always exported, and as per-job series (scheduler_job_*,
// labelled job_name) for the jobs Config.JobMetrics selects. No metric has
// a label named job or instance: Prometheus attaches those to every series
// it scrapes.
type Metrics struct {
	LeadershipChanges prometheus.Counter

	// Fleet totals over every job.
	EnqueuedTicks  prometheus.Counter
	DuplicateTicks prometheus.Counter
	FencedTicks    prometheus.Counter
	// MissedTicks is labelled prefer (missed, duplicate), so that alerts
	// can select the slots lost by jobs that chose to lose them rather than
	// fire twice.
	MissedTicks    *prometheus.CounterVec
	CatchupTicks   prometheus.Counter
	BrokenTicks    prometheus.Counter
	PausedTicks    prometheus.Counter
	DeliveryErrors prometheus.Counter

	// Per-job series, labelled job_name (JobMissedTicks also prefer).
	JobEnqueuedTicks  *prometheus.CounterVec
	JobDuplicateTicks *prometheus.CounterVec
	JobFencedTicks    *prometheus.CounterVec
	JobMissedTicks    *prometheus.CounterVec
	JobCatchupTicks   *prometheus.CounterVec
	JobBrokenTicks    *prometheus.CounterVec
	JobPausedTicks    *prometheus.CounterVec
	JobDeliveryErrors *prometheus.CounterVec
	JobLastFiredSlot  *prometheus.GaugeVec

	IsLeader         prometheus.Gauge
	LeaseEpoch       prometheus.Gauge
	RenewalLatency   prometheus.Histogram
	TickDelay        prometheus.Histogram
	StoreClockOffset prometheus.Gauge
	LeaseTTL         prometheus.Gauge
	BrokenJobs       prometheus.Gauge
	StoreDamaged     *prometheus.GaugeVec

	// Deadlines (DeadlineWatcher): the jobs that turned late, labelled
	// deadline (start, finish), in total and per job; the jobs late now.
	DeadlineMissed    *prometheus.CounterVec
	JobDeadlineMissed *prometheus.CounterVec
	LateJobs          prometheus.Gauge

	// Relays (relaymetrics.go): RelayedTicks, RelayDuplicates and
	// RelayFailures, labelled relay and queue.
	relayVecs

	// fleet holds the totals a job of each preference counts in.
	fleet map[Prefer]*tickCounters

	// reg is the Registerer NewMetrics registered on (nil: none), and
	// standby the scheduler_standby_seconds_total collector: a sharded
	// Scheduler swaps the lease series for its shards' (shard_metrics.go).
	reg     prometheus.Registerer
	standby prometheus.Collector
	sharded bool // shardSeries ran (under mu)

	mu           sync.Mutex
	standbyTotal time.Duration
	standbySince time.Time // zero while leading or stopped
	now          func() time.Time
}

// Label names. Prometheus reserves job and instance for the scrape target.
const (
	labelJob    = "job_name"
	labelPrefer = "prefer"
	// labelDeadline is start or finish.
	labelDeadline = "deadline"
)

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered, useful in tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	perJob := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help + " Per job, for the jobs with their own series."},
			append([]string{labelJob}, labels...))
	}
	const (
		enqueuedHelp  = "Ticks claimed and enqueued by this replica."
		duplicateHelp = "Claims the store refused because the tick was already claimed."
		fencedHelp    = "Claims the store refused because they came from a superseded leader (stale epoch)."
		missedHelp    = "Slots skipped: older than the grace (prefer missed) or beyond max_catchup (prefer duplicate)."
		catchupHelp   = "Missed slots fired late by catch-up."
		brokenHelp    = "Slots not claimed because state they depend on is damaged (their stream holds another type, their job's last-fired slot does not parse); each slot counted once."
		deliveryHelp  = "Claimed ticks that an external sink failed to accept."
		pausedHelp    = "Slots not enqueued because their job was paused (not counted as missed)."
	)
	m := &Metrics{
		LeadershipChanges: counter("scheduler_leadership_changes_total",
			"Times this replica became leader. Summed over replicas it counts leadership changes."),
		EnqueuedTicks:  counter("scheduler_ticks_enqueued_total", enqueuedHelp),
		DuplicateTicks: counter("scheduler_duplicate_ticks_total", duplicateHelp),
		FencedTicks:    counter("scheduler_fenced_ticks_total", fencedHelp),
		MissedTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_missed_ticks_total", Help: missedHelp + " By the jobs' preference.",
		}, []string{labelPrefer}),
		CatchupTicks:   counter("scheduler_catchup_ticks_total", catchupHelp),
		BrokenTicks:    counter("scheduler_broken_ticks_total", brokenHelp),
		PausedTicks:    counter("scheduler_paused_ticks_total", pausedHelp),
		DeliveryErrors: counter("scheduler_delivery_errors_total", deliveryHelp),

		JobEnqueuedTicks:  perJob("scheduler_job_ticks_enqueued_total", enqueuedHelp),
		JobDuplicateTicks: perJob("scheduler_job_duplicate_ticks_total", duplicateHelp),
		JobFencedTicks:    perJob("scheduler_job_fenced_ticks_total", fencedHelp),
		JobMissedTicks:    perJob("scheduler_job_missed_ticks_total", missedHelp+" Labelled with the job's preference.", labelPrefer),
		JobCatchupTicks:   perJob("scheduler_job_catchup_ticks_total", catchupHelp),
		JobBrokenTicks:    perJob("scheduler_job_broken_ticks_total", brokenHelp),
		JobPausedTicks:    perJob("scheduler_job_paused_ticks_total", pausedHelp),
		JobDeliveryErrors: perJob("scheduler_job_delivery_errors_total", deliveryHelp),
		JobLastFiredSlot: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scheduler_job_last_fired_slot_timestamp_seconds",
			Help: "Scheduled slot of the last tick this replica enqueued, Unix seconds. Per job, for the jobs with their own series.",
		}, []string{labelJob}),

		IsLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_is_leader",
			Help: "1 while this replica holds the lease and trusts it, else 0.",
		}),
		LeaseEpoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_lease_epoch",
			Help: "Epoch (fencing token) of the newest leadership term this replica has seen.",
		}),
		RenewalLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scheduler_renewal_latency_seconds",
			Help:    "Round-trip time of lease acquire and renew calls.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60},
		}),
		TickDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scheduler_tick_delay_seconds",
			Help:    "Store time at enqueue minus the tick's scheduled slot.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		StoreClockOffset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_store_clock_offset_seconds",
			Help: "Store clock minus this replica's clock, measured at each lease round trip.",
		}),
		LeaseTTL: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_lease_ttl_seconds",
			Help: "The configured lease TTL; alert rules compare renewal latency with a third of it.",
		}),
		BrokenJobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_broken_jobs",
			Help: "Jobs whose ticks the store refuses as broken right now (leader only); the log and `onetick status` name them.",
		}),
		StoreDamaged: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scheduler_store_damaged",
			Help: "1 while shared state this replica needs is damaged: state=election (lease or epoch), last_fired (the last-fired slots as a whole), history (auxiliary).",
		}, []string{"state"}),
		DeadlineMissed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_deadline_missed_total",
			Help: "Times a job turned late: a slot missed its start or finish deadline (leader only; the log names the job).",
		}, []string{labelDeadline}),
		JobDeadlineMissed: perJob("scheduler_job_deadline_missed_total",
			"Times the job turned late: a slot missed its start or finish deadline (leader only).", labelDeadline),
		LateJobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_late_jobs",
			Help: "Jobs whose newest judged slot missed a deadline (leader only; the log and the job page name them).",
		}),
		relayVecs: newRelayVecs(),
		now:       time.Now,
	}
	for _, k := range []string{DeadlineStart, DeadlineFinish} {
		m.DeadlineMissed.WithLabelValues(k)
	}
	for _, st := range []string{StateElection, StateClaim, StateHistory} {
		m.StoreDamaged.WithLabelValues(st).Set(0)
	}
	// Both preferences' series exist from the start, at zero, so that
	// increase() sees the first missed slot.
	m.fleet = map[Prefer]*tickCounters{}
	for _, p := range []Prefer{PreferMissed, PreferDuplicate} {
		m.fleet[p] = &tickCounters{enqueued: m.EnqueuedTicks, duplicate: m.DuplicateTicks, fenced: m.FencedTicks,
			missed: m.MissedTicks.WithLabelValues(string(p)), catchup: m.CatchupTicks, broken: m.BrokenTicks, paused: m.PausedTicks,
			delivery: m.DeliveryErrors}
	}
	standby := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "scheduler_standby_seconds_total",
		Help: "Seconds this replica spent running as a standby.",
	}, func() float64 { return m.standbySeconds() })
	m.reg, m.standby = reg, standby
	if reg != nil {
		for _, c := range append([]prometheus.Collector{
			m.LeadershipChanges, m.EnqueuedTicks, m.DuplicateTicks, m.FencedTicks, m.MissedTicks,
			m.CatchupTicks, m.BrokenTicks, m.PausedTicks, m.DeliveryErrors,
			m.JobEnqueuedTicks, m.JobDuplicateTicks, m.JobFencedTicks, m.JobMissedTicks,
			m.JobCatchupTicks, m.JobBrokenTicks, m.JobPausedTicks, m.JobDeliveryErrors, m.JobLastFiredSlot,
			m.IsLeader, m.LeaseEpoch, m.RenewalLatency, m.TickDelay, m.StoreClockOffset, m.LeaseTTL,
			standby, m.BrokenJobs, m.StoreDamaged, m.DeadlineMissed, m.JobDeadlineMissed, m.LateJobs,
		}, m.relayVecs.collectors()...) {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) standbySeconds() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.standbyTotal
	if !m.standbySince.IsZero() {
		d += m.now().Sub(m.standbySince)
	}
	return d.Seconds()
}

// setStandby starts or stops the standby-time accounting.
func (m *Metrics) setStandby(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if !m.standbySince.IsZero() {
		m.standbyTotal += now.Sub(m.standbySince)
		m.standbySince = time.Time{}
	}
	if on {
		m.standbySince = now
	}
}
