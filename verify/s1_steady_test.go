//go:build verify

package verify

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// steadyDuration is ONETICK_VERIFY_STEADY, default 2m (`make soak`: 10m).
func steadyDuration(t *testing.T) time.Duration {
	v := os.Getenv("ONETICK_VERIFY_STEADY")
	if v == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("ONETICK_VERIFY_STEADY=%q: want a positive Go duration", v)
	}
	return d
}

// TestSteadyState: three replicas, nothing goes wrong. Exactly one leader
// at every sample, every slot fired once, no refused duplicate.
func TestSteadyState(t *testing.T) {
	const scenario = "1. steady state"
	Scenario(t, scenario)
	steadyState(t, scenario, NewFleet(t, scenario, StartRedis(t)), steadyDuration(t))
}

// steadyState is TestSteadyState's scenario on the fleet f, for dur.
func steadyState(t *testing.T, scenario string, f *Fleet, dur time.Duration) {
	first := f.Start("r1")
	f.Start("r2")
	f.Start("r3")
	leader := f.WaitLeader(2 * ttl)
	t.Logf("leader %s, running for %s", leader.Name, dur)

	samples, bad := 0, 0
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		next := time.Now().Add(time.Second)
		ls, err := f.Leaders()
		samples++
		switch {
		case err != nil:
			bad++
			t.Errorf("sample %d: %v", samples, err)
		case len(ls) != 1:
			bad++
			t.Errorf("sample %d: %d replicas report scheduler_is_leader 1: %v", samples, len(ls), names(ls))
		case ls[0] != leader:
			bad++
			t.Errorf("sample %d: leadership moved from %s to %s without a fault", samples, leader.Name, ls[0].Name)
			leader = ls[0]
		}
		time.Sleep(time.Until(next))
	}

	as := f.Snapshot()
	CheckInvariants(t, as, allJobs...)
	f.CheckMissedCounters(as)
	for _, r := range f.Live() {
		m := f.LastMetrics(r)
		for _, j := range allJobs {
			if v := m.Job("scheduler_job_duplicate_ticks_total", j); v != 0 {
				t.Errorf("%s: scheduler_job_duplicate_ticks_total{job_name=%q} = %v, want 0", r.Name, j, v)
			}
			if v := m.Job("scheduler_job_missed_ticks_total", j); v != 0 {
				t.Errorf("%s: scheduler_job_missed_ticks_total{job_name=%q} = %v, want 0", r.Name, j, v)
			}
		}
		if r != leader && m.Get("scheduler_leadership_changes_total") != 0 {
			t.Errorf("%s led at some point (leadership changes %v) although %s led throughout", r.Name,
				m.Get("scheduler_leadership_changes_total"), leader.Name)
		}
	}
	if leader != first {
		t.Logf("note: %s leads although %s started first", leader.Name, first.Name)
	}
	want := int(dur/interval) - 2
	for _, j := range allJobs {
		if n := len(as[j].Entries); n < want {
			t.Errorf("%s: %d entries in %s, want at least %d", j, n, dur, want)
		}
	}
	for _, r := range f.Live() {
		f.Stop(r)
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 1, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		Notes: []string{fmt.Sprintf("%s with 3 replicas; %d leader samples (one per second), %d with other than exactly one leader; %d entries of %s.",
			dur, samples, bad, len(as[jobDup].Entries), jobDup)}})
}
