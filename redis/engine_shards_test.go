package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// TestShardedSchedulersCluster: the engine with three shards, three
// replicas (each its own client, as separate processes would have) on a
// Redis Cluster of three primaries started by the test (docs/shards.md,
// plan steps 8 and 9, "and on a real Cluster"):
//
//  1. assignment: once settled each replica leads one shard, and each
//     shard's lease key lives on the primary ShardPrefix put it on, one
//     shard per primary;
//  2. every slot is claimed once, into its job's shard's stream (read
//     through the views), and the job's last-fired slot is in its shard's
//     view only;
//  3. hand-over: a replica stopped cleanly leaves the membership and
//     releases its shard, which one of the others takes (2 and 1), the
//     stopped replica's term recorded as released;
//  4. fencing per shard: the stopped replica's lease of its shard, now
//     stale, claims nothing through its shard's view (nor through
//     another shard's), on the Cluster.
func TestShardedSchedulersCluster(t *testing.T) {
	const (
		shards = 3
		prefix = "{onetick}"
	)
	cl := redistest.StartCluster(t, redistest.ClusterOptions{})
	newBackend := func() *redis.Backend {
		c := goredis.NewClusterClient(cl.ClusterOptions())
		t.Cleanup(func() { _ = c.Close() })
		return redis.New(c, redis.Options{Prefix: prefix})
	}
	ctx := context.Background()
	store := newBackend() // the test's own reads
	views := make([]*redis.Backend, shards)
	for i := range views {
		v, err := store.Shard(i, shards)
		if err != nil {
			t.Fatal(err)
		}
		views[i] = v.(*redis.Backend)
	}

	// (1b) One shard per primary, by ShardPrefix's slot ranges.
	onPrimary := map[string]int{}
	for n := range shards {
		p := cl.PrimaryFor(redis.ShardPrefix(prefix, n, shards) + ":leader")
		if m, ok := onPrimary[p.Addr()]; ok {
			t.Fatalf("shards %d and %d on one primary %s", m, n, p.Addr())
		}
		onPrimary[p.Addr()] = n
	}

	// Two jobs per shard, every second, each into a stream under its
	// shard's tag (a stream outside the shard's slot is refused on a
	// Cluster: config/topology.go).
	every, err := cron.Parse("@every 1s", nil)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []onetick.Job
	count := make([]int, shards)
	for i := 0; len(jobs) < 2*shards; i++ {
		name := fmt.Sprintf("job-%d", i)
		s := onetick.ShardOf(name, shards)
		if count[s] == 2 {
			continue
		}
		count[s]++
		jobs = append(jobs, onetick.Job{Name: name, Schedule: every, Stream: redis.ShardPrefix(prefix, s, shards) + ":stream:" + name})
	}

	log := slog.New(slog.NewTextHandler(testLog{t}, nil))
	type replica struct {
		name string
		s    *onetick.Scheduler
		stop func() error // cancels Run and returns its error; idempotent
	}
	start := func(name string) *replica {
		s, err := onetick.New(onetick.Config{
			Backend: newBackend(), Replica: name, Jobs: jobs, Shards: shards,
			// The memory engine test's lease: generous against a loaded
			// machine (a slot is lost only past the grace, twice the TTL).
			Lease:  onetick.LeaseConfig{TTL: 3 * time.Second, Renew: 500 * time.Millisecond},
			Logger: log.With("test_replica", name),
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(rctx) }()
		r := &replica{name, s, sync.OnceValue(func() error { cancel(); return <-done })}
		t.Cleanup(func() { _ = r.stop() })
		return r
	}
	leader := func(n int) string {
		info, err := views[n].Leader(ctx)
		if err != nil || !info.Held {
			return ""
		}
		return info.Lease.Holder
	}
	streamLen := func(j onetick.Job) int64 {
		recs, err := views[onetick.ShardOf(j.Name, shards)].ReadStream(ctx, j.Stream, 0)
		if err != nil {
			t.Fatalf("stream %s: %v", j.Stream, err)
		}
		return int64(len(recs))
	}
	fired := func(at map[string]int64, n int64) func() bool {
		return func() bool {
			for _, j := range jobs {
				if streamLen(j) < at[j.Name]+n {
					return false
				}
			}
			return true
		}
	}
	lens := func() map[string]int64 {
		m := map[string]int64{}
		for _, j := range jobs {
			m[j.Name] = streamLen(j)
		}
		return m
	}

	rs := []*replica{start("a"), start("b"), start("c")}

	// (1) Settled: one shard each, by the replicas' account and the
	// stores', and every job fires.
	waitFor(t, "each replica leads one shard, as the leases say", func() bool {
		for _, r := range rs {
			led := r.s.Balancer().Led()
			if len(led) != 1 || leader(led[0]) != r.name {
				return false
			}
		}
		return true
	})
	waitFor(t, "every job fired twice", fired(nil, 2))
	for n := range shards {
		key := redis.ShardPrefix(prefix, n, shards) + ":leader"
		// Asked of the primary alone: a key of another node's slot
		// would be answered with MOVED.
		p := cl.PrimaryFor(key)
		if v, err := p.Client().Get(ctx, key).Result(); err != nil || v == "" {
			t.Fatalf("shard %d: lease %s on primary %s: %q, %v", n, key, p.Addr(), v, err)
		}
	}

	// (3) c stops cleanly: it leaves the membership and releases its
	// shard, which a or b takes; the fleet settles at 2 and 1.
	c := rs[2]
	cShard := c.s.Balancer().Led()[0]
	cInfo, err := views[cShard].Leader(ctx)
	if err != nil || cInfo.Lease.Holder != "c" {
		t.Fatalf("shard %d: leader %+v, %v; want c", cShard, cInfo, err)
	}
	if err := c.stop(); err != nil {
		t.Fatalf("c: %v", err)
	}
	if live, err := store.Client().ZRange(ctx, prefix+":members", 0, -1).Result(); err != nil || slices.Contains(live, "c") {
		t.Fatalf("members after c's clean stop: %q, %v; want c gone", live, err)
	}
	a, b := rs[0], rs[1]
	waitFor(t, "a and b lead the three shards, 2 and 1, as the leases say", func() bool {
		la, lb := a.s.Balancer().Led(), b.s.Balancer().Led()
		if len(la)+len(lb) != shards || max(len(la), len(lb)) != 2 {
			return false
		}
		for _, n := range la {
			if leader(n) != "a" {
				return false
			}
		}
		for _, n := range lb {
			if leader(n) != "b" {
				return false
			}
		}
		return true
	})
	terms, err := views[cShard].History(ctx, 2)
	if err != nil || len(terms) < 2 || terms[1].Holder != "c" || terms[1].Reason != onetick.EndReleased || terms[0].Holder == "c" {
		t.Fatalf("shard %d: history %+v, %v; want c's term released, then a's or b's", cShard, terms, err)
	}
	waitFor(t, "every job fired twice more", fired(lens(), 2))

	// (4) c's lease of its shard is stale: a claim under it is fenced,
	// in its shard's view and in any other, and writes nothing (a job of
	// c's shard that no replica fires, so that anything written shows).
	ghost := ""
	for i := 0; ghost == ""; i++ {
		if n := fmt.Sprintf("ghost-%d", i); onetick.ShardOf(n, shards) == cShard {
			ghost = n
		}
	}
	slot := onetick.SlotOf(time.Now().Truncate(time.Second))
	for n, v := range views {
		stream := redis.ShardPrefix(prefix, n, shards) + ":stream:" + ghost
		tick := onetick.Tick{Job: ghost, Slot: slot, Stream: stream, Payload: "{}", Retention: time.Minute}
		if _, err := v.Claim(ctx, cInfo.Lease, []onetick.Tick{tick}); !errors.Is(err, onetick.ErrFenced) {
			t.Fatalf("shard %d: a claim under c's stale lease of shard %d: %v, want fenced", n, cShard, err)
		}
		if k, err := store.Client().XLen(ctx, stream).Result(); err != nil || k != 0 {
			t.Fatalf("a fenced claim wrote %d entries to %s (%v)", k, stream, err)
		}
		if last, err := v.LastFired(ctx, []string{ghost}); err != nil || len(last) != 0 {
			t.Fatalf("a fenced claim recorded %v (%v) in shard %d's view", last, err, n)
		}
	}

	for _, r := range rs[:2] {
		if err := r.stop(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}

	// (2) Every slot once, in its job's shard's stream, with no gap; the
	// last-fired slot in the job's shard's view and no other.
	for _, j := range jobs {
		home := onetick.ShardOf(j.Name, shards)
		recs, err := views[home].ReadStream(ctx, j.Stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		slots := make([]onetick.Slot, 0, len(recs))
		for _, r := range recs {
			if r.Job != j.Name {
				t.Fatalf("stream %s holds a tick of %s", j.Stream, r.Job)
			}
			slots = append(slots, r.Slot)
		}
		slices.Sort(slots)
		for i := 1; i < len(slots); i++ {
			if slots[i] == slots[i-1] {
				t.Errorf("job %s: slot %s claimed twice", j.Name, slots[i])
			} else if want := slots[i-1] + onetick.Slot(time.Second.Milliseconds()); slots[i] != want {
				t.Errorf("job %s: slots %s to %s not claimed", j.Name, want, slots[i]-1)
			}
		}
		for n, v := range views {
			last, err := v.LastFired(ctx, []string{j.Name})
			if err != nil {
				t.Fatal(err)
			}
			switch got, ok := last[j.Name]; {
			case n == home && (!ok || got != slots[len(slots)-1]):
				t.Errorf("job %s: last fired in its shard %d's view %v (%v), want %s", j.Name, n, got, ok, slots[len(slots)-1])
			case n != home && ok:
				t.Errorf("job %s of shard %d: last fired %s in shard %d's view", j.Name, home, got, n)
			}
		}
	}
}

// testLog writes a replica's log lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
