package onetick_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
)

// A replica refuses to lead under another shard layout than the store's:
// a sharded replica on a store whose one-shard layout had a term, and a
// replica without shards on a store that a sharded fleet took. Run ends
// with the LayoutError before anything leads.
func TestSchedulerRefusesAnotherLayout(t *testing.T) {
	ctx := context.Background()
	jobs := []onetick.Job{{Name: "j", Schedule: every(time.Second)}}
	run := func(b onetick.Backend, shards int, stopWhen func() bool) error {
		t.Helper()
		s, err := onetick.New(onetick.Config{Backend: b, Replica: "r", Jobs: jobs, Shards: shards,
			Sink:       onetick.SinkFunc(func(context.Context, []onetick.TickRecord) error { return nil }),
			Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Run(rctx) }()
		if stopWhen != nil {
			poll := time.NewTicker(10 * time.Millisecond)
			defer poll.Stop()
			for !stopWhen() {
				select {
				case err := <-done:
					return err
				case <-poll.C:
				}
			}
			cancel()
		}
		return <-done
	}

	used := memory.New(memory.Options{})
	defer used.Close()
	g, err := used.Acquire(ctx, "old", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := used.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	var le *onetick.LayoutError
	if err := run(used, 4, nil); !errors.As(err, &le) || le.Stored != 1 || le.Configured != 4 {
		t.Fatalf("4 shards on a store used by one: Run = %v, want a LayoutError", err)
	}
	if li, _ := used.Leader(ctx); li.Held {
		t.Fatalf("the refused replica holds %+v", li)
	}

	fresh := memory.New(memory.Options{})
	defer fresh.Close()
	v, err := fresh.Shard(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(fresh, 2, func() bool { li, _ := v.Leader(ctx); return li.Held }); err != nil {
		t.Fatalf("2 shards on a fresh store: %v", err)
	}
	if err := run(fresh, 1, nil); !errors.As(err, &le) || le.Stored != 2 || le.Configured != 1 {
		t.Fatalf("1 shard on a 2-shard store: Run = %v, want a LayoutError", err)
	}
}
