package onetick_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
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
// handler.
func scrapeFleet(tb testing.TB, n int, edit func(*onetick.Config)) http.Handler {
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
	if _, err := onetick.New(cfg); err != nil {
		tb.Fatal(err)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
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
// start, job names of 10 bytes, one schedule for all. `make bench` runs
// it; the README quotes it.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{2000, 100000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			h := scrapeFleet(b, n, nil)
			body := scrape(b, h, false)
			zipped := scrape(b, h, true)
			for b.Loop() {
				scrape(b, h, false)
			}
			b.ReportMetric(float64(body.Len()), "scrape-bytes")
			b.ReportMetric(float64(bytes.Count(body.Bytes(), []byte("\n"))), "scrape-lines")
			b.ReportMetric(float64(zipped.Len()), "scrape-gzip-bytes")
		})
	}
}
