package redis_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// startPrimary starts a server that serves a replica's full sync at once
// (diskless, no delay: the default delay is 5 s, a primary-side setting).
func startPrimary(t *testing.T) *redistest.Server {
	return redistest.Start(t, redistest.Args("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
}

// replicaOf starts a replica of primary and waits until it is in sync: it
// is online and a WAIT for it returns (no time bound but the test's own).
func replicaOf(t *testing.T, primary *redistest.Server) *redistest.Server {
	t.Helper()
	r := redistest.Start(t, redistest.Args("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)))
	pc := primary.Client()
	defer pc.Close()
	ctx := context.Background()
	// Replication state is only visible by asking (no notification). The
	// bound is generous: a full sync on a busy machine may take seconds.
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := pc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the replica did not come in sync: %s", info)
		}
	}
	// WAIT 1 0 blocks until the replica acknowledged everything written so far.
	if n, err := pc.Do(ctx, "WAIT", 1, 0).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}
	return r
}

// inSyncTimeout bounds WAIT while the replica is in sync: WAIT returns as
// soon as the replica acknowledges, so a long bound costs nothing when all
// is well and keeps a loaded machine from failing the test. With the
// replica stopped the outcome does not depend on the bound (a stopped
// process acknowledges nothing), so that half uses a short one.
const (
	inSyncTimeout  = 20 * time.Second
	stoppedTimeout = 300 * time.Millisecond
)

// TestReplicatedDurability: with a replica in sync, acquire, renew and
// claim succeed in the replicated mode; with the replica stopped, a renewal
// is not trusted and a claim stands but says so; an acquisition is given
// back.
func TestReplicatedDurability(t *testing.T) {
	primary := startPrimary(t)
	replica := replicaOf(t, primary)
	b, err := redis.Open(primary.URL(), redis.Options{Durability: redis.DurabilityReplicated, Replicas: 1, ReplicationTimeout: inSyncTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The same store through a short WAIT bound, for the replica stopped.
	bs, err := redis.Open(primary.URL(), redis.Options{Durability: redis.DurabilityReplicated, Replicas: 1, ReplicationTimeout: stoppedTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	ctx := context.Background()
	g, err := b.Acquire(ctx, "a", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire with a replica in sync: %v", err)
	}
	if _, err := b.Renew(ctx, g.Lease, 10*time.Second); err != nil {
		t.Fatalf("renew with a replica in sync: %v", err)
	}
	s := onetick.SlotOf(time.Now().Add(-time.Second).Truncate(time.Second))
	tk := onetick.Tick{Job: "j", Slot: s, Stream: "rs", Payload: "{}", Retention: time.Minute}
	if res, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim with a replica in sync: %+v, %v", res, err)
	}

	replica.Pause()
	defer replica.Resume()
	if _, err := bs.Renew(ctx, g.Lease, 10*time.Second); !errors.Is(err, onetick.ErrNotReplicated) {
		t.Fatalf("renew with the replica stopped: %v, want ErrNotReplicated", err)
	}
	tk.Slot += 1000
	res, err := bs.Claim(ctx, g.Lease, []onetick.Tick{tk})
	if !errors.Is(err, onetick.ErrNotReplicated) || len(res.Outcomes) != 1 || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim with the replica stopped: %+v, %v; want the outcome and ErrNotReplicated", res, err)
	}
	if err := bs.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Acquire(ctx, "b", 10*time.Second); !errors.Is(err, onetick.ErrNotReplicated) {
		t.Fatalf("acquire with the replica stopped: %v, want ErrNotReplicated", err)
	}
	// The unreplicated acquisition was given back.
	if info, err := bs.Leader(ctx); err != nil || info.Held {
		t.Fatalf("leader after an unreplicated acquisition: %+v, %v; want none", info, err)
	}
}

// TestReplicatedLeaderStepsDown: a leader whose claims the replica stops
// acknowledging steps down instead of writing on to a primary that a
// failover may roll back.
func TestReplicatedLeaderStepsDown(t *testing.T) {
	primary := startPrimary(t)
	replica := replicaOf(t, primary)
	b, err := redis.Open(primary.URL(), redis.Options{Durability: redis.DurabilityReplicated, ReplicationTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sched, err := cron.Parse("@every 100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "r", Lease: onetick.LeaseConfig{TTL: 2 * time.Second},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Jobs:   []onetick.Job{{Name: "j", Schedule: sched, Stream: "sd"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the leader fires", func() bool {
		n, _ := b.Client().XLen(context.Background(), "sd").Result()
		return n >= 3
	})
	// Only a step-down logged after the pause counts (a loaded machine may
	// have delayed an acknowledgement before it).
	replica.Pause()
	defer replica.Resume()
	before := len(logs.String())
	waitFor(t, "the leader steps down", func() bool {
		return strings.Contains(logs.String()[before:], "reason=\"a claim was not acknowledged by enough replicas\"")
	})
}

// waitFor polls cond (state outside the code under test) for up to 60s,
// room for a loaded machine; it returns as soon as cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 60s: %s", what)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
