package web_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/web"
	"github.com/onetick/onetick/memory"
	otredis "github.com/onetick/onetick/redis"
)

// everyMs fires every d.
type everyMs time.Duration

func (e everyMs) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(e)).Add(time.Duration(e))
}

// runShardReplicas runs replicas a and b over b with shards shards until
// each leads half and every job fired; they stop at the test's end.
func runShardReplicas(t *testing.T, b onetick.SchedulerBackend, shards int, jobs []onetick.Job) map[string]*onetick.Scheduler {
	t.Helper()
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
			Logger: slog.New(slog.DiscardHandler)})
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
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		mu.Lock()
		all := len(fired) == len(jobs)
		mu.Unlock()
		if all && len(out["a"].Balancer().Led()) == shards/2 && len(out["b"].Balancer().Led()) == shards/2 {
			return out
		}
		select {
		case <-changed:
		case <-deadline.C:
			mu.Lock()
			n := len(fired)
			mu.Unlock()
			t.Fatalf("timed out waiting until the shards spread evenly and every job fired: a leads %v, b leads %v, %d of %d jobs fired",
				out["a"].Balancer().Led(), out["b"].Balancer().Led(), n, len(jobs))
		}
	}
}

// The page of a fleet of 4 shards led by two schedulers, on memory and a
// real Redis: the Store reads each shard's lease through its view, the
// page shows "who leads which shard" (leader, epoch, lease, jobs of each
// shard, every job's, not the page's) and 2/4 per replica, and each job
// read from its shard's view.
func TestStoreShards(t *testing.T) {
	const shards = 4
	mem := memory.New(memory.Options{})
	defer mem.Close()
	prefix := fmt.Sprintf("webshards-%d", time.Now().UnixNano())
	rb, err := otredis.Open("redis://127.0.0.1:6379/0", otredis.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	defer func() {
		c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
		defer c.Close()
		if keys, err := c.Keys(context.Background(), "*"+prefix+"*").Result(); err == nil && len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	}()
	for _, tc := range []struct {
		name string
		b    interface {
			onetick.Backend
			onetick.Sharder
		}
	}{{"memory", mem}, {"redis", rb}} {
		t.Run(tc.name, func(t *testing.T) {
			count := make([]int, shards)
			var jobs []onetick.Job
			for i := 0; len(jobs) < 3*shards; i++ {
				n := fmt.Sprintf("w-%d", i)
				if s := onetick.ShardOf(n, shards); count[s] < 3 {
					count[s]++
					jobs = append(jobs, onetick.Job{Name: n, Schedule: everyMs(200 * time.Millisecond)})
				}
			}
			reps := runShardReplicas(t, tc.b, shards, jobs)
			views := make([]onetick.Backend, shards)
			for i := range views {
				if views[i], err = tc.b.Shard(i, shards); err != nil {
					t.Fatal(err)
				}
			}
			s := &web.Store{Backend: tc.b, Views: views, Jobs: jobs, PageSize: 5,
				Replica: func() web.Replica { return web.Replica{Name: "a"} }}
			p, err := s.Page(context.Background(), web.Query{Page: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Shards) != shards || p.LedShards() != shards || len(p.Replicas) != 2 || p.Leader != nil {
				t.Fatalf("shards %+v, replicas %+v, leader %+v", p.Shards, p.Replicas, p.Leader)
			}
			for _, sh := range p.Shards {
				if sh.Leader == nil || !slices.Contains(reps[sh.Leader.Holder].Balancer().Led(), sh.Shard) || sh.Jobs != 3 {
					t.Errorf("shard %d: %+v", sh.Shard, sh)
				}
			}
			if len(p.Jobs) != 5 {
				t.Fatalf("page of 5: %d rows", len(p.Jobs))
			}
			for _, j := range p.Jobs {
				if j.LastFired == nil {
					t.Errorf("job %s: not read from its shard's view", j.Name)
				}
			}
			var out bytes.Buffer
			if err := web.Render(&out, p); err != nil {
				t.Fatal(err)
			}
			html := out.String()
			for _, sh := range p.Shards {
				re := fmt.Sprintf(`(?s)<tr data-shard="%d">.*?<span class="holder">%s</span>.*?<div class="mono">%d</div>.*?<div>3</div>`,
					sh.Shard, sh.Leader.Holder, sh.Leader.Epoch)
				if !regexp.MustCompile(re).MatchString(html) {
					t.Errorf("no row for shard %d led by %s (epoch %d)", sh.Shard, sh.Leader.Holder, sh.Leader.Epoch)
				}
			}
			for _, r := range p.Replicas {
				re := fmt.Sprintf(`(?s)<tr data-replica="%s">.*?<div class="leads">2/4</div>`, r.Holder)
				if !regexp.MustCompile(re).MatchString(html) {
					t.Errorf("no row for replica %s leading 2/4", r.Holder)
				}
			}
			for _, want := range []string{`<title>4/4 shards led · onetick</title>`, `<h2>Who leads which shard</h2>`, `<span id="shards-led">4</span>`} {
				if !strings.Contains(html, want) {
					t.Errorf("page lacks %s", want)
				}
			}
			if strings.Contains(html, `id="terms"`) || strings.Contains(html, `no leader`) {
				t.Error("a sharded page shows one lease's leader or terms")
			}
		})
	}
}

// One shard: the page has no shards table, as before.
func TestRenderNoShards(t *testing.T) {
	var out bytes.Buffer
	if err := web.Render(&out, &web.Page{StoreTime: t0, Leader: &onetick.LeaderView{Holder: "solo", Epoch: 3, TTLLeft: 2}}); err != nil {
		t.Fatal(err)
	}
	html := out.String()
	if strings.Contains(html, `id="shards"`) || !strings.Contains(html, `<title>solo leads · onetick</title>`) || !strings.Contains(html, `id="terms"`) {
		t.Errorf("one shard's page:\n%s", html)
	}
}
