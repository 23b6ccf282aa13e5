package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// The asynq relay against a real asynq.Server with a ServeMux: what the
// claim's script writes is asynq v0.26.0's own task, processed by asynq's
// own code.

// asynqSink is a real asynq server on the test's Redis that records every
// task it processes.
type asynqSink struct {
	srv  *asynq.Server
	mu   sync.Mutex
	seen map[string]int // task id -> times processed
	got  []redis.RelayedTick
	news chan struct{}
}

func startAsynq(t *testing.T, srv *redistest.Server, queue, typ string) *asynqSink {
	t.Helper()
	s := &asynqSink{seen: map[string]int{}, news: make(chan struct{}, 1)}
	mux := asynq.NewServeMux()
	mux.HandleFunc(typ, func(ctx context.Context, task *asynq.Task) error {
		var rt redis.RelayedTick
		if err := json.Unmarshal(task.Payload(), &rt); err != nil {
			t.Errorf("task payload %q: %v", task.Payload(), err)
			return asynq.SkipRetry
		}
		id, _ := asynq.GetTaskID(ctx)
		s.mu.Lock()
		s.seen[id]++
		s.got = append(s.got, rt)
		s.mu.Unlock()
		select {
		case s.news <- struct{}{}:
		default:
		}
		return nil
	})
	s.srv = asynq.NewServer(asynq.RedisClientOpt{Addr: srv.Addr()}, asynq.Config{
		Concurrency: 2, Queues: map[string]int{queue: 1}, LogLevel: asynq.ErrorLevel,
		TaskCheckInterval: 20 * time.Millisecond})
	if err := s.srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

func (s *asynqSink) stop() { s.srv.Shutdown() }

// await waits (up to 60s, for a loaded machine) until cond holds over
// what the server processed, woken by each task it processes.
func (s *asynqSink) await(t *testing.T, what string, cond func(seen map[string]int, got []redis.RelayedTick) bool) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		s.mu.Lock()
		ok := cond(s.seen, s.got)
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.news:
		case <-timeout:
			t.Fatalf("not within 60s: %s", what)
		}
	}
}

func (s *asynqSink) twice(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.seen {
		if n != 1 {
			t.Errorf("task %s processed %d times", id, n)
		}
	}
}

