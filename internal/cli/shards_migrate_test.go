package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
)

// TestShardsMigrateRedis: on the Redis at 127.0.0.1:6379 under a prefix of
// its own, a one-shard fleet's state (last-fired slots claimed through
// the store, a pause, a pause resumed, a run-time job) is migrated to 4
// shards (refused while the lease is held; the dry run changes nothing),
// then 4 -> 2 and 2 -> 1. After each, every job's last-fired slot and
// controls are in its new shard's view, the stored count and the
// one-shard lease's tombstone are the new layout's; a 4-shard scheduler
// resumes from the copied slots (prefer: duplicate: no slot twice, none
// skipped), a 1-shard one is refused.
func TestShardsMigrateRedis(t *testing.T) {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { _ = client.Close() })
	prefix := fmt.Sprintf("otmig%d", time.Now().UnixNano())
	shardtest.DropRedisKeys(t, prefix)
	var jobsYAML strings.Builder
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("job%d", i)
		fmt.Fprintf(&jobsYAML, "  - {name: %s, schedule: \"@every 1s\", prefer: duplicate}\n", names[i])
	}
	cfg := writeConfig(t, fmt.Sprintf("backend:\n  redis:\n    url: redis://127.0.0.1:6379\n    prefix: %s\njobs:\n%s", prefix, jobsYAML.String()))
	migrate := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(ctx, append([]string{"shards", "migrate", "--config", cfg}, args...), Env{Stdout: &out, Stderr: &errOut})
		return code, out.String(), errOut.String()
	}
	b := otredis.New(client, otredis.Options{Prefix: prefix})
	all := append([]string{"rt1"}, names...)
	if _, err := b.ApplyJobs(ctx, "rt", []onetick.StoredJob{{Name: "rt1", Def: []byte(`{"name":"rt1","schedule":"@every 1h"}`)}}, false); err != nil {
		t.Fatal(err)
	}

	// A one-shard fleet's state, through the store (the view of shard 0 of 1).
	g, err := b.Acquire(ctx, "old-fleet", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.Slot(now.UnixMilli()/1000*1000 - 3000)
	for _, j := range all {
		res, err := b.Claim(ctx, g.Lease, []onetick.Tick{{Job: j, Slot: s0, Stream: prefix + ":stream:" + j, Payload: "{}", Retention: time.Hour}})
		if err != nil || res.Outcomes[0] != onetick.Claimed {
			t.Fatalf("claim %s: %v %v", j, res.Outcomes, err)
		}
	}
	paused, err := b.Pause(ctx, "job1", onetick.Actor{Who: "alice", Reason: "maintenance"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pause(ctx, "job2", onetick.Actor{Who: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resume(ctx, "job2", onetick.Actor{Who: "bob"}); err != nil {
		t.Fatal(err)
	}
	ctl0, _, err := b.Controls(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Bad input.
	for _, args := range [][]string{{"--to", "0"}, {"--to", "257"}, {"--to", "2", "extra"}} {
		if code, _, _ := migrate(args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
	var eout bytes.Buffer
	if code := Main(ctx, []string{"shards"}, Env{Stdout: io.Discard, Stderr: &eout}); code != ExitUsage || !strings.Contains(eout.String(), "shards migrate") {
		t.Errorf("shards alone: exit %d, %q", code, eout.String())
	}
	for body, want := range map[string]string{
		"jobs:\n  - {name: a, schedule: \"@every 1h\"}\n":                                                             "embedded store",
		"backend:\n  etcd:\n    endpoints: [\"http://127.0.0.1:1\"]\njobs:\n  - {name: a, schedule: \"@every 1h\"}\n": "uses etcd",
	} {
		eout.Reset()
		if code := Main(ctx, []string{"shards", "migrate", "--config", writeConfig(t, body), "--to", "2"}, Env{Stdout: io.Discard, Stderr: &eout}); code != ExitUsage || !strings.Contains(eout.String(), want) {
			t.Errorf("%s: exit %d, %q", want, code, eout.String())
		}
	}

	// Refused while the one-shard lease is held; nothing written.
	code, out, errOut := migrate("--to", "4", "--apply")
	if code != ExitFailure || !strings.Contains(errOut, `"old-fleet"`) || !strings.Contains(errOut, prefix+":leader") {
		t.Fatalf("migrate with the lease held: exit %d\n%s\n%s", code, out, errOut)
	}
	if n, _ := client.Exists(ctx, prefix+":shards").Result(); n != 0 {
		t.Fatal("a refused migration recorded a count")
	}
	if err := b.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}

	// The dry run prints the plan and changes nothing.
	code, out, errOut = migrate("--to", "4")
	if code != ExitOK || !strings.Contains(out, "1 -> 4") || !strings.Contains(out, "would copy") || !strings.Contains(out, "dry run") ||
		!strings.Contains(out, "not copied") || !strings.Contains(out, prefix+":stream:job0 -> "+otredis.ShardPrefix(prefix, onetick.ShardOf("job0", 4), 4)+":stream:job0") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errOut)
	}
	if n, _ := client.Exists(ctx, prefix+":shards").Result(); n != 0 {
		t.Fatal("the dry run recorded a count")
	}
	for _, j := range all {
		if got := lastIn(t, ctx, b, j, 4); got != 0 {
			t.Fatalf("the dry run copied %s's last-fired slot (%s)", j, got)
		}
	}

	// 1 -> 4.
	code, out, errOut = migrate("--to", "4", "--apply")
	if code != ExitOK || !strings.Contains(out, "copied") || !strings.Contains(out, "migrated") {
		t.Fatalf("migrate 1 -> 4: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Log(out)
	want := map[string]onetick.Slot{}
	for _, j := range all {
		want[j] = s0
	}
	checkLayout(t, ctx, client, b, prefix, 4)
	checkMoved(t, ctx, b, all, 4, want, ctl0)
	if code, out, _ := migrate("--to", "4", "--apply"); code != ExitOK || !strings.Contains(out, "nothing to do") {
		t.Errorf("migrate again: exit %d, %s", code, out)
	}

	// A 1-shard scheduler is refused; a 4-shard one resumes.
	c, err := check(cfg, overrides{}, Env{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	one, err := onetick.New(onetick.Config{Backend: b, Replica: "one", Jobs: c.jobs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Run(ctx); !errors.Is(err, onetick.ErrLayout) {
		t.Fatalf("a 1-shard scheduler after 1 -> 4: Run = %v, want a layout error", err)
	}
	fired := map[string][]onetick.Slot{}
	var mu sync.Mutex
	changed := make(chan struct{}, 1)
	four, err := onetick.New(onetick.Config{Backend: b, Replica: "four", Jobs: c.jobs, Shards: 4, Logger: log,
		Lease: onetick.LeaseConfig{TTL: 3 * time.Second, Renew: 500 * time.Millisecond},
		Sink: onetick.SinkFunc(func(_ context.Context, ticks []onetick.TickRecord) error {
			mu.Lock()
			for _, tk := range ticks {
				fired[tk.Job] = append(fired[tk.Job], tk.Slot)
			}
			mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- four.Run(rctx) }()
	target := s0 + 6000
	deadline := time.After(90 * time.Second)
	for {
		mu.Lock()
		ok := true
		for _, j := range names {
			if j == "job1" {
				continue
			}
			if s := fired[j]; len(s) == 0 || s[len(s)-1] < target {
				ok = false
			}
		}
		mu.Unlock()
		if ok {
			break
		}
		select {
		case <-changed:
		case err := <-done:
			t.Fatalf("the 4-shard scheduler stopped: %v", err)
		case <-deadline:
			mu.Lock()
			t.Fatalf("the 4-shard scheduler did not fire up to %s: %v", target, fired)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("4-shard Run: %v", err)
	}
	pauseSince := onetick.Slot(paused.Intervals[len(paused.Intervals)-1].Since.UnixMilli())
	for _, j := range names {
		s := append([]onetick.Slot(nil), fired[j]...)
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		if j == "job1" {
			for _, x := range s {
				if x <= s0 || x >= pauseSince {
					t.Errorf("paused job1 fired %s (last-fired %s, paused since %s)", x, s0, pauseSince)
				}
			}
			continue
		}
		for i, x := range s {
			if x != s0+onetick.Slot(1000*(i+1)) {
				t.Fatalf("%s fired %v after the migration: want every slot from %s on, once", j, s, s0+1000)
			}
		}
	}

	// 4 -> 2, refused first while a shard's lease is held.
	last4 := map[string]onetick.Slot{}
	for _, j := range all {
		last4[j] = lastIn(t, ctx, b, j, 4)
	}
	ctl4 := controlsIn(t, ctx, b, all, 4)
	v3, err := b.Shard(3, 4)
	if err != nil {
		t.Fatal(err)
	}
	g3, err := v3.Acquire(ctx, "replica-x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = migrate("--to", "2", "--apply")
	if code != ExitFailure || !strings.Contains(errOut, "shard 3 of 4") || !strings.Contains(errOut, `"replica-x"`) {
		t.Fatalf("4 -> 2 with shard 3's lease held: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := v3.Release(ctx, g3.Lease); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = migrate("--to", "2", "--apply")
	if code != ExitOK {
		t.Fatalf("migrate 4 -> 2: exit %d\n%s\n%s", code, out, errOut)
	}
	checkLayout(t, ctx, client, b, prefix, 2)
	checkMoved(t, ctx, b, all, 2, last4, ctl4)

	// 2 -> 1.
	code, out, errOut = migrate("--to", "1", "--apply")
	if code != ExitOK {
		t.Fatalf("migrate 2 -> 1: exit %d\n%s\n%s", code, out, errOut)
	}
	checkLayout(t, ctx, client, b, prefix, 1)
	checkMoved(t, ctx, b, all, 1, last4, ctl4)
}

// checkLayout: the stored count is n, the store takes n shards and
// refuses others, and the one-shard lease is the tombstone of n (none
// with one shard).
func checkLayout(t *testing.T, ctx context.Context, client *goredis.Client, b *otredis.Backend, prefix string, n int) {
	t.Helper()
	if got, err := client.Get(ctx, prefix+":shards").Result(); err != nil || got != fmt.Sprint(n) {
		t.Errorf("%s:shards = %q, %v; want %d", prefix, got, err, n)
	}
	if err := b.Layout(ctx, n); err != nil {
		t.Errorf("Layout(%d) after the migration: %v", n, err)
	}
	other := 3
	if err := b.Layout(ctx, other); !errors.Is(err, onetick.ErrLayout) {
		t.Errorf("Layout(%d) after the migration to %d: %v, want a layout error", other, n, err)
	}
	li, err := b.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case n > 1 && (!li.Held || li.Lease.Holder != onetick.LayoutHolder(n) || li.TTL < 24*time.Hour):
		t.Errorf("one-shard lease after the migration to %d: %+v, want held for %s", n, li, onetick.LayoutHolder(n))
	case n == 1 && li.Held:
		t.Errorf("one-shard lease after the migration to 1: %+v, want none", li)
	}
}

// checkMoved: each job's last-fired slot in its shard's view of shards is
// want's (absent when want has none) and its controls are ctl's.
func checkMoved(t *testing.T, ctx context.Context, b *otredis.Backend, jobs []string, shards int, want map[string]onetick.Slot, ctl map[string]onetick.JobControl) {
	t.Helper()
	for _, j := range jobs {
		if got := lastIn(t, ctx, b, j, shards); got != want[j] {
			t.Errorf("%s's last-fired slot in shard %d of %d: %d, want %d", j, onetick.ShardOf(j, shards), shards, got, want[j])
		}
	}
	if ctl == nil {
		return
	}
	got := controlsIn(t, ctx, b, jobs, shards)
	for _, j := range jobs {
		g, w := got[j], ctl[j]
		if g.Paused != w.Paused || g.Actor != w.Actor || !g.At.Equal(w.At) || fmt.Sprint(g.Intervals) != fmt.Sprint(w.Intervals) {
			t.Errorf("%s's controls in shard %d of %d: %+v, want %+v", j, onetick.ShardOf(j, shards), shards, g, w)
		}
	}
	if !got["job1"].Paused || got["job1"].Actor.Who != "alice" || got["job2"].Paused || got["job2"].Actor.Who != ctl["job2"].Actor.Who {
		t.Errorf("controls after the migration to %d: job1 %+v, job2 %+v", shards, got["job1"], got["job2"])
	}
}

func view(t *testing.T, b *otredis.Backend, job string, shards int) *otredis.Backend {
	t.Helper()
	v, err := b.Shard(onetick.ShardOf(job, shards), shards)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*otredis.Backend)
}

func lastIn(t *testing.T, ctx context.Context, b *otredis.Backend, job string, shards int) onetick.Slot {
	t.Helper()
	m, err := view(t, b, job, shards).LastFired(ctx, []string{job})
	if err != nil {
		t.Fatal(err)
	}
	return m[job]
}

func controlsIn(t *testing.T, ctx context.Context, b *otredis.Backend, jobs []string, shards int) map[string]onetick.JobControl {
	t.Helper()
	out := map[string]onetick.JobControl{}
	for _, j := range jobs {
		c, _, err := view(t, b, j, shards).Controls(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if x, ok := c[j]; ok {
			out[j] = x
		}
	}
	return out
}

// TestShardsMigratePostgres: PostgreSQL's layouts share every job's rows,
// so the migration only records the count, once no shard's lease is held.
func TestShardsMigratePostgres(t *testing.T) {
	ctx := context.Background()
	cfg := writeConfig(t, fmt.Sprintf("backend:\n  postgres:\n    url: %s\n    schema: %s\njobs:\n  - {name: a, schedule: \"@every 1h\"}\n", pgtest.URL(), pgtest.Schema(t)))
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(ctx, append(args, "--config", cfg), Env{Stdout: &out, Stderr: &errOut})
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := run("migrate"); code != ExitOK {
		t.Fatalf("migrate: %d %s %s", code, out, errOut)
	}
	if code, out, _ := run("shards", "migrate", "--to", "3"); code != ExitOK || !strings.Contains(out, "nothing is copied") {
		t.Fatalf("dry run: %d %s", code, out)
	}
	if code, out, errOut := run("shards", "migrate", "--to", "3", "--apply"); code != ExitOK || !strings.Contains(out, "recorded") {
		t.Fatalf("--to 3: %d %s %s", code, out, errOut)
	}
	c, err := check(cfg, overrides{}, Env{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	h, err := openStore(ctx, c.f, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pg := h.Backend().(*postgres.Backend)
	if err := pg.Layout(ctx, 3); err != nil {
		t.Fatalf("Layout(3) after the migration: %v", err)
	}
	v, err := pg.Shard(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Acquire(ctx, "replica-y", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("shards", "migrate", "--to", "2", "--apply"); code != ExitFailure || !strings.Contains(errOut, "refused") {
		t.Fatalf("--to 2 with a lease held: %d %s %s", code, out, errOut)
	}
	if err := v.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("shards", "migrate", "--to", "2", "--apply"); code != ExitOK {
		t.Fatalf("--to 2: %d %s %s", code, out, errOut)
	}
	if err := pg.Layout(ctx, 2); err != nil {
		t.Fatalf("Layout(2) after the migration: %v", err)
	}
}

// TestShardsMigrateRerun: a migration interrupted before its commit
// leaves the old layout's leases to the migration's holder (refused,
// saying so, until they expire) and part of the copy written; run again,
// it makes each new view equal to the old one (a stale value overwritten,
// a field the old view lacks deleted).
func TestShardsMigrateRerun(t *testing.T) {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { _ = client.Close() })
	prefix := fmt.Sprintf("otmigre%d", time.Now().UnixNano())
	shardtest.DropRedisKeys(t, prefix)
	cfg := writeConfig(t, fmt.Sprintf("backend:\n  redis:\n    url: redis://127.0.0.1:6379\n    prefix: %s\njobs:\n  - {name: a, schedule: \"@every 1h\"}\n  - {name: b, schedule: \"@every 1h\"}\n", prefix))
	b := otredis.New(client, otredis.Options{Prefix: prefix})
	client.HSet(ctx, prefix+":last", "a", "3600000")
	// What an interrupted run left: its lease, and a copy of b's state
	// that the old view no longer has (b resumed and its field removed
	// since, say), and a stale slot of a.
	g, err := b.Acquire(ctx, "onetick-shards-migrate:2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pa := otredis.ShardPrefix(prefix, onetick.ShardOf("a", 2), 2)
	pb := otredis.ShardPrefix(prefix, onetick.ShardOf("b", 2), 2)
	client.HSet(ctx, pa+":last", "a", "1")
	client.HSet(ctx, pb+":paused", "b", "5:")
	var out, errOut bytes.Buffer
	code := Main(ctx, []string{"shards", "migrate", "--config", cfg, "--to", "2", "--apply"}, Env{Stdout: &out, Stderr: &errOut})
	if code != ExitFailure || !strings.Contains(errOut.String(), "interrupted") {
		t.Fatalf("with the interrupted run's lease: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if err := b.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := Main(ctx, []string{"shards", "migrate", "--config", cfg, "--to", "2", "--apply"}, Env{Stdout: &out, Stderr: &errOut}); code != ExitOK {
		t.Fatalf("run again: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if got := client.HGet(ctx, pa+":last", "a").Val(); got != "3600000" {
		t.Errorf("a's last-fired slot in %s: %q, want the old view's", pa, got)
	}
	if n := client.HExists(ctx, pb+":paused", "b").Val(); n {
		t.Errorf("b's stale pause in %s was kept", pb)
	}
}
