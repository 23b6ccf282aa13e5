package onetick

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Relay metrics (issue 21): the ticks of relayed jobs, by relay kind and
// queue. A relayed tick that is claimed is handed to the other queue in
// the claim's own step, so relayed counts hand-offs; duplicates are the
// relayed ticks the store answered Duplicate (already claimed, or a task
// id the other queue holds); failures are the relayed ticks the store
// answered Broken (the other system's keys unwritable or damaged) and
// those in a claim or enqueue call that failed, each attempt counted.

// Relay metric labels.
const (
	labelRelay = "relay" // the relay's kind: asynq, river
	labelQueue = "queue" // its queue in the other system
)

type relayVecs struct {
	RelayedTicks    *prometheus.CounterVec
	RelayDuplicates *prometheus.CounterVec
	RelayFailures   *prometheus.CounterVec
}

func newRelayVecs() relayVecs {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help + " By relay kind and queue."},
			[]string{labelRelay, labelQueue})
	}
	return relayVecs{
		RelayedTicks: vec("scheduler_relayed_ticks_total",
			"Ticks of relayed jobs claimed (or triggered, backfilled) and so handed to the other queue in the same atomic step."),
		RelayDuplicates: vec("scheduler_relay_duplicates_total",
			"Ticks of relayed jobs the store answered Duplicate: already claimed, or a task id the other queue already holds."),
		RelayFailures: vec("scheduler_relay_failures_total",
			"Ticks of relayed jobs not handed over: answered Broken (the other queue's state unwritable or damaged) or in a claim call that failed; each attempt counted."),
	}
}

func (v relayVecs) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.RelayedTicks, v.RelayDuplicates, v.RelayFailures}
}

// relaySeries are the counters of one relay (kind and queue).
type relaySeries struct {
	relayed, duplicate, failure prometheus.Counter
}

// forRelay returns the counters of r, creating them at zero (so that
// increase() sees the first event); nil for a job without a relay.
func (m *Metrics) forRelay(r *Relay) *relaySeries {
	if r == nil {
		return nil
	}
	q := r.Queue
	if q == "" {
		q = DefaultRelayQueue
	}
	return &relaySeries{
		relayed:   m.RelayedTicks.WithLabelValues(r.Kind, q),
		duplicate: m.RelayDuplicates.WithLabelValues(r.Kind, q),
		failure:   m.RelayFailures.WithLabelValues(r.Kind, q),
	}
}

// outcome counts a relayed tick's outcome; nil-safe.
func (r *relaySeries) outcome(o Outcome) {
	if r == nil {
		return
	}
	switch o {
	case Claimed:
		r.relayed.Inc()
	case Duplicate:
		r.duplicate.Inc()
	case Broken:
		r.failure.Inc()
	}
}

// failed counts a relayed tick in a call that failed; nil-safe.
func (r *relaySeries) failed() {
	if r != nil {
		r.failure.Inc()
	}
}

// relayCallFailed counts the relayed ticks of a claim or enqueue call
// whose error leaves them not handed over (a fenced call writes nothing
// and is counted as fenced; a call not acknowledged by enough replicas
// was applied and is accounted for by its outcomes).
func relayCallFailed(err error) bool {
	return err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotReplicated)
}

// countRelayed counts the outcomes (or the failed call) of relayed ticks
// written by Ops; m nil: not counted.
func (m *Metrics) countRelayed(ticks []Tick, res ClaimResult, err error) {
	if m == nil {
		return
	}
	for i, t := range ticks {
		if t.Relay == nil {
			continue
		}
		r := m.forRelay(t.Relay)
		switch {
		case err != nil:
			if relayCallFailed(err) {
				r.failed()
			}
		case i < len(res.Outcomes):
			r.outcome(res.Outcomes[i])
		}
	}
}
