package onetick_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

func TestMetricsLintAndNames(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	sched, _ := cron.Parse("@every 1s", nil)
	s, err := onetick.New(onetick.Config{Backend: memory.New(memory.Options{}), Registerer: reg,
		Jobs: []onetick.Job{{Name: "billing", Schedule: sched}}})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Metrics()
	m.RenewalLatency.Observe(0.01)
	m.TickDelay.Observe(0.01)
	m.LastFiredSlot.WithLabelValues("billing").Set(1)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	// The names the shipped alert rules and the README rely on.
	for _, name := range []string{
		"scheduler_leadership_changes_total", "scheduler_duplicate_ticks_total", "scheduler_fenced_ticks_total",
		"scheduler_missed_ticks_total", "scheduler_catchup_ticks_total", "scheduler_ticks_enqueued_total",
		"scheduler_standby_seconds_total", "scheduler_is_leader", "scheduler_lease_epoch",
		"scheduler_renewal_latency_seconds", "scheduler_tick_delay_seconds",
		"scheduler_last_fired_slot_timestamp_seconds", "scheduler_store_clock_offset_seconds",
		"scheduler_lease_ttl_seconds", "scheduler_job_info",
	} {
		if !have[name] {
			t.Errorf("metric %s is not exported", name)
		}
	}
	if got := testutil.ToFloat64(m.DuplicateTicks.WithLabelValues("billing")); got != 0 {
		t.Errorf("duplicate counter starts at %v", got)
	}
	if got := testutil.ToFloat64(m.LeaseTTL); got != 15 {
		t.Errorf("lease ttl gauge %v, want 15", got)
	}
	// A second scheduler on the same registry is refused, not silently merged.
	if _, err := onetick.New(onetick.Config{Backend: memory.New(memory.Options{}), Registerer: reg}); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}
