package redis_test

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// viewHarness is h with New and NewRetained returning shard n of shards
// of the store h makes; the store is closed at the end of the subtest.
func viewHarness(h backendtest.Harness, n, shards int) backendtest.Harness {
	view := func(t *testing.T, b onetick.Backend) onetick.Backend {
		t.Cleanup(func() { _ = b.Close() })
		v, err := b.(onetick.Sharder).Shard(n, shards)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	newStore, newRetained := h.New, h.NewRetained
	h.New = func(t *testing.T) onetick.Backend { return view(t, newStore(t)) }
	h.NewRetained = func(t *testing.T, r onetick.LedgerRetention) onetick.Backend {
		return view(t, newRetained(t, r))
	}
	return h
}

// TestShards: views are isolated, shard 0 of 1 is the store.
func TestShards(t *testing.T) {
	srv := redistest.Start(t, redistest.KeyspaceEvents())
	backendtest.Shards(t, harness(t, srv))
	backendtest.Layout(t, harness(t, srv))
}

// TestConformanceShardViewWithoutKeyspaceEvents: the whole suite on
// shard 3 of 8, whose keys are under onetick:03, on a server without
// keyspace events (the suite's other variant: one run covers both, to
// keep make test short; the Cluster, ACL and worker suites run on the
// store, and backendtest.Shards on views there).
func TestConformanceShardViewWithoutKeyspaceEvents(t *testing.T) {
	srv := redistest.Start(t)
	h := viewHarness(harness(t, srv), 3, 8)
	// Every key the suite leaves is the view's (streams are named by the
	// suite, outside any prefix).
	h.StreamKey = func(name string) string { return "onetick:03:s:" + name }
	backendtest.Exercise(t, h)
	c := goredis.NewClient(srv.Options())
	defer c.Close()
	keys, err := c.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "onetick:03:") {
			t.Errorf("key %q outside the view's prefix onetick:03:", k)
		}
	}
}

// TestShardView: the view's prefix and ownership.
func TestShardView(t *testing.T) {
	srv := redistest.Start(t)
	b, err := redis.Open(srv.URL(), redis.Options{Prefix: "{app}"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	one, err := b.Shard(0, 1)
	if err != nil || one != onetick.Backend(b) {
		t.Fatalf("Shard(0, 1) = %v, %v; want the store", one, err)
	}
	v, err := b.Shard(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p, want := v.(*redis.Backend).Prefix(), redis.ShardPrefix("{app}", 2, 3); p != want {
		t.Fatalf("view prefix %q, want %q", p, want)
	}
	if _, err := v.(onetick.Sharder).Shard(0, 2); err == nil {
		t.Error("a view's Shard: no error, want one (views are asked of the store)")
	}
	// Closing the view leaves the shared client open.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(context.Background()); err != nil {
		t.Fatalf("the store after its view was closed: %v", err)
	}
}

// TestShardsCluster: on a Redis Cluster of three primaries, the views of
// three shards of the prefix {onetick} are on three different primaries
// (ShardPrefix's slot ranges), views are isolated, and a view obeys the
// whole suite with every key in its slot (a claim is one script on one
// node).
func TestShardsCluster(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	newClient := func() goredis.UniversalClient {
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), Password: c.Password()})
	}
	flush := func(t *testing.T) {
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[*redistest.ClusterNode]int{}
	for n := range 3 {
		p := redis.ShardPrefix("{onetick}", n, 3)
		node := c.PrimaryFor(p + ":leader")
		if m, ok := seen[node]; ok {
			t.Fatalf("shards %d and %d are on one primary %s", m, n, node.Addr())
		}
		seen[node] = n
	}
	h := harnessFor(newClient, flush, redis.Options{Prefix: "{onetick}"})
	backendtest.Shards(t, h)
	backendtest.Layout(t, h)
}

// TestShardViewACL: the shards' suite (views of the hash-tagged prefix
// {onetick}, as on a Cluster) as a user that may do what
// MinimalACL("{onetick}") allows and nothing more; the user cannot touch
// keys of another prefix.
func TestShardViewACL(t *testing.T) {
	srv := redistest.Start(t, redistest.DisableDefaultUser(), redistest.User("onetick", "acl-test-password", MinimalACL("{onetick}")...))
	h := harnessFor(func() goredis.UniversalClient { return goredis.NewClient(srv.UserOptions("onetick")) },
		func(t *testing.T) {
			if err := srv.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, redis.Options{Prefix: "{onetick}"})
	backendtest.Shards(t, h)
	backendtest.Layout(t, h)
	c := goredis.NewClient(srv.UserOptions("onetick"))
	defer c.Close()
	for _, k := range []string{"{other:02}:leader", "onetick:leader"} {
		if err := c.Set(context.Background(), k, "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("SET %s: %v, want NOPERM", k, err)
		}
	}
}