func relayBackend(t *testing.T, srv *redistest.Server) *redis.Backend {
	t.Helper()
	if err := srv.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := redis.Open(srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func llen(t *testing.T, rc goredis.UniversalClient, key string) int64 {
	t.Helper()
	n, err := rc.LLen(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRelayAsynqClaim: a claimed tick is asynq's task; a retried claim, a
// duplicate of another term and a fenced claim write nothing; a task id
// asynq holds already is not pushed again; asynq processes the task once,
// with the type, retries and retention the relay asked for.
func TestRelayAsynqClaim(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	rc := b.Client()
	relay := &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "bills", Type: "bill:run", MaxAttempts: 3, Retention: 90 * time.Minute}
	if err := b.CanRelay(ctx, *relay); err != nil {
		t.Fatal(err)
	}
	now, err := b.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot := onetick.Slot(now.UnixMilli() / 1000 * 1000)
	tick := func(s onetick.Slot) onetick.Tick {
		return onetick.Tick{Job: "bill", Slot: s, Stream: "s", Payload: `{"n":1}`, Retention: time.Hour, Relay: relay}
	}
	a, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pending := "asynq:{bills}:pending"
	for i := range 2 { // the second is a retry of the same claim
		res, err := b.Claim(ctx, a.Lease, []onetick.Tick{tick(slot)})
		if err != nil || res.Outcomes[0] != onetick.Claimed {
			t.Fatalf("claim %d: %v %v", i, res.Outcomes, err)
		}
		if n := llen(t, rc, pending); n != 1 {
			t.Fatalf("claim %d: %d tasks pending, want 1", i, n)
		}
	}
	if n, _ := rc.XLen(ctx, "s").Result(); n != 0 {
		t.Errorf("the relayed tick was also appended to the stream (%d entries)", n)
	}
	if err := b.Release(ctx, a.Lease); err != nil {
		t.Fatal(err)
	}
	bl, err := b.Acquire(ctx, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Fenced: the old term's claim of a new slot writes no task.
	if _, err := b.Claim(ctx, a.Lease, []onetick.Tick{tick(slot - 1000)}); !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("fenced claim: %v", err)
	}
	if n, _ := rc.Exists(ctx, "asynq:{bills}:t:"+onetick.TickID("bill", slot-1000)).Result(); n != 0 {
		t.Error("a fenced claim wrote asynq's task")
	}
	// A duplicate (claimed by term a) writes nothing.
	res, err := b.Claim(ctx, bl.Lease, []onetick.Tick{tick(slot)})
	if err != nil || res.Outcomes[0] != onetick.Duplicate {
		t.Fatalf("duplicate claim: %v %v", res.Outcomes, err)
	}
	// onetick's records gone (a lost key, a restore) but asynq has the
	// task: not pushed twice.
	keys, err := rc.Keys(ctx, b.Prefix()+":ticks:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("tick records: %v %v", keys, err)
	}
	if err := rc.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	res, err = b.Claim(ctx, bl.Lease, []onetick.Tick{{Job: "bill", Slot: slot, Stream: "s", Payload: `{"n":1}`,
		Retention: time.Hour, Relay: relay, OutOfOrder: true}})
	if err != nil || res.Outcomes[0] != onetick.Duplicate {
		t.Fatalf("claim of a task asynq holds: %v %v", res.Outcomes, err)
	}
	if n := llen(t, rc, pending); n != 1 {
		t.Fatalf("%d tasks pending, want 1", n)
	}

	sink := startAsynq(t, srv, "bills", "bill:run")
	id := onetick.TickID("bill", slot)
	sink.await(t, "asynq processes the tick", func(seen map[string]int, _ []redis.RelayedTick) bool { return seen[id] > 0 })
	sink.stop()
	sink.twice(t)
	got := sink.got[0]
	if got.Job != "bill" || got.Slot != int64(slot) || got.Tick != id || got.Payload != `{"n":1}` || got.Kind != "" {
		t.Errorf("payload %+v", got)
	}
	in := asynq.NewInspectorFromRedisClient(rc)
	info, err := in.GetTaskInfo("bills", id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != "bill:run" || info.MaxRetry != 2 || info.Retention != 90*time.Minute || info.State != asynq.TaskStateCompleted {
		t.Errorf("task info: type %s max retry %d retention %v state %v", info.Type, info.MaxRetry, info.Retention, info.State)
	}
}

// TestRelayAsynqScheduler: a scheduler on Redis relays each slot of a job
// to asynq, and when it stops and another takes over on the same Redis
// no slot is processed twice.
func TestRelayAsynqScheduler(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	every, err := cron.Parse("@every 100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := startAsynq(t, srv, onetick.DefaultRelayQueue, "report")
	run := func(replica string, b *redis.Backend) (stop func()) {
		s, err := onetick.New(onetick.Config{Backend: b, Replica: replica, Lease: onetick.LeaseConfig{TTL: 2 * time.Second},
			Jobs: []onetick.Job{{Name: "report", Schedule: every, Payload: `{"r":1}`,
				Relay: &onetick.Relay{Kind: onetick.RelayAsynq}}}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(rctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) && replica != "killed" {
				t.Errorf("run %s: %v", replica, err)
			}
		}
	}
	atLeast := func(n int) func(map[string]int, []redis.RelayedTick) bool {
		return func(seen map[string]int, _ []redis.RelayedTick) bool { return len(seen) >= n }
	}
	more := func(what string) {
		t.Helper()
		sink.mu.Lock()
		had := len(sink.seen)
		sink.mu.Unlock()
		sink.await(t, what, atLeast(had+5))
	}
	stop := run("one", b)
	sink.await(t, "5 slots processed", atLeast(5))
	// A standby waits; the leader stops (its lease released); the
	// standby takes over from the last-fired slot.
	stop2 := run("two", b)
	stop()
	more("5 more slots under the second leader")
	// A leader on its own connection, killed: the connection closed, so
	// it neither renews nor releases; the standby takes over when the
	// lease expires.
	bk, err := redis.Open(srv.URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopKilled := run("killed", bk)
	stop2()
	more("5 more slots under the leader to be killed")
	stop = run("four", b)
	_ = bk.Close()
	more("5 more slots under the leader after the kill")
	stopKilled()
	stop()
	// Every claimed tick reaches asynq: await the records onetick kept.
	claimed := map[string]bool{}
	keys, err := b.Client().Keys(ctx, b.Prefix()+":ticks:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ids, err := b.Client().HKeys(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			claimed[id] = true
		}
	}
	sink.await(t, "every claimed tick processed", func(seen map[string]int, _ []redis.RelayedTick) bool {
		for id := range claimed {
			if seen[id] == 0 {
				return false
			}
		}
		return true
	})
	sink.stop()
	sink.twice(t)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.seen) != len(claimed) {
		t.Errorf("%d tasks processed, %d ticks claimed", len(sink.seen), len(claimed))
	}
	if n := llen(t, b.Client(), "asynq:{default}:pending"); n != 0 {
		t.Errorf("%d tasks left pending", n)
	}
	for _, rt := range sink.got {
		if rt.Job != "report" || rt.Payload != `{"r":1}` || rt.Tick != onetick.TickID("report", onetick.Slot(rt.Slot)) {
			t.Errorf("payload %+v", rt)
		}
	}
}

// TestRelayAsynqTrigger: a trigger and a backfill of a relayed job are
// asynq tasks too; the same trigger key again writes nothing.
func TestRelayAsynqTrigger(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	every, err := cron.Parse("@every 1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := &onetick.Ops{Backend: b, Jobs: []onetick.Job{{Name: "sync", Schedule: every, Payload: `{"d":0}`,
		Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "ops"}}}}
	who := onetick.Actor{Who: "test", Reason: "relay"}
	for i := range 2 {
		res, err := ops.Trigger(ctx, "sync", "k1", `{"d":1}`, who)
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 0; res.Enqueued != want {
			t.Fatalf("trigger %d: enqueued %v", i, res.Enqueued)
		}
	}
	now := time.Now()
	bf, err := ops.Backfill(ctx, "sync", onetick.BackfillRequest{From: now.Add(-3 * time.Minute), To: now.Add(-time.Minute), Max: 10}, who)
	if err != nil {
		t.Fatal(err)
	}
	sink := startAsynq(t, srv, "ops", "sync")
	want := 1 + bf.Enqueued
	sink.await(t, "the trigger and the backfill processed", func(seen map[string]int, _ []redis.RelayedTick) bool {
		return len(seen) >= want
	})
	sink.stop()
	sink.twice(t)
	kinds := map[string]int{}
	for _, rt := range sink.got {
		kinds[rt.Kind]++
		if rt.Kind == onetick.KindTrigger && (rt.Key != "k1" || rt.Payload != `{"d":1}` || rt.Slot != 0) {
			t.Errorf("trigger payload %+v", rt)
		}
	}
	if kinds[onetick.KindTrigger] != 1 || kinds[onetick.KindBackfill] != bf.Enqueued || bf.Enqueued < 1 {
		t.Errorf("processed %v, backfill enqueued %d", kinds, bf.Enqueued)
	}
}

// TestRelayAsynqCanRelay: a relay other than asynq, asynq keys of another
// type and a task written by a newer asynq layout are refused at start.
func TestRelayAsynqCanRelay(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	rc := b.Client()
	if err := b.CanRelay(ctx, onetick.Relay{Kind: onetick.RelayRiver}); err == nil {
		t.Error("river relay accepted on Redis")
	}
	r := onetick.Relay{Kind: onetick.RelayAsynq, Queue: "q"}
	if err := rc.Set(ctx, "asynq:{q}:pending", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.CanRelay(ctx, r); err == nil || !strings.Contains(err.Error(), "asynq:{q}:pending holds a string") {
		t.Errorf("pending of another type: %v", err)
	}
	if err := rc.Del(ctx, "asynq:{q}:pending").Err(); err != nil {
		t.Fatal(err)
	}
	// A task asynq itself enqueued reads as v0.26.0's.
	cl := asynq.NewClientFromRedisClient(rc)
	if _, err := cl.EnqueueContext(ctx, asynq.NewTask("t", []byte("{}")), asynq.Queue("q"), asynq.TaskID("x1")); err != nil {
		t.Fatal(err)
	}
	if err := b.CanRelay(ctx, r); err != nil {
		t.Errorf("a task asynq v0.26.0 wrote: %v", err)
	}
	// Field 16 of a TaskMessage is not v0.26.0's: a newer layout.
	msg, err := rc.HGet(ctx, "asynq:{q}:t:x1", "msg").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.HSet(ctx, "asynq:{q}:t:x1", "msg", msg+"\x80\x01\x01").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.CanRelay(ctx, r); err == nil || !strings.Contains(err.Error(), "newer asynq layout") {
		t.Errorf("a newer layout: %v", err)
	}
}

// TestRelayAsynqCluster: refused on Redis Cluster, with the reason.
func TestRelayAsynqCluster(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), Password: c.Password()})
	defer cc.Close()
	b := redis.New(cc, redis.Options{Prefix: "{onetick}"})
	err := b.CanRelay(context.Background(), onetick.Relay{Kind: onetick.RelayAsynq})
	if !errors.Is(err, redis.ErrRelayCluster) || !strings.Contains(err.Error(), "hash tag") {
		t.Errorf("CanRelay on Redis Cluster: %v", err)
	}
}

