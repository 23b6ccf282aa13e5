package worker

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
)

// metrics are the worker's Prometheus series. Everything labelled per job
// goes through jobs(), which creates a job's series on first use and only
// for names the worker knows (registered jobs, plus one shared name for
// ticks of unregistered jobs), so the number of series is bounded by the
// registrations; making per-job series optional at very many jobs is a
// change to jobs() alone.
type metrics struct {
	runs      *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	reclaimed *prometheus.CounterVec
	inFlight  prometheus.Gauge
	waiting   prometheus.Gauge
	delay     prometheus.Histogram
	promoted  prometheus.Counter
	storeErrs *prometheus.CounterVec
	missed    *prometheus.CounterVec

	mu     sync.Mutex
	series map[string]*jobSeries
}

// unregisteredJob labels ticks of jobs with no handler.
const unregisteredJob = "_unregistered"

// ReasonOverlap is the reason label of worker_missed_ticks_total for a
// tick skipped because a run of its job was in flight.
const ReasonOverlap = "overlap"

// jobSeries are one job's series, looked up once.
type jobSeries struct {
	outcome   map[Outcome]prometheus.Counter
	duration  prometheus.Observer
	reclaimed prometheus.Counter
}

var allOutcomes = []Outcome{OutcomeSucceeded, OutcomeFailed, OutcomeRetried, OutcomeDead,
	OutcomeSkippedOverlap, OutcomeSkippedDone, OutcomeLost}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "worker_runs_total",
			Help: "Ticks this worker handled, by outcome. Handler runs end succeeded, failed or lost; a failed run is then also counted as retried or dead. Ticks dead-lettered without a run (delivery limit, no handler) count as dead; skipped_overlap and skipped_done did not run.",
		}, []string{"job_name", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "worker_run_duration_seconds",
			Help:    "Duration of handler runs.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"job_name"}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "worker_reclaimed_total",
			Help: "Entries this worker took over from a consumer that stopped heartbeating (died, stalled or gave them back at shutdown).",
		}, []string{"job_name"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "worker_runs_in_flight",
			Help: "Handlers running now.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "worker_runs_waiting",
			Help: "Ticks of overlap-queue jobs held while they wait for the previous run.",
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "worker_tick_delay_seconds",
			Help:    "Store time at the start of a tick's first attempt minus its slot.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		promoted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "worker_retries_promoted_total",
			Help: "Scheduled retries this worker moved back into their streams when they came due.",
		}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "worker_store_errors_total",
			Help: "Store calls that failed, by operation.",
		}, []string{"op"}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "worker_missed_ticks_total",
			Help: "Slots this worker skipped without running them, by the job's preference and the reason (overlap: a run of the job was in flight; takeover: a taken-over tick dropped rather than done twice, see Missed). A fleet total, summed with scheduler_missed_ticks_total by the missed-ticks alert.",
		}, []string{"prefer", "reason"}),
		series: map[string]*jobSeries{},
	}
	// Every series exists from the start, at zero, so that increase()
	// sees the first missed slot.
	for _, p := range []onetick.Prefer{onetick.PreferMissed, onetick.PreferDuplicate} {
		m.missed.WithLabelValues(string(p), ReasonOverlap)
	}
	m.missed.WithLabelValues(string(onetick.PreferMissed), ReasonTakeover)
	if reg != nil {
		for _, c := range []prometheus.Collector{m.runs, m.duration, m.reclaimed, m.inFlight, m.waiting,
			m.delay, m.promoted, m.storeErrs, m.missed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// job returns name's series, creating them (at zero, so that increase()
// sees the first event) on first use.
func (m *metrics) job(name string) *jobSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.series[name]; ok {
		return s
	}
	s := &jobSeries{outcome: make(map[Outcome]prometheus.Counter, len(allOutcomes)),
		duration: m.duration.WithLabelValues(name), reclaimed: m.reclaimed.WithLabelValues(name)}
	for _, o := range allOutcomes {
		s.outcome[o] = m.runs.WithLabelValues(name, string(o))
	}
	m.series[name] = s
	return s
}

func (s *jobSeries) count(o Outcome) { s.outcome[o].Inc() }

// missedTicks is the fleet-total counter of slots skipped for reason by
// jobs that prefer p.
func (m *metrics) missedTicks(p onetick.Prefer, reason string) prometheus.Counter {
	return m.missed.WithLabelValues(string(p), reason)
}
