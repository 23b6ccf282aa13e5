package postgres_test

import (
	"context"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
)

// Two schedulers relay one job to River; the leader stops (a rolling
// deploy's graceful stop) and the standby takes over. River's worker
// sees every slot from the first to the last exactly once.
func TestRelayRiverLeaderChange(t *testing.T) {
	ctx := ctxT(t)
	r := newRiverRig(t)
	sched, err := cron.Parse("@every 200ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) (stop func()) {
		b, err := postgres.Open(ctx, pgtest.URL(), postgres.Options{Schema: r.b.Schema(), RiverSchema: r.b.RiverSchema()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := onetick.New(onetick.Config{Backend: b, Replica: name, Logger: slog.New(slog.DiscardHandler),
			Lease: onetick.LeaseConfig{TTL: time.Second, Renew: 300 * time.Millisecond},
			Jobs:  []onetick.Job{{Name: "nightly", Schedule: sched, Prefer: onetick.PreferDuplicate, Relay: reports}}})
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(sctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil && sctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
			_ = b.Close()
		}
	}
	stopA := start("a")
	r.rec.await(t, 3) // a leads (the first to start)
	stopB := start("b")
	stopA() // graceful: a releases, b takes over
	n := len(r.rec.await(t, 1))
	r.rec.await(t, n+5) // b fired further slots
	stopB()
	got := r.rec.await(t, r.jobsIn(t)) // every job River holds, worked
	seen := map[string]bool{}
	var slots []time.Time
	for _, g := range got {
		if seen[g.Tick] {
			t.Fatalf("tick %s worked twice", g.Tick)
		}
		seen[g.Tick] = true
		slots = append(slots, g.Slot)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	for i := 1; i < len(slots); i++ {
		if d := slots[i].Sub(slots[i-1]); d != 200*time.Millisecond {
			t.Fatalf("slots %s and %s: a gap of %s, want every slot once", slots[i-1], slots[i], d)
		}
	}
	var terms int
	if err := r.b.Pool().QueryRow(ctx, r.b.Q(`SELECT count(DISTINCT holder) FROM {s}.ticks`)).Scan(&terms); err != nil || terms != 2 {
		t.Fatalf("ticks claimed by %d replicas (%v), want both", terms, err)
	}
}
