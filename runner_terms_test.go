package onetick_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/memory"
)

// With several shards a replica holds a shard's per-job state only while
// it leads the shard: none before Run, none once its terms ended; in
// between every job fires from it, and a run-time job named as a
// configured one is refused in the sharded path as in the single one.
func TestShardStateOnlyWhileLeading(t *testing.T) {
	const shards = 3
	const period = 200 * time.Millisecond
	mem := memory.New(memory.Options{})
	defer mem.Close()
	var jobs, dyn []onetick.Job
	names := shardtest.Names("job", shards, 3)
	for _, n := range names {
		jobs = append(jobs, onetick.Job{Name: n, Schedule: every(period)})
	}
	for _, n := range shardtest.Names("dyn", shards, 1) {
		dyn = append(dyn, onetick.Job{Name: n, Schedule: every(period)})
		names = append(names, n)
	}
	// A run-time job with a configured job's name: ignored.
	dyn = append(dyn, onetick.Job{Name: jobs[0].Name, Schedule: every(period), Payload: `{"clash":true}`})
	fired := &firings{ticks: map[string][]onetick.TickRecord{}, changed: make(chan struct{}, 1)}
	s, err := onetick.New(onetick.Config{
		Backend: mem, Replica: "a", Jobs: jobs, Source: staticSource(dyn), Shards: shards, Sink: fired.sink(),
		Lease:  onetick.LeaseConfig{TTL: 3 * time.Second, Renew: 500 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil)), Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	held, defs := s.JobStatesHeld()
	total := 0
	for i := range shards {
		if held[i] != 0 {
			t.Errorf("before Run: shard %d holds %d jobs' state", i, held[i])
		}
		total += defs[i]
		if defs[i] != 3 {
			t.Errorf("shard %d has %d configured jobs, want 3", i, defs[i])
		}
	}
	if total != len(jobs) {
		t.Errorf("the shards have %d configured jobs, want %d", total, len(jobs))
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	fired.await(t, "every job fired twice", func() bool {
		for _, n := range names {
			if fired.count(n, "", 0) < 2 {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	held, _ = s.JobStatesHeld()
	for i := range shards {
		if held[i] != 0 {
			t.Errorf("after Run: shard %d still holds %d jobs' state", i, held[i])
		}
	}
	fired.mu.Lock()
	defer fired.mu.Unlock()
	for _, tk := range fired.ticks[jobs[0].Name] {
		if tk.Payload != "{}" {
			t.Fatalf("job %s fired with the payload %s of the run-time job of its name", jobs[0].Name, tk.Payload)
		}
	}
}
