package onetick_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// lintedScheduler builds a scheduler with one job on a pedantic registry,
// with every kind of series onetick exports present.
func lintedScheduler(t *testing.T) (*prometheus.Registry, *onetick.Metrics) {
	t.Helper()
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
	m.JobDeliveryErrors.WithLabelValues("billing").Inc()
	m.JobDeadlineMissed.WithLabelValues("billing", onetick.DeadlineStart) // a job with a deadline has them
	for _, v := range []*prometheus.CounterVec{m.RelayedTicks, m.RelayDuplicates, m.RelayFailures} {
		v.WithLabelValues(onetick.RelayAsynq, onetick.DefaultRelayQueue) // a relayed job has them
	}
	return reg, m
}

func TestMetricsLint(t *testing.T) {
	reg, _ := lintedScheduler(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// Prometheus attaches job and instance to every series it scrapes: a
// metric with a label of either name would clash with them unless the
// scrape set honor_labels.
func TestMetricsNoReservedLabels(t *testing.T) {
	reg, _ := lintedScheduler(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	perJob := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "job", "instance":
					t.Errorf("%s has a label named %q", mf.GetName(), l.GetName())
				case "job_name":
					perJob++
					if !strings.HasPrefix(mf.GetName(), "scheduler_job_") {
						t.Errorf("%s is labelled job_name but not named scheduler_job_*", mf.GetName())
					}
				}
			}
		}
	}
	if perJob < 8 {
		t.Errorf("%d series labelled job_name, want the job's 8", perJob)
	}
}

func TestMetricsNames(t *testing.T) {
	reg, m := lintedScheduler(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	// The names the shipped alert rules, the dashboard and the README rely on.
	for _, name := range []string{
		"scheduler_leadership_changes_total", "scheduler_duplicate_ticks_total", "scheduler_fenced_ticks_total",
		"scheduler_missed_ticks_total", "scheduler_catchup_ticks_total", "scheduler_ticks_enqueued_total",
		"scheduler_broken_ticks_total", "scheduler_paused_ticks_total", "scheduler_delivery_errors_total",
		"scheduler_standby_seconds_total", "scheduler_is_leader", "scheduler_lease_epoch",
		"scheduler_renewal_latency_seconds", "scheduler_tick_delay_seconds",
		"scheduler_store_clock_offset_seconds", "scheduler_lease_ttl_seconds",
		"scheduler_broken_jobs", "scheduler_store_damaged",
		"scheduler_job_ticks_enqueued_total", "scheduler_job_duplicate_ticks_total", "scheduler_job_fenced_ticks_total",
		"scheduler_job_missed_ticks_total", "scheduler_job_catchup_ticks_total", "scheduler_job_broken_ticks_total",
		"scheduler_job_delivery_errors_total", "scheduler_job_last_fired_slot_timestamp_seconds",
		"scheduler_job_paused_ticks_total",
		"scheduler_relayed_ticks_total", "scheduler_relay_duplicates_total", "scheduler_relay_failures_total",
	} {
		if !have[name] {
			t.Errorf("metric %s is not exported", name)
		}
	}
	// Both preferences' missed totals exist from the start, so that
	// increase() sees the first missed slot.
	if n := testutil.CollectAndCount(m.MissedTicks); n != 2 {
		t.Errorf("scheduler_missed_ticks_total has %d series, want one per preference", n)
	}
	if got := testutil.ToFloat64(m.LeaseTTL); got != 15 {
		t.Errorf("lease ttl gauge %v, want 15", got)
	}
	// A second scheduler on the same registry is refused, not silently merged.
	if _, err := onetick.New(onetick.Config{Backend: memory.New(memory.Options{}), Registerer: reg}); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}

// jobsWithSeries lists the jobs that have their own series, checking that
// each has all of them (the delivery errors' series excepted: it appears
// with the first error).
func jobsWithSeries(t *testing.T, reg prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	families := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "scheduler_job_") || mf.GetName() == "scheduler_job_delivery_errors_total" {
			continue
		}
		families++
		var these []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job_name" {
					these = append(these, l.GetValue())
				}
			}
		}
		slices.Sort(these)
		if families > 1 && !slices.Equal(names, these) {
			t.Fatalf("%s: series for %v, other per-job metrics for %v", mf.GetName(), these, names)
		}
		names = these
	}
	if names != nil && families != 8 {
		t.Fatalf("%d per-job metrics have series, want 8", families)
	}
	return names
}

