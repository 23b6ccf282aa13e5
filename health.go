package onetick

import (
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// The kinds of shared state whose damage stops this replica's part of the
// work: "election" (the lease or the epoch: nobody can acquire), and
// "claim" (what every claim reads as a whole: the last-fired slots, the
// pause controls; the leader cannot claim).
// "history" is auxiliary: its damage is reported, never blocking.
const (
	StateElection = "election"
	StateClaim    = "claim"
	StateHistory  = "history"
)

// Problem is damaged store state that this replica ran into and that has
// not been seen repaired yet.
type Problem struct {
	State string       `json:"state"`
	Since time.Time    `json:"since"`
	Error *DamageError `json:"damage"`
	// Blocking is true when the damage stops this replica's part of the
	// work (election, claim), false for auxiliary state (history).
	Blocking bool `json:"blocking"`
}

// health remembers the damage a replica ran into, logs each change of it
// once (not at every retry), and keeps scheduler_store_damaged current.
type health struct {
	mu       sync.Mutex
	log      *slog.Logger
	metrics  *Metrics
	now      func() time.Time
	problems map[string]Problem
}

func newHealth(log *slog.Logger, m *Metrics, now func() time.Time) *health {
	return &health{log: log, metrics: m, now: now, problems: map[string]Problem{}}
}

// set records that state is damaged as d says.
func (h *health) set(state string, d *DamageError) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, had := h.problems[state]
	if had && old.Error.Key == d.Key && old.Error.Field == d.Field && old.Error.Reason == d.Reason {
		return
	}
	blocking := state != StateHistory
	h.problems[state] = Problem{State: state, Since: h.now(), Error: d, Blocking: blocking}
	h.metrics.StoreDamaged.WithLabelValues(state).Set(1)
	attrs := []any{"state", state, "key", d.Key, "reason", d.Reason}
	if d.Field != "" {
		attrs = append(attrs, "field", d.Field)
	}
	if blocking {
		h.log.Error("store state damaged: onetick will not guess around it; see `onetick status` and `onetick repair`", attrs...)
	} else {
		h.log.Warn("store state damaged (auxiliary, skipped); see `onetick repair`", attrs...)
	}
}

// clear records that state is usable again.
func (h *health) clear(state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, had := h.problems[state]
	if !had {
		return
	}
	delete(h.problems, state)
	h.metrics.StoreDamaged.WithLabelValues(state).Set(0)
	h.log.Info("store state usable again", "state", state, "key", old.Error.Key, "damaged_for", h.now().Sub(old.Since).Round(time.Millisecond))
}

// observe sets or clears state from err: set for a *DamageError, clear
// for success (nil); other errors say nothing about damage.
func (h *health) observe(state string, err error) {
	var d *DamageError
	switch {
	case err == nil:
		h.clear(state)
	case errors.As(err, &d):
		h.set(state, d)
	}
}

func (h *health) list() []Problem {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Problem, 0, len(h.problems))
	for _, p := range h.problems {
		out = append(out, p)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].State < out[k].State })
	return out
}
