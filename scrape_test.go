package onetick_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// scrapeFleet builds a scheduler with n jobs on a registry like the
// daemon's (the Go and process collectors too) and returns its /metrics
// handler and the Go heap onetick.New retained per job.
func scrapeFleet(tb testing.TB, n int, edit func(*onetick.Config)) (http.Handler, float64) {
	tb.Helper()
	sched, err := cron.Parse("@every 1m", nil)
	if err != nil {
		tb.Fatal(err)
	}
	jobs := make([]onetick.Job, n)
	for i := range jobs {
		jobs[i] = onetick.Job{Name: fmt.Sprintf("job-%06d", i), Schedule: sched}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := onetick.Config{Backend: memory.New(memory.Options{}), Jobs: jobs, Registerer: reg}
	if edit != nil {
		edit(&cfg)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := onetick.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}

// scrape fetches the text exposition, gzipped or not, as Prometheus does.
func scrape(tb testing.TB, h http.Handler, gzip bool) *bytes.Buffer {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body
}

// BenchmarkScrape reports the size of one scrape of /metrics (text format:
// bytes, lines, and bytes gzipped) with the series as they are after
// start, job names of 10 bytes, one schedule for all: with the default
// choice of per-job series and with every job's; and the Go heap
// onetick.New retains per job (job state and series). `make bench` runs it;
// the README quotes it.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{2000, 100000} {
		for _, mode := range []onetick.JobMetricsMode{onetick.JobMetricsAuto, onetick.JobMetricsAll} {
			b.Run(fmt.Sprintf("jobs=%d/per_job=%s", n, mode), func(b *testing.B) {
				h, heap := scrapeFleet(b, n, func(c *onetick.Config) { c.JobMetrics.Mode = mode })
				body := scrape(b, h, false)
				zipped := scrape(b, h, true)
				for b.Loop() {
					scrape(b, h, false)
				}
				b.ReportMetric(float64(body.Len()), "scrape-bytes")
				b.ReportMetric(float64(bytes.Count(body.Bytes(), []byte("\n"))), "scrape-lines")
				b.ReportMetric(float64(zipped.Len()), "scrape-gzip-bytes")
				b.ReportMetric(heap, "heap-bytes/job")
			})
		}
	}
}

// With the default choice the scrape does not grow with the number of jobs
// beyond the limit: the per-job series go, the fleet totals stay.
func TestScrapeBoundedByDefault(t *testing.T) {
	lines := func(n int) (total, perJob int) {
		h, _ := scrapeFleet(t, n, nil)
		body := scrape(t, h, false).String()
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "scheduler_job_ticks_enqueued_total{") {
				perJob++
			}
		}
		return strings.Count(body, "\n"), perJob
	}
	atLimit, perJob := lines(onetick.DefaultJobMetricsLimit)
	if perJob != onetick.DefaultJobMetricsLimit {
		t.Fatalf("%d jobs (the limit): %d have their own series, want all", onetick.DefaultJobMetricsLimit, perJob)
	}
	over, perJobOver := lines(onetick.DefaultJobMetricsLimit + 1)
	many, perJobMany := lines(3 * onetick.DefaultJobMetricsLimit)
	if perJobOver != 0 || perJobMany != 0 {
		t.Fatalf("beyond the limit %d and %d jobs have their own series, want none", perJobOver, perJobMany)
	}
	if over != many || over >= atLimit/10 {
		t.Fatalf("scrape of %d lines at the limit, %d one job beyond, %d at 3× the limit: want the last two equal and small",
			atLimit, over, many)
	}
	t.Logf("scrape lines: %d at %d jobs, %d at %d jobs, %d at %d jobs", atLimit, onetick.DefaultJobMetricsLimit,
		over, onetick.DefaultJobMetricsLimit+1, many, 3*onetick.DefaultJobMetricsLimit)
}
