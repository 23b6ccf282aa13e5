package onetick

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A fleet of run-time jobs is as large as it is, whatever the file holds:
// beyond the per-job limit its jobs get no series of their own (a million
// stored jobs with eight series each would take gigabytes).
func TestRunTimeJobsCountTowardsTheMetricsLimit(t *testing.T) {
	for _, tc := range []struct {
		limit int
		own   bool
	}{{limit: 2, own: false}, {limit: 3, own: true}} {
		s, err := New(Config{Backend: nopBackend{}, Registerer: prometheus.NewRegistry(),
			Jobs:       []Job{{Name: "file", Schedule: &everySecond{}}},
			JobMetrics: JobMetrics{Limit: tc.limit}})
		if err != nil {
			t.Fatal(err)
		}
		var jobs []Job
		for i := range 2 {
			jobs = append(jobs, Job{Name: "dyn" + strconv.Itoa(i), Schedule: &everySecond{}, Since: time.Unix(1, 0)})
		}
		s.dyn = map[string]*jobState{}
		add, _ := s.diffJobs(jobs, 1, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if len(add) != 2 {
			t.Fatalf("%d added", len(add))
		}
		for _, j := range add {
			if got := j.metrics.own != nil; got != tc.own {
				t.Fatalf("limit %d: %s has own series %v, want %v", tc.limit, j.Name, got, tc.own)
			}
		}
	}
}

// nopBackend is a Backend for tests that never reach the store.
type nopBackend struct{ Backend }
