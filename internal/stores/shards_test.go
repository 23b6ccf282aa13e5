package stores

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/etcdtest"
)

// TestShardWorkStore: with shards, a job's tick enqueued through its
// shard's view (ForJob) is fetched from that shard's worker store
// (ShardWorkStore) and recorded in that shard's ledger (JobLedger), not
// in another's; with one shard the worker store and the ledger are the
// store's.
func TestShardWorkStore(t *testing.T) {
	prefix := fmt.Sprintf("ot_test_stores_shards_%d_%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { dropKeys(t, prefix) })
	for _, c := range []struct {
		kind Kind
		yaml string
		o    Options
	}{
		{Memory, "backend: {memory: {}}\nshards: 4\n", Options{Memory: true}},
		{Redis, "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n    prefix: " + prefix + "\nshards: 4\n", Options{}},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			f := parse(t, c.yaml+"jobs:\n  - {name: billing, schedule: '@daily'}\n")
			h, err := Open(ctx, f, c.o)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if h.Shards() != 4 {
				t.Fatalf("Shards = %d", h.Shards())
			}
			job := f.Jobs[0]
			mine := onetick.ShardOf(job.Name, 4)
			other := (mine + 1) % 4
			view, err := h.ForJob(job.Name)
			if err != nil {
				t.Fatal(err)
			}
			if c.kind == Redis && !strings.HasPrefix(job.Stream, fmt.Sprintf("%s:%02d:", prefix, mine)) {
				t.Errorf("default stream %q is not under shard %d's prefix", job.Stream, mine)
			}
			res, err := view.Enqueue(ctx, []onetick.Tick{{Job: job.Name, Key: "k1", Stream: job.Stream, Payload: "{}",
				Retention: time.Hour, OutOfOrder: true}}, onetick.Actor{Who: "test"})
			if err != nil || res.Outcomes[0] != onetick.Claimed {
				t.Fatalf("Enqueue: %+v, %v", res, err)
			}
			ws, err := h.ShardWorkStore(mine, "g")
			if err != nil {
				t.Fatal(err)
			}
			ds, err := ws.Fetch(ctx, "c1", []string{job.Stream}, 10, 0)
			if err != nil || len(ds) != 1 || ds[0].Job != job.Name {
				t.Fatalf("Fetch from shard %d's worker store: %d deliveries, %v", mine, len(ds), err)
			}
			lg, err := h.JobLedger(job.Name)
			if err != nil {
				t.Fatal(err)
			}
			if r, ok, err := lg.Run(ctx, job.Name, onetick.TriggerID(job.Name, "k1")); err != nil || !ok {
				t.Fatalf("the job's shard's ledger: %+v %v %v", r, ok, err)
			}
			olg, err := h.ViewLedger(other)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := olg.Run(ctx, job.Name, onetick.TriggerID(job.Name, "k1")); err != nil || ok {
				t.Fatalf("shard %d's ledger has the record of shard %d's job: %v %v", other, mine, ok, err)
			}
			if _, err := h.ShardWorkStore(4, "g"); err == nil {
				t.Error("ShardWorkStore(4) of 4 shards: no error")
			}
		})
	}
}

// TestShardWorkStoreOneShard: one shard is the store itself; the file
// store has no view to give.
func TestShardWorkStoreOneShard(t *testing.T) {
	ctx := context.Background()
	h, err := Open(ctx, parse(t, "jobs: []\n"), Options{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ws, err := h.ShardWorkStore(0, "g")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := h.WorkStore("g")
	if fmt.Sprintf("%T", ws) != fmt.Sprintf("%T", want) {
		t.Errorf("ShardWorkStore(0) of one shard is a %T, WorkStore a %T", ws, want)
	}
	if _, err := h.ShardWorkStore(1, "g"); err == nil {
		t.Error("ShardWorkStore(1) on the file store: no error")
	}
	if lg, err := h.JobLedger("a"); err != nil || lg != h.Backend().(onetick.Ledger) {
		t.Errorf("JobLedger with one shard: %v, %v", lg, err)
	}
}

// TestShardsNeedMembers: a store that shards but keeps no membership of
// the fleet (etcd, for now) is refused with more than one shard, as bad
// input naming the file; one shard opens.
func TestShardsNeedMembers(t *testing.T) {
	s := etcdtest.Start(t)
	base := "backend:\n  etcd:\n    endpoints: [" + s.Endpoint() + "]\n    prefix: " + etcdtest.Prefix() + "\n"
	ctx := context.Background()
	_, err := Open(ctx, parse(t, base+"shards: 2\n"), Options{})
	var inv *InvalidError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "test.yaml: shards: 2 shards need the fleet's membership") {
		t.Fatalf("etcd with 2 shards: %v", err)
	}
	h, err := Open(ctx, parse(t, base+"shards: 1\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = h.Close()
}

// TestRedisUpkeepFoldsShards: the upkeep of a sharded Redis store folds
// every shard's run ledger, not only the store's unsharded one.
func TestRedisUpkeepFoldsShards(t *testing.T) {
	prefix := fmt.Sprintf("ot_test_stores_fold_%d_%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { dropKeys(t, prefix) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := parse(t, "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n    prefix: "+prefix+"\nshards: 4\njobs:\n  - {name: job2, schedule: '@daily'}\n")
	h, err := Open(ctx, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	view, err := h.ForJob("job2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := view.Enqueue(ctx, []onetick.Tick{{Job: "job2", Key: "k1", Stream: f.Jobs[0].Stream, Payload: "{}",
		Retention: time.Hour, OutOfOrder: true}}, onetick.Actor{Who: "test"}); err != nil {
		t.Fatal(err)
	}
	folded := fmt.Sprintf("%s:%02d:ledger:folded", prefix, onetick.ShardOf("job2", 4))
	done := make(chan struct{})
	go func() { defer close(done); h.Upkeep(ctx) }()
	defer func() { cancel(); <-done }()
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n, err := c.Exists(ctx, folded).Result(); err == nil && n == 1 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s not written within 20s: the shard's ledger was not folded", folded)
		}
	}
}