// TestRelayAsynqWire: the TaskMessage the relay encodes by hand is byte
// for byte the one asynq v0.26.0's own client writes for the same task.
func TestRelayAsynqWire(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	for _, r := range []onetick.Relay{
		{Kind: onetick.RelayAsynq},
		{Kind: onetick.RelayAsynq, Queue: "q", Type: "x:y", MaxAttempts: 1, Retention: 1500 * time.Millisecond},
		{Kind: onetick.RelayAsynq, Queue: "q", MaxAttempts: 40, Retention: 72 * time.Hour},
	} {
		tick := onetick.Tick{Job: "w", Slot: 1_700_000_000_000, Payload: `{"é":"\u0000"}`, Retention: 2 * time.Hour, Relay: &r}
		queue, id, msg := redis.RelayTask(tick, "")
		payload, err := json.Marshal(redis.RelayedTick{Job: "w", Slot: 1_700_000_000_000, Tick: id, Payload: tick.Payload})
		if err != nil {
			t.Fatal(err)
		}
		typ, retry, ret := r.Type, 25, r.Retention
		if typ == "" {
			typ = "w"
		}
		if r.MaxAttempts > 0 {
			retry = r.MaxAttempts - 1
		}
		if ret == 0 {
			ret = tick.Retention
		}
		if ret%time.Second != 0 {
			ret = ret.Truncate(time.Second) + time.Second
		}
		cl := asynq.NewClientFromRedisClient(b.Client())
		if _, err := cl.EnqueueContext(ctx, asynq.NewTask(typ, payload), asynq.Queue(queue), asynq.TaskID(id),
			asynq.MaxRetry(retry), asynq.Retention(ret)); err != nil {
			t.Fatal(err)
		}
		theirs, err := b.Client().HGet(ctx, "asynq:{"+queue+"}:t:"+id, "msg").Result()
		if err != nil {
			t.Fatal(err)
		}
		if theirs != string(msg) {
			t.Errorf("relay %+v: msg\n ours   %x\n asynq's %x", r, msg, theirs)
		}
		if err := b.Client().FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRelayAsynqRestart: Redis restarted (AOF, fsync always) between a
// claim and its retry, and a new leader's claim of the same slot: asynq
// has the task once, and processes it once.
func TestRelayAsynqRestart(t *testing.T) {
	srv := redistest.Start(t, redistest.AppendOnly())
	ctx := context.Background()
	b := relayBackend(t, srv)
	relay := &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "r"}
	now, err := b.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot := onetick.Slot(now.UnixMilli()/1000*1000 - 1000)
	ticks := []onetick.Tick{{Job: "j", Slot: slot, Stream: "s", Retention: time.Hour, Relay: relay}}
	a, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := b.Claim(ctx, a.Lease, ticks); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim: %v %v", res.Outcomes, err)
	}
	srv.Restart()
	// The client reconnects; the lease, the record and the task survived.
	if res, err := b.Claim(ctx, a.Lease, ticks); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("retried claim after the restart: %v %v", res.Outcomes, err)
	}
	if err := b.Release(ctx, a.Lease); err != nil {
		t.Fatal(err)
	}
	bl, err := b.Acquire(ctx, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	next := append(ticks, onetick.Tick{Job: "j", Slot: slot + 1000, Stream: "s", Retention: time.Hour, Relay: relay})
	res, err := b.Claim(ctx, bl.Lease, next)
	if err != nil || res.Outcomes[0] != onetick.Duplicate || res.Outcomes[1] != onetick.Claimed {
		t.Fatalf("new leader's claim: %v %v", res.Outcomes, err)
	}
	if n := llen(t, b.Client(), "asynq:{r}:pending"); n != 2 {
		t.Fatalf("%d tasks pending, want 2", n)
	}
	sink := startAsynq(t, srv, "r", "j")
	sink.await(t, "both slots processed", func(seen map[string]int, _ []redis.RelayedTick) bool { return len(seen) == 2 })
	sink.stop()
	sink.twice(t)
}