func TestJobMetricsSelection(t *testing.T) {
	sched, _ := cron.Parse("@every 1s", nil)
	jobs := func(names ...string) []onetick.Job {
		out := make([]onetick.Job, len(names))
		for i, n := range names {
			out[i] = onetick.Job{Name: n, Schedule: sched}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		jobs []onetick.Job
		jm   onetick.JobMetrics
		want []string
		log  string // part of the start's log line ("": none)
	}{
		{"default, few jobs", jobs("a", "b"), onetick.JobMetrics{}, []string{"a", "b"}, ""},
		{"auto at the limit", jobs("a", "b", "c"), onetick.JobMetrics{Limit: 3}, []string{"a", "b", "c"}, ""},
		{"auto beyond the limit", jobs("a", "b", "c", "d"), onetick.JobMetrics{Limit: 3, Jobs: []string{"c"}}, []string{"c"},
			"more jobs than metrics.per_job_limit"},
		{"auto beyond the limit, none listed", jobs("a", "b"), onetick.JobMetrics{Mode: onetick.JobMetricsAuto, Limit: 1}, nil,
			"per_job_limit=1"},
		{"all beyond the limit", jobs("a", "b", "c"), onetick.JobMetrics{Mode: onetick.JobMetricsAll, Limit: 1}, []string{"a", "b", "c"}, ""},
		{"listed", jobs("a", "b", "c"), onetick.JobMetrics{Mode: onetick.JobMetricsListed, Jobs: []string{"b", "a"}}, []string{"a", "b"},
			"per_job: listed"},
		{"none", jobs("a", "b"), onetick.JobMetrics{Mode: onetick.JobMetricsNone}, nil, "per_job: none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			reg := prometheus.NewPedanticRegistry()
			_, err := onetick.New(onetick.Config{Backend: memory.New(memory.Options{}), Jobs: tc.jobs, JobMetrics: tc.jm,
				Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if got := jobsWithSeries(t, reg); !slices.Equal(got, tc.want) {
				t.Errorf("jobs with their own series %v, want %v", got, tc.want)
			}
			if tc.log == "" && logs.Len() > 0 {
				t.Errorf("logged %q with every job exported", logs.String())
			}
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q does not say %q", logs.String(), tc.log)
			}
		})
	}
}

func TestJobMetricsValidate(t *testing.T) {
	sched, _ := cron.Parse("@every 1s", nil)
	for _, tc := range []struct {
		jm    onetick.JobMetrics
		field string
	}{
		{onetick.JobMetrics{Mode: "some"}, "metrics.per_job"},
		{onetick.JobMetrics{Limit: -1}, "metrics.per_job_limit"},
		{onetick.JobMetrics{Jobs: []string{"a", "nope"}}, "metrics.jobs[1]"},
		{onetick.JobMetrics{Mode: onetick.JobMetricsListed, Jobs: []string{"a", "a"}}, "metrics.jobs[1]"},
		{onetick.JobMetrics{Mode: onetick.JobMetricsAll, Jobs: []string{"a"}}, "metrics.jobs"},
		{onetick.JobMetrics{Mode: onetick.JobMetricsNone, Jobs: []string{"a"}}, "metrics.jobs"},
	} {
		cfg := onetick.Config{Backend: memory.New(memory.Options{}), JobMetrics: tc.jm,
			Jobs: []onetick.Job{{Name: "a", Schedule: sched}}}
		var ce *onetick.ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: error %v, want one naming %s", tc.jm, err, tc.field)
		}
	}
}

