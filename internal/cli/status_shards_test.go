package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/internal/stores"
)

// testLog writes a replica's log to the test's.
type testLog struct{ t *testing.T }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// `onetick status` over 4 shards led by two schedulers, on memory and on
// a real Redis: the shards table names each shard's leader (as the
// replicas' balancers have it), its epoch and lease, 2/4 per replica, and
// each job read from its own shard's view; the JSON has the same.
func TestStatusShards(t *testing.T) {
	const shards = 4
	prefix := fmt.Sprintf("statusshards-%d", time.Now().UnixNano())
	shardtest.DropRedisKeys(t, prefix)
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			names := shardtest.Names("j", shards, 2)
			var y strings.Builder
			fmt.Fprintf(&y, "shards: %d\n", shards)
			so := stores.Options{}
			if store == "memory" {
				y.WriteString("backend: {memory: {}}\n")
				so.Memory = true
			} else {
				fmt.Fprintf(&y, "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n    prefix: %s\n", prefix)
			}
			y.WriteString("jobs:\n")
			for _, n := range names {
				fmt.Fprintf(&y, "  - {name: %s, schedule: '@every 1s'}\n", n)
			}
			f, err := config.Parse("shards.yaml", []byte(y.String()))
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := f.OneTickJobs()
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			h, err := stores.Open(ctx, f, so)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Close() }) // after the replicas stop
			if h.Shards() != shards {
				t.Fatalf("handle: %d shards", h.Shards())
			}
			reps := shardtest.Run(t, h.Backend(), h.Shards(), jobs, slog.New(slog.NewTextHandler(&testLog{t: t}, nil)))
			for name, r := range reps {
				if holder, leading := replicaOf(r); holder != name || !leading {
					t.Errorf("replicaOf(%s) = %s, %v", name, holder, leading)
				}
			}

			st, err := readStatus(ctx, h, jobs, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Shards) != shards || st.Leader != nil || len(st.History) != 0 {
				t.Fatalf("shards %+v, leader %+v, history %+v", st.Shards, st.Leader, st.History)
			}
			for _, s := range st.Shards {
				var want string
				for name, r := range reps {
					if slices.Contains(r.Balancer().Led(), s.Shard) {
						want = name
					}
				}
				if s.Leader == nil || s.Leader.Holder != want || s.Leader.Epoch < 1 || s.Leader.TTLLeft <= 0 || s.Jobs != 2 || len(s.History) == 0 {
					t.Errorf("shard %d: %+v (leader %+v), want led by %q with 2 jobs", s.Shard, s, s.Leader, want)
				}
			}
			if len(st.Replicas) != 2 {
				t.Fatalf("replicas %+v", st.Replicas)
			}
			for _, r := range st.Replicas {
				if !slices.Equal(r.Shards, reps[r.Holder].Balancer().Led()) {
					t.Errorf("replica %s: shards %v, its balancer leads %v", r.Holder, r.Shards, reps[r.Holder].Balancer().Led())
				}
			}
			for i, j := range st.Jobs {
				if j.Name != names[i] || j.LastFired == nil {
					t.Errorf("job %d: %s, last fired %v; want %s, read from its shard", i, j.Name, j.LastFired, names[i])
				}
			}

			var out bytes.Buffer
			printStatus(&out, st)
			text := out.String()
			for _, re := range []string{
				`(?m)^shards: 4, 4 led by 2 replicas$`,
				`(?m)^  SHARD +LEADER +EPOCH +EXPIRES IN +JOBS$`,
				`(?m)^  REPLICA +LEADS +SHARDS$`,
				`(?m)^  SHARD +EPOCH +HOLDER +START +END +ENDED BY$`,
			} {
				if !regexp.MustCompile(re).MatchString(text) {
					t.Errorf("status lacks %s:\n%s", re, text)
				}
			}
			for _, s := range st.Shards {
				re := fmt.Sprintf(`(?m)^  %d +%s +%d +\d+\.\ds +2$`, s.Shard, s.Leader.Holder, s.Leader.Epoch)
				if !regexp.MustCompile(re).MatchString(text) {
					t.Errorf("status lacks shard %d's row %s:\n%s", s.Shard, re, text)
				}
			}
			for _, r := range st.Replicas {
				re := fmt.Sprintf(`(?m)^  %s +2/4 +%s$`, r.Holder, shardList(r.Shards))
				if !regexp.MustCompile(re).MatchString(text) {
					t.Errorf("status lacks replica %s's row %s:\n%s", r.Holder, re, text)
				}
			}
			if strings.Contains(text, "leader: none") {
				t.Errorf("a sharded status says no leader:\n%s", text)
			}

			var js bytes.Buffer
			if err := json.NewEncoder(&js).Encode(statusWithRuns{Status: st}); err != nil {
				t.Fatal(err)
			}
			var back struct {
				Shards []struct {
					Shard  int `json:"shard"`
					Leader *struct {
						Holder string `json:"holder"`
					} `json:"leader"`
					Jobs int `json:"jobs"`
				} `json:"shards"`
				Replicas []struct {
					Holder string `json:"holder"`
					Shards []int  `json:"shards"`
				} `json:"replicas"`
			}
			if err := json.Unmarshal(js.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if len(back.Shards) != shards || len(back.Replicas) != 2 || back.Shards[0].Leader == nil ||
				back.Shards[0].Leader.Holder != st.Shards[0].Leader.Holder || len(back.Replicas[0].Shards) != 2 {
				t.Errorf("JSON: %s", js.String())
			}
		})
	}
}

// One shard: the status is ReadStatus's, with no shards nor replicas in
// its text or its JSON.
func TestStatusOneShardUnchanged(t *testing.T) {
	f, err := config.Parse("one.yaml", []byte("backend: {memory: {}}\njobs:\n  - {name: a, schedule: '@every 1h'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := stores.Open(ctx, f, stores.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Backend().Acquire(ctx, "solo", time.Minute); err != nil {
		t.Fatal(err)
	}
	st, err := readStatus(ctx, h, jobs, 10)
	if err != nil {
		t.Fatal(err)
	}
	want, err := onetick.ReadStatus(ctx, h.Backend(), jobs, 10)
	if err != nil {
		t.Fatal(err)
	}
	st.StoreTime, want.StoreTime = time.Time{}, time.Time{}
	var got, exp bytes.Buffer
	printStatus(&got, st)
	printStatus(&exp, want)
	// The time left differs between two reads.
	left := regexp.MustCompile(`lease [0-9.]+s left`)
	if g, e := left.ReplaceAllString(got.String(), ""), left.ReplaceAllString(exp.String(), ""); g != e || !strings.HasPrefix(g, "leader: solo (epoch ") {
		t.Errorf("one shard:\n%s\nwant\n%s", got.String(), exp.String())
	}
	js, err := json.Marshal(statusWithRuns{Status: st})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), `"shards"`) || strings.Contains(string(js), `"replicas"`) {
		t.Errorf("one shard's JSON: %s", js)
	}
}
