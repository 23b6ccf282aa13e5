package natsrelay

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
)

// Metrics counts the relay consumer's publishes, by relay (here "nats").
type Metrics struct {
	published, duplicates, failures, dropped prometheus.Counter
}

// NewMetrics registers the relay counters with reg (nil: a private
// registry): worker_relay_published_total, worker_relay_duplicates_total
// (a duplicate ack, or the per-subject refusal), worker_relay_failures_total
// (a publish that failed; the worker retries it) and
// worker_relay_dropped_total (taken-over entries of jobs that prefer
// missed, not published again).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"relay"})
	}
	vs := []*prometheus.CounterVec{
		vec("worker_relay_published_total", "Ticks the worker's relay consumer published to the relay."),
		vec("worker_relay_duplicates_total", "Ticks the relay answered were already there (a duplicate ack, or a per-subject refusal): counted as published."),
		vec("worker_relay_failures_total", "Publishes to the relay that failed (the tick is retried by the worker)."),
		vec("worker_relay_dropped_total", "Taken-over ticks of jobs that prefer missed, not published again (the consumer that died may have published them)."),
	}
	if reg != nil {
		for _, v := range vs {
			if err := reg.Register(v); err != nil {
				return nil, err
			}
		}
	}
	l := onetick.RelayNATS
	return &Metrics{published: vs[0].WithLabelValues(l), duplicates: vs[1].WithLabelValues(l),
		failures: vs[2].WithLabelValues(l), dropped: vs[3].WithLabelValues(l)}, nil
}

type outcome int

const (
	published outcome = iota
	duplicate
	failed
	dropped
)

// inc counts o; a nil m counts nothing.
func (m *Metrics) inc(o outcome) {
	if m == nil {
		return
	}
	[]prometheus.Counter{m.published, m.duplicates, m.failures, m.dropped}[o].Inc()
}
