package web_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/internal/web"
	"github.com/onetick/onetick/memory"
	otredis "github.com/onetick/onetick/redis"
)

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
	shardtest.DropRedisKeys(t, prefix)
	for _, tc := range []struct {
		name string
		b    interface {
			onetick.Backend
			onetick.Sharder
		}
	}{{"memory", mem}, {"redis", rb}} {
		t.Run(tc.name, func(t *testing.T) {
			var jobs []onetick.Job
			for _, n := range shardtest.Names("w", shards, 3) {
				jobs = append(jobs, onetick.Job{Name: n, Schedule: shardtest.Every(200 * time.Millisecond)})
			}
			reps := shardtest.Run(t, tc.b, shards, jobs, nil)
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
