package redis_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/worker"
	"github.com/onetick/onetick/worker/workertest"
)

// The conformance suite re-executes this test binary as worker processes;
// they learn their Redis from these variables.
const (
	envURL    = "ONETICK_WORKERTEST_REDIS_URL"
	envPrefix = "ONETICK_WORKERTEST_REDIS_PREFIX"
)

// init runs before TestMain, so that a worker process never runs tests.
func init() {
	workertest.RunChildIfAsked(func() (worker.Store, func()) {
		b, err := redis.Open(os.Getenv(envURL), redis.Options{Prefix: os.Getenv(envPrefix)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return b.WorkerStore(""), func() { _ = b.Close() }
	})
}

func TestWorkerConformance(t *testing.T) {
	workerConformance(t, redistest.Start(t), 0, 1)
}

// workerConformance runs the workers' suite on shard n of shards (0 of 1:
// the store itself).
func workerConformance(t *testing.T, srv *redistest.Server, n, shards int) {
	workertest.Exercise(t, workertest.Harness{New: func(t *testing.T) workertest.Env {
		if err := srv.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		open := func(t *testing.T) *redis.Backend {
			s, err := redis.Open(srv.URL(), redis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			v, err := s.Shard(n, shards)
			if err != nil {
				t.Fatal(err)
			}
			return v.(*redis.Backend)
		}
		b := open(t)
		return workertest.Env{
			Backend: b,
			Store:   func(t *testing.T) worker.Store { return open(t).WorkerStore("") },
			StoreOf: func(t *testing.T, group string) worker.Store { return open(t).WorkerStore(group) },
			Append: func(t *testing.T, stream string, r onetick.TickRecord) {
				err := b.Client().XAdd(context.Background(), &goredis.XAddArgs{Stream: stream, Values: []any{
					"job", r.Job, "slot", int64(r.Slot), "tick", r.Tick, "epoch", int64(r.Epoch),
					"replica", r.Replica, "payload", r.Payload}}).Err()
				if err != nil {
					t.Fatal(err)
				}
			},
			Command: func(*testing.T) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envURL+"="+srv.URL(), envPrefix+"="+b.Prefix())
				return cmd
			},
		}
	}})
}

// claimOne enqueues one tick of job through the backend's claim.
func claimOne(t *testing.T, b *redis.Backend, job string, slot onetick.Slot) {
	t.Helper()
	ctx := context.Background()
	g, err := b.Acquire(ctx, "producer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Release(ctx, g.Lease) }()
	if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{{Job: job, Slot: slot, Stream: "onetick:stream:" + job,
		Payload: "{}", Retention: time.Minute}}); err != nil {
		t.Fatal(err)
	}
}

// Consumers that own nothing are pruned from the group; the ones that own
// pending entries stay, and a pruned one that reads again is recreated.
func TestWorkerPruneConsumers(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b, err := redis.Open(srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := b.WorkerStore("")
	streams := []string{"onetick:stream:p"}
	base := onetick.SlotOf(time.Now().Add(-time.Hour))
	claimOne(t, b, "p", base)
	claimOne(t, b, "p", base+1000)
	da, err := s.Fetch(ctx, "a", streams, 1, time.Second)
	if err != nil || len(da) != 1 {
		t.Fatal(da, err)
	}
	if db, err := s.Fetch(ctx, "b", streams, 1, time.Second); err != nil || len(db) != 1 {
		t.Fatal(db, err)
	}
	if _, err := s.Begin(ctx, "a", time.Minute, []worker.Start{{D: da[0], Overlap: worker.OverlapAllow}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, "a", []worker.Finish{{D: da[0], Kind: worker.FinishDone, Retention: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneConsumers(ctx, streams, 0)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1 (a, which owns nothing)", n, err)
	}
	cs, err := b.Client().XInfoConsumers(ctx, streams[0], "onetick").Result()
	if err != nil || len(cs) != 1 || cs[0].Name != "b" || cs[0].Pending != 1 {
		t.Fatalf("consumers %+v, %v: want b with its pending entry", cs, err)
	}
	claimOne(t, b, "p", base+2000)
	if again, err := s.Fetch(ctx, "a", streams, 1, time.Second); err != nil || len(again) != 1 {
		t.Fatalf("a pruned consumer reading again: %v, %v", again, err)
	}
}

// A blocked fetch returns as soon as its context is cancelled.
func TestWorkerFetchUnblocks(t *testing.T) {
	srv := redistest.Start(t)
	b, err := redis.Open(srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := b.WorkerStore("").Fetch(ctx, "a", []string{"onetick:stream:idle"}, 1, time.Minute)
		done <- err
	}()
	// Cancel once the fetch is blocked in its read (a client blocked in
	// XREAD shows in CLIENT LIST).
	for {
		list, err := b.Client().ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(list, "cmd=xread") {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the fetch never blocked")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("fetch returned %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("fetch still blocked %s after its context was cancelled", time.Since(start))
	}
}

// BenchmarkWorkerThroughput runs one worker with a no-op handler over
// ticks claimed beforehand and reports ticks/s: each tick is fetched,
// admitted, run and settled (done record and acknowledgement), with the
// run ledger kept (its events appended to the log, the fold left to
// later) and off.
func BenchmarkWorkerThroughput(b *testing.B) {
	srv := redistest.Start(b)
	for _, off := range []bool{false, true} {
		name := "ledger=on"
		if off {
			name = "ledger=off"
		}
		b.Run(name, func(b *testing.B) {
			if err := srv.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			benchWorker(b, srv, onetick.LedgerRetention{Off: off})
		})
	}
}

func benchWorker(b *testing.B, srv *redistest.Server, ledger onetick.LedgerRetention) {
	ctx := context.Background()
	be, err := redis.Open(srv.URL(), redis.Options{Ledger: ledger})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	const job = "bench"
	g, err := be.Acquire(ctx, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	base := onetick.SlotOf(time.Now().Add(-time.Hour)) - onetick.Slot(b.N)
	for lo := 0; lo < b.N; lo += 1000 {
		ticks := make([]onetick.Tick, 0, 1000)
		for i := lo; i < min(lo+1000, b.N); i++ {
			ticks = append(ticks, onetick.Tick{Job: job, Slot: base + onetick.Slot(i), Stream: "onetick:stream:" + job,
				Payload: "{}", Retention: time.Minute})
		}
		if _, err := be.Claim(ctx, g.Lease, ticks); err != nil {
			b.Fatal(err)
		}
	}
	w, err := worker.New(worker.Config{Store: be.WorkerStore(""), Concurrency: 32, Logger: discard()})
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	all := make(chan struct{})
	if err := w.HandleFunc(job, func(context.Context, *worker.Task) error {
		if n.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	}, worker.WithOverlap(worker.OverlapAllow)); err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	go func() { defer close(done); _ = w.Run(rctx) }()
	<-all
	cancel()
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ticks/s")
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
