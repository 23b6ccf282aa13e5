package onetick_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/memory"
)

// With shards, each replica's one deadline watcher judges exactly the
// jobs of the shards it leads, from each shard's ledger: two replicas
// over four shards, jobs whose start deadline every slot misses (no
// worker runs them), and each job is judged late by the replica leading
// its shard and by no other.
func TestShardedDeadlines(t *testing.T) {
	const shards = 4
	const period = 200 * time.Millisecond
	mem := memory.New(memory.Options{})
	defer mem.Close()
	var jobs []onetick.Job
	for _, n := range shardtest.Names("dl", shards, 1) {
		jobs = append(jobs, onetick.Job{Name: n, Schedule: every(period), Deadline: onetick.Deadline{Start: 50 * time.Millisecond}})
	}
	log := slog.New(slog.NewTextHandler(tWriter{t}, nil))
	type replica struct {
		s    *onetick.Scheduler
		w    *onetick.DeadlineWatcher
		stop func() error
	}
	start := func(name string) replica {
		s, err := onetick.New(onetick.Config{
			Backend: mem, Replica: name, Jobs: jobs, Shards: shards,
			Sink:   onetick.SinkFunc(func(context.Context, []onetick.TickRecord) error { return nil }),
			Lease:  onetick.LeaseConfig{TTL: 3 * time.Second, Renew: 500 * time.Millisecond},
			Logger: log.With("test_replica", name), Registerer: prometheus.NewRegistry(),
		})
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.DeadlineWatcher(onetick.DeadlineConfig{Ledger: mem})
		if err != nil {
			t.Fatalf("a sharded scheduler's deadline watcher: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		return replica{s, w, sync.OnceValue(func() error { cancel(); return <-done })}
	}
	a, b := start("a"), start("b")
	defer func() { _ = a.stop(); _ = b.stop() }()

	late := func(r replica) []string {
		if err := r.w.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range r.w.DeadlineStates() {
			if st.Late {
				out = append(out, st.Job)
			}
		}
		slices.Sort(out)
		return out
	}
	want := func(r replica) []string {
		var out []string
		for _, j := range jobs {
			if slices.Contains(r.s.Balancer().Led(), onetick.ShardOf(j.Name, shards)) {
				out = append(out, j.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	// Await the split and each replica judging its own shards' jobs late:
	// under load a slot's deadline may take a few checks to pass.
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		la, lb := a.s.Balancer().Led(), b.s.Balancer().Led()
		ja, jb := late(a), late(b)
		if len(la) == 2 && len(lb) == 2 && slices.Equal(ja, want(a)) && slices.Equal(jb, want(b)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a leads %v and judged %v late (want %v); b leads %v and judged %v late (want %v)", la, ja, want(a), lb, jb, want(b))
		}
		<-poll.C
	}
	// b stops: a takes its shards, and judges every job.
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, j := range jobs {
		all = append(all, j.Name)
	}
	slices.Sort(all)
	deadline = time.Now().Add(60 * time.Second)
	for !slices.Equal(late(a), all) {
		if time.Now().After(deadline) {
			t.Fatalf("after b stopped, a leads %v and judged %v late, want every job %v", a.s.Balancer().Led(), late(a), all)
		}
		<-poll.C
	}
}
