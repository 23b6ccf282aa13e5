package main

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func benchEnv(b *testing.B) *env {
	b.Helper()
	srv, err := startRedis()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = c.Close() })
	return &env{srv: srv, adm: admin{c: c}, ot: otLogs{c: &logCounter{}}}
}

func benchLease(b *testing.B, crash bool) {
	e := benchEnv(b)
	b.ResetTimer()
	ds, err := e.leaseRounds(context.Background(), b.N, time.Second, crash)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	ds = sortedCopy(ds)
	b.ReportMetric(float64(pct(ds, 50))/1e6, "p50-ms")
	b.ReportMetric(float64(pct(ds, 99))/1e6, "p99-ms")
	// ns/op includes starting each round's standby and letting it settle
	// (about 150 ms); the latency itself is p50-ms / p99-ms.
}

// BenchmarkHandover: onetick leader cancelled (it releases the lease) until
// a standby leads, TTL 1 s.
func BenchmarkHandover(b *testing.B) { benchLease(b, false) }

// BenchmarkTakeover: onetick leader stopped without releasing (a crash)
// until a standby leads, TTL 1 s.
func BenchmarkTakeover(b *testing.B) { benchLease(b, true) }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
