package onetick_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// A new leader that finds the only late slot older than the grace skips it
// at once, counts it, and then sleeps until the next slot: it neither spins
// nor waits for the next slot to account for the gap.
func TestSkippedSlotIsCountedAtTakeover(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // a multiple of 5s
	fc := clockwork.NewFakeClockAt(start)
	mem := memory.New(memory.Options{Clock: fc})
	ctx := context.Background()
	seed, err := mem.Acquire(ctx, "seed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	prev := onetick.SlotOf(start.Add(-5 * time.Second))
	if _, err := mem.Claim(ctx, seed.Lease, []onetick.Tick{{Job: "five", Slot: prev, Stream: "s", Payload: "{}", Retention: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if err := mem.Release(ctx, seed.Lease); err != nil {
		t.Fatal(err)
	}
	fc.Advance(1500 * time.Millisecond) // the slot at start is now 1.5s old
	sched, _ := cron.Parse("@every 5s", nil)
	s, err := onetick.New(onetick.Config{Backend: mem, Replica: "r", Clock: fc,
		Jobs: []onetick.Job{{Name: "five", Schedule: sched, Prefer: onetick.PreferMissed, Grace: time.Second, Stream: "s"}}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(rctx) }()
	defer func() { cancel(); <-done }()
	// The elector's renew and deadline timers and the scheduler's wait for
	// the next slot: a scheduler that spun would never block on a timer.
	block(t, fc, 3)
	if got := testutil.ToFloat64(s.Metrics().JobMissedTicks.WithLabelValues("five", "missed")); got != 1 {
		t.Fatalf("missed counter %v, want 1 (the slot at %s)", got, start)
	}
	if got := testutil.ToFloat64(s.Metrics().MissedTicks.WithLabelValues("missed")); got != 1 {
		t.Fatalf("fleet total of missed slots (prefer missed) %v, want 1", got)
	}
	fc.Advance(3500 * time.Millisecond) // the next slot is due
	for len(mem.Stream("s")) < 2 {
		block(t, fc, 3)
	}
	got := mem.Stream("s")
	if got[1].Slot != onetick.SlotOf(start.Add(5*time.Second)) {
		t.Fatalf("fired %s, want the slot after the skipped one", got[1].Slot)
	}
}

// onceAcquire grants the lease once; afterwards someone else holds it.
type onceAcquire struct {
	hangingRenew
	granted atomic.Bool
}

func (o *onceAcquire) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	if o.granted.Swap(true) {
		return onetick.Grant{}, &onetick.HeldError{Leader: onetick.LeaderInfo{
			Lease: onetick.Lease{Holder: "other", Epoch: 99}, TTL: time.Hour, Held: true}}
	}
	return o.hangingRenew.Acquire(ctx, holder, ttl)
}

// A leader that wakes after its trust deadline (a pause, a stopped
// process) neither fires nor counts the slots it slept through as missed:
// they are the next leader's to fire.
func TestPausedLeaderCountsNothing(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(start.Add(100 * time.Millisecond))
	mem := memory.New(memory.Options{Clock: fc})
	b := &onceAcquire{hangingRenew: hangingRenew{mem, make(chan struct{}, 1)}}
	sched, _ := cron.Parse("@every 1s", nil)
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "r", Clock: fc,
		Lease: onetick.LeaseConfig{TTL: 3 * time.Second, Renew: time.Second},
		Jobs:  []onetick.Job{{Name: "sec", Schedule: sched, Prefer: onetick.PreferMissed, Stream: "s"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	block(t, fc, 3)              // renew, trust deadline, the wait for the slot at +1s
	fc.Advance(10 * time.Second) // the whole process was stopped for 10s
	<-b.renewing
	// Every timer fired. The one armed next is the standby's: the elector
	// arms it only after the firing loop of the old term has returned.
	block(t, fc, 1)
	if s.Elector().IsLeader() {
		t.Fatal("still leading after the trust deadline")
	}
	if got := testutil.ToFloat64(s.Metrics().MissedTicks.WithLabelValues("missed")); got != 0 {
		t.Fatalf("a paused leader counted %v missed slots", got)
	}
	if n := len(mem.Stream("s")); n != 0 {
		t.Fatalf("a paused leader fired %d ticks after its trust deadline", n)
	}
}
