// Package shardtest runs sharded schedulers for the tests of the packages
// that read a sharded fleet (status, the page): job names spread over the
// shards, and two replicas that share them.
package shardtest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// Every fires every d (a whole multiple of d since the epoch).
type Every time.Duration

// Next implements onetick.Schedule.
func (e Every) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(e)).Add(time.Duration(e))
}

// Names returns perShard job names (prefix-N) in each of shards shards.
func Names(prefix string, shards, perShard int) []string {
	count := make([]int, shards)
	var names []string
	for i := 0; len(names) < shards*perShard; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if s := onetick.ShardOf(name, shards); count[s] < perShard {
			count[s]++
			names = append(names, name)
		}
	}
	return names
}

// Run runs replicas "a" and "b" over b with shards shards (an even
// number) until each leads half of them and every job has fired, and
// returns them by name; they stop at the test's end. A replica whose Run
// fails fails the test. log receives the replicas' logs (nil: none).
func Run(t *testing.T, b onetick.SchedulerBackend, shards int, jobs []onetick.Job, log *slog.Logger) map[string]*onetick.Scheduler {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var mu sync.Mutex
	fired := map[string]bool{}
	changed := make(chan struct{}, 1)
	sink := onetick.SinkFunc(func(_ context.Context, ticks []onetick.TickRecord) error {
		mu.Lock()
		for _, tk := range ticks {
			fired[tk.Job] = true
		}
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
		return nil
	})
	out := map[string]*onetick.Scheduler{}
	for _, name := range []string{"a", "b"} {
		s, err := onetick.New(onetick.Config{Backend: b, Replica: name, Jobs: jobs, Shards: shards, Sink: sink,
			Lease:  onetick.LeaseConfig{TTL: 3 * time.Second, Renew: 500 * time.Millisecond},
			Logger: log.With("test_replica", name)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := s.Run(ctx); err != nil {
				t.Errorf("%s: Run: %v", name, err)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		out[name] = s
	}
	firedAll := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, j := range jobs {
			if fired[j.Name] {
				n++
			}
		}
		return n
	}
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for firedAll() < len(jobs) || len(out["a"].Balancer().Led()) != shards/2 || len(out["b"].Balancer().Led()) != shards/2 {
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting until the shards spread evenly and every job fired: a leads %v, b leads %v, %d of %d jobs fired",
				out["a"].Balancer().Led(), out["b"].Balancer().Led(), firedAll(), len(jobs))
		}
	}
	return out
}

// DropRedisKeys deletes, when the test ends, every key of the Redis at
// 127.0.0.1:6379 whose name holds prefix (a test's own, unique prefix;
// a shard's hash tag puts it after a "{").
func DropRedisKeys(t *testing.T, prefix string) {
	t.Cleanup(func() {
		c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
		defer c.Close()
		ctx := context.Background()
		keys, err := c.Keys(ctx, "*"+prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = c.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Logf("dropping %s keys: %v", prefix, err)
		}
	})
}
