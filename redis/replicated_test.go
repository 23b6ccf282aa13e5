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

// replicaOf starts a replica of primary and waits until it is in sync.
func replicaOf(t *testing.T, primary *redistest.Server) *redistest.Server {
	t.Helper()
	r := redistest.Start(t, redistest.Args("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port), "--repl-diskless-sync-delay", "0"))
	pc := primary.Client()
	defer pc.Close()
	// Replication state is only visible by asking (no notification).
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := pc.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return r
		}
		if time.Now().After(end) {
			t.Fatalf("the replica did not come in sync: %s", info)
		}
	}
}

// TestReplicatedDurability: with a replica in sync, acquire, renew and
// claim succeed in the replicated mode; with the replica stopped, a renewal
// is not trusted and a claim stands but says so; an acquisition is given
// back.
func TestReplicatedDurability(t *testing.T) {
	primary := redistest.Start(t)
	replica := replicaOf(t, primary)
	b, err := redis.Open(primary.URL(), redis.Options{Durability: redis.DurabilityReplicated, Replicas: 1, ReplicationTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
	if _, err := b.Renew(ctx, g.Lease, 10*time.Second); !errors.Is(err, onetick.ErrNotReplicated) {
		t.Fatalf("renew with the replica stopped: %v, want ErrNotReplicated", err)
	}
	tk.Slot += 1000
	res, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk})
	if !errors.Is(err, onetick.ErrNotReplicated) || len(res.Outcomes) != 1 || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim with the replica stopped: %+v, %v; want the outcome and ErrNotReplicated", res, err)
	}
	if err := b.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "b", 10*time.Second); !errors.Is(err, onetick.ErrNotReplicated) {
		t.Fatalf("acquire with the replica stopped: %v, want ErrNotReplicated", err)
	}
	// The unreplicated acquisition was given back.
	if info, err := b.Leader(ctx); err != nil || info.Held {
		t.Fatalf("leader after an unreplicated acquisition: %+v, %v; want none", info, err)
	}
}

// TestReplicatedLeaderStepsDown: a leader whose claims the replica stops
// acknowledging steps down instead of writing on to a primary that a
// failover may roll back.
func TestReplicatedLeaderStepsDown(t *testing.T) {
	primary := redistest.Start(t)
	replica := replicaOf(t, primary)
	b, err := redis.Open(primary.URL(), redis.Options{Durability: redis.DurabilityReplicated, ReplicationTimeout: 100 * time.Millisecond})
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
	replica.Pause()
	defer replica.Resume()
	waitFor(t, "the leader steps down", func() bool {
		return strings.Contains(logs.String(), "reason=\"a claim was not acknowledged by enough replicas\"")
	})
}

// waitFor polls cond (state outside the code under test) for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 10s: %s", what)
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
