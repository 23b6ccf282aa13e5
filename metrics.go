package onetick

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's Prometheus metrics. Create them with
// NewMetrics on a Registerer of the caller's choosing; a library never
// registers on the global registry by itself.
type Metrics struct {
	LeadershipChanges prometheus.Counter
	DuplicateTicks    *prometheus.CounterVec
	FencedTicks       *prometheus.CounterVec
	MissedTicks       *prometheus.CounterVec
	CatchupTicks      *prometheus.CounterVec
	EnqueuedTicks     *prometheus.CounterVec
	DeliveryErrors    *prometheus.CounterVec
	IsLeader          prometheus.Gauge
	LeaseEpoch        prometheus.Gauge
	RenewalLatency    prometheus.Histogram
	TickDelay         prometheus.Histogram
	LastFiredSlot     *prometheus.GaugeVec
	StoreClockOffset  prometheus.Gauge
	LeaseTTL          prometheus.Gauge
	JobInfo           *prometheus.GaugeVec
	BrokenTicks       *prometheus.CounterVec
	PausedTicks       *prometheus.CounterVec
	BrokenJobs        prometheus.Gauge
	StoreDamaged      *prometheus.GaugeVec

	mu           sync.Mutex
	standbyTotal time.Duration
	standbySince time.Time // zero while leading or stopped
	now          func() time.Time
}

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered, useful in tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		LeadershipChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_leadership_changes_total",
			Help: "Times this replica became leader. Summed over replicas it counts leadership changes.",
		}),
		DuplicateTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_duplicate_ticks_total",
			Help: "Claims the store refused because the tick was already claimed.",
		}, []string{"job"}),
		FencedTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_fenced_ticks_total",
			Help: "Claims the store refused because they came from a superseded leader (stale epoch).",
		}, []string{"job"}),
		MissedTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_missed_ticks_total",
			Help: "Slots skipped: older than the grace (prefer missed) or beyond max_catchup (prefer duplicate).",
		}, []string{"job"}),
		CatchupTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_catchup_ticks_total",
			Help: "Missed slots fired late by catch-up.",
		}, []string{"job"}),
		EnqueuedTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_ticks_enqueued_total",
			Help: "Ticks claimed and enqueued by this replica.",
		}, []string{"job"}),
		DeliveryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_delivery_errors_total",
			Help: "Claimed ticks that an external sink failed to accept.",
		}, []string{"job"}),
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
		LastFiredSlot: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scheduler_last_fired_slot_timestamp_seconds",
			Help: "Scheduled slot of the last tick this replica enqueued, Unix seconds.",
		}, []string{"job"}),
		StoreClockOffset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_store_clock_offset_seconds",
			Help: "Store clock minus this replica's clock, measured at each lease round trip.",
		}),
		LeaseTTL: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_lease_ttl_seconds",
			Help: "The configured lease TTL; alert rules compare renewal latency with a third of it.",
		}),
		JobInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scheduler_job_info",
			Help: "Always 1; labels each job with its preference, so alerts can select jobs that prefer missed.",
		}, []string{"job", "prefer"}),
		BrokenTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_broken_ticks_total",
			Help: "Slots not claimed because state they depend on is damaged (their stream holds another type, their job's last-fired slot does not parse); each slot counted once.",
		}, []string{"job"}),
		PausedTicks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_paused_ticks_total",
			Help: "Slots not enqueued because their job was paused (not counted as missed).",
		}, []string{"job"}),
		BrokenJobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_broken_jobs",
			Help: "Jobs whose ticks the store refuses as broken right now (leader only); the log and `onetick status` name them.",
		}),
		StoreDamaged: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "scheduler_store_damaged",
			Help: "1 while shared state this replica needs is damaged: state=election (lease or epoch), claim (what every claim reads as a whole: the last-fired slots, the pause controls), history (auxiliary).",
		}, []string{"state"}),
		now: time.Now,
	}
	for _, st := range []string{StateElection, StateClaim, StateHistory} {
		m.StoreDamaged.WithLabelValues(st).Set(0)
	}
	standby := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "scheduler_standby_seconds_total",
		Help: "Seconds this replica spent running as a standby.",
	}, func() float64 { return m.standbySeconds() })
	if reg != nil {
		for _, c := range []prometheus.Collector{
			m.LeadershipChanges, m.DuplicateTicks, m.FencedTicks, m.MissedTicks,
			m.CatchupTicks, m.EnqueuedTicks, m.DeliveryErrors, m.IsLeader, m.LeaseEpoch,
			m.RenewalLatency, m.TickDelay, m.LastFiredSlot, m.StoreClockOffset, m.LeaseTTL, m.JobInfo, standby,
			m.BrokenTicks, m.PausedTicks, m.BrokenJobs, m.StoreDamaged,
		} {
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