// A job without its own series is still counted in the fleet totals, and
// nothing creates series for it later (not even a failed delivery).
func TestFleetTotalsCountEveryJob(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(start)
	mem := memory.New(memory.Options{Clock: fc})
	sched, _ := cron.Parse("@every 1s", nil)
	delivered := make(chan int, 10)
	reg := prometheus.NewPedanticRegistry()
	s, err := onetick.New(onetick.Config{Backend: mem, Replica: "r", Clock: fc, Registerer: reg,
		Jobs:       []onetick.Job{{Name: "a", Schedule: sched}, {Name: "b", Schedule: sched}, {Name: "c", Schedule: sched}},
		JobMetrics: onetick.JobMetrics{Mode: onetick.JobMetricsListed, Jobs: []string{"a"}},
		Sink: onetick.SinkFunc(func(_ context.Context, ticks []onetick.TickRecord) error {
			delivered <- len(ticks)
			return errors.New("sink down")
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, s)
	block(t, fc, 3) // renew, trust deadline, the wait for the slot at +1s
	fc.Advance(time.Second)
	if n := <-delivered; n != 3 {
		t.Fatalf("delivered %d ticks, want one per job", n)
	}
	block(t, fc, 3) // the firing loop accounted for the slot and waits for the next
	m := s.Metrics()
	if got := testutil.ToFloat64(m.EnqueuedTicks); got != 3 {
		t.Errorf("fleet total of enqueued ticks %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.DeliveryErrors); got != 3 {
		t.Errorf("fleet total of delivery errors %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.JobEnqueuedTicks.WithLabelValues("a")); got != 1 {
		t.Errorf("a's enqueued ticks %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.JobLastFiredSlot.WithLabelValues("a")); got != float64(start.Unix()+1) {
		t.Errorf("a's last fired slot %v, want %d", got, start.Unix()+1)
	}
	if got := testutil.CollectAndCount(m.JobDeliveryErrors); got != 1 {
		t.Errorf("%d per-job delivery-error series, want a's only", got)
	}
	if got := jobsWithSeries(t, reg); !slices.Equal(got, []string{"a"}) {
		t.Errorf("jobs with their own series %v, want [a]", got)
	}
}

// The README's metrics tables list exactly the metrics onetick exports,
// with their labels.
func TestREADMEMetricsTable(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(scheduler_[a-z_]+)(?:\\{([a-z_,]+)\\})?` \\|")
	listed := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		listed[m[1]] = m[2]
	}
	reg, _ := lintedScheduler(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		want := strings.Join(labels, ",")
		got, ok := listed[mf.GetName()]
		switch {
		case !ok:
			t.Errorf("README: no row for %s", mf.GetName())
		case got != want:
			t.Errorf("README: %s{%s}, exported with labels {%s}", mf.GetName(), got, want)
		}
		delete(listed, mf.GetName())
	}
	// With shards a scheduler exports the lease series per shard (the
	// README says so in the rows above) and a few of its own.
	sreg := prometheus.NewPedanticRegistry()
	sched, _ := cron.Parse("@every 1s", nil)
	if _, err := onetick.New(onetick.Config{Backend: memory.New(memory.Options{}), Registerer: sreg, Shards: 2,
		Jobs: []onetick.Job{{Name: "billing", Schedule: sched}}}); err != nil {
		t.Fatal(err)
	}
	smfs, err := sreg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range smfs {
		if _, ok := listed[mf.GetName()]; ok {
			delete(listed, mf.GetName())
			continue
		}
		if !slices.ContainsFunc(mfs, func(o *dto.MetricFamily) bool { return o.GetName() == mf.GetName() }) {
			t.Errorf("README: no row for %s (exported with shards)", mf.GetName())
		}
	}
	for name := range listed {
		t.Errorf("README lists %s, which is not exported", name)
	}
}

// runUntilCleanup runs s until the test ends.
func runUntilCleanup(t *testing.T, s *onetick.Scheduler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