// TestRelayAsynqBroken: a tick whose relay this store cannot write (River)
// and a relayed tick whose asynq pending list holds another type are
// Broken, with the reason, and nothing is appended or pushed.
func TestRelayAsynqBroken(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	rc := b.Client()
	if err := rc.Set(ctx, "asynq:{bad}:pending", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	now, err := b.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot := onetick.Slot(now.UnixMilli()/1000*1000 - 1000)
	ticks := []onetick.Tick{
		{Job: "river", Slot: slot, Stream: "s", Retention: time.Hour, Relay: &onetick.Relay{Kind: onetick.RelayRiver}},
		{Job: "bad", Slot: slot, Stream: "s", Retention: time.Hour, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "bad"}},
		{Job: "ok", Slot: slot, Stream: "s", Retention: time.Hour, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "ok"}},
	}
	a, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Claim(ctx, a.Lease, ticks)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcomes[0] != onetick.Broken || !strings.Contains(res.Damaged[0].Reason, "relays only to asynq") {
		t.Errorf("river tick: %v %v", res.Outcomes[0], res.Damaged[0])
	}
	if res.Outcomes[1] != onetick.Broken || res.Damaged[1].Key != "asynq:{bad}:pending" || res.Damaged[1].Repairable {
		t.Errorf("tick with a damaged pending list: %v %+v", res.Outcomes[1], res.Damaged[1])
	}
	if res.Outcomes[2] != onetick.Claimed || llen(t, rc, "asynq:{ok}:pending") != 1 {
		t.Errorf("the good tick: %v", res.Outcomes[2])
	}
	if n, _ := rc.XLen(ctx, "s").Result(); n != 0 {
		t.Errorf("%d entries appended to the stream", n)
	}
	// The same through Enqueue (a backfill).
	bres, err := b.Enqueue(ctx, []onetick.Tick{{Job: "bad", Slot: slot - 60000, Stream: "s", Retention: time.Hour,
		Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "bad"}}}, onetick.Actor{Who: "t"})
	if err != nil || bres.Outcomes[0] != onetick.Broken || bres.Damaged[0].Key != "asynq:{bad}:pending" {
		t.Errorf("backfill with a damaged pending list: %v %v", bres.Outcomes, err)
	}
}
