package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/internal/shardtest"
	"github.com/onetick/onetick/redis"
)

// TestRunShards: two replicas with `shards: 4` on Redis, each with its
// worker, run every slot of four jobs (one per shard) exactly once, with
// no slot missing; both replicas lead shards. A pause from the command
// line lands in the job's shard (and not in the store's unsharded keys),
// stops that job only, and its paused slots are in the job's shard's
// ledger (`onetick runs`); a resume through the API acts on the same
// shard, and the API's control log merges the shards.
func TestRunShards(t *testing.T) {
	srv := redistest.Start(t)
	out := filepath.Join(t.TempDir(), "ran")
	// job0..job3 are in shards 1, 0, 2 and 3 of 4.
	var jobs strings.Builder
	for i := range 4 {
		fmt.Fprintf(&jobs, `  - name: job%d
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'echo "$ONETICK_TICK" >> "$OUT"']
        env: {OUT: %q}
`, i, out)
	}
	jobs.WriteString(`  - name: fails
    schedule: "@every 1h"
    run:
      command: [sh, -c, "echo boom >&2; exit 3"]
      max_attempts: 1
`)
	cfg := writeFile(t, "shards.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: sh
lease:
  ttl: 2s
shards: 4
http:
  token: %s
worker:
  takeover_idle: 3s
jobs:
%s`, srv.URL(), e2eToken, jobs.String()))
	shard := map[string]int{}
	seen := map[int]bool{}
	for i := range 4 {
		j := "job" + strconv.Itoa(i)
		shard[j] = onetick.ShardOf(j, 4)
		seen[shard[j]] = true
	}
	if len(seen) != 4 {
		t.Fatalf("the jobs are not one per shard: %v", shard)
	}
	if o, e, code := runCmd(t, nil, "validate", "--config", cfg); code != 0 || !strings.Contains(o, "ok: 5 jobs") {
		t.Fatalf("validate: %d %q %q", code, o, e)
	}

	r0 := startProc(t, "r0", "--config", cfg)
	addr := <-r0.addr
	r1 := startProc(t, "r1", "--config", cfg)
	<-r1.addr
	// Both replicas lead shards: the first takes every shard, then hands
	// the second its share.
	r0.waitEvent("became leader", 0, 30*time.Second)
	r1.waitEvent("became leader", 0, 30*time.Second)

	count := func(job string) int {
		n := 0
		for _, l := range lines(t, out) { // fails on a tick run twice
			if strings.HasPrefix(l, job+":") {
				n++
			}
		}
		return n
	}
	waitCount := func(job string, n int) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); count(job) < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s ran %d times, want %d: %q", job, count(job), n, lines(t, out))
			}
		}
	}
	for j := range shard {
		waitCount(j, 4)
	}

	// Pause job2 from the command line.
	o, e, code := runCmd(t, nil, "pause", "--config", cfg, "--reason", "shard test", "--who", "alice", "job2")
	if code != 0 || !strings.Contains(o, "paused job2") {
		t.Fatalf("pause: %d %q %q", code, o, e)
	}
	paused := count("job2")
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "sh"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	view, err := be.Shard(shard["job2"], 4)
	if err != nil {
		t.Fatal(err)
	}
	ctls, _, err := view.Controls(ctx)
	if err != nil || !ctls["job2"].Paused || ctls["job2"].Actor.Who != "alice" {
		t.Fatalf("job2's shard's controls: %+v, %v", ctls, err)
	}
	if ctls, _, err := be.Controls(ctx); err != nil || len(ctls) != 0 {
		t.Fatalf("the unsharded keys hold controls: %+v, %v", ctls, err)
	}
	other, err := be.Shard((shard["job2"]+1)%4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if ctls, _, err := other.Controls(ctx); err != nil || len(ctls) != 0 {
		t.Fatalf("another shard holds controls: %+v, %v", ctls, err)
	}
	// The others go on; job2 stops (a tick claimed before the pause may
	// still run).
	waitCount("job0", count("job0")+4)
	if n := count("job2"); n > paused+2 {
		t.Fatalf("job2 ran %d times after its pause", n-paused)
	}
	// Its paused slots are in its shard's ledger, which `runs` reads.
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		o, e, code := runCmd(t, nil, "runs", "--config", cfg, "--fate", "paused", "--json", "job2")
		var page onetick.RunPage
		if code != 0 || json.Unmarshal([]byte(o), &page) != nil {
			t.Fatalf("runs: %d %q %q", code, o, e)
		}
		if len(page.Runs) > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no paused run of job2 in its shard's ledger: %s", o)
		}
	}

	// Resume through the API: the same shard.
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/jobs/job2/resume", strings.NewReader(`{"reason":"done","who":"bob"}`))
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("resume: %d %s", resp.StatusCode, body)
	}
	if ctls, _, err := view.Controls(ctx); err != nil || ctls["job2"].Paused {
		t.Fatalf("job2's shard's controls after the resume: %+v, %v", ctls, err)
	}
	resumed := count("job2")
	waitCount("job2", resumed+2)
	// A trigger of another job lands in its shard and its worker runs it.
	o, e, code = runCmd(t, nil, "trigger", "--config", cfg, "--key", "k1", "job3")
	if code != 0 || !strings.Contains(o, "triggered job3") {
		t.Fatalf("trigger: %d %q %q", code, o, e)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		found := false
		for _, l := range lines(t, out) {
			found = found || l == onetick.TriggerID("job3", "k1")
		}
		if found {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the trigger of job3 did not run: %q", lines(t, out))
		}
	}
	// The control log merges the shards, newest first.
	resp, err = http.Get("http://" + addr + "/api/v1/controls")
	if err != nil {
		t.Fatal(err)
	}
	var recs []onetick.ControlRecord
	err = json.NewDecoder(resp.Body).Decode(&recs)
	resp.Body.Close()
	if err != nil || len(recs) != 3 || recs[0].Job != "job3" || recs[1].Action != "resume" || recs[2].Action != "pause" {
		t.Fatalf("control log: %+v, %v", recs, err)
	}

	// A dead letter of a job's shard: listed with its shard in its id,
	// replayed once.
	if o, e, code := runCmd(t, nil, "trigger", "fails", "--key", "k1", "--config", cfg); code != 0 {
		t.Fatalf("trigger: %d %s %s", code, o, e)
	}
	var deadID string
	for end := time.Now().Add(30 * time.Second); deadID == ""; time.Sleep(100 * time.Millisecond) {
		o, _, code := runCmd(t, nil, "dead", "list", "--config", cfg)
		if code == 0 && strings.Contains(o, "fails:trigger:k1") {
			deadID = strings.Fields(strings.Split(o, "\n")[1])[0]
		}
		if time.Now().After(end) {
			t.Fatal("no dead letter within 30s")
		}
	}
	if want := fmt.Sprintf("%02d/", onetick.ShardOf("fails", 4)); !strings.HasPrefix(deadID, want) {
		t.Fatalf("dead letter id %q does not start with its shard %q", deadID, want)
	}
	resp, err = http.Get("http://" + addr + "/api/v1/jobs/fails/dead")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), deadID) {
		t.Fatalf("the API's dead letters of fails: %d %s", resp.StatusCode, body)
	}
	if o, e, code := runCmd(t, nil, "dead", "replay", deadID, "--config", cfg); code != 0 || !strings.Contains(o, "fails:trigger:k1") {
		t.Fatalf("replay: %d %s %s", code, o, e)
	}
	if _, e, code := runCmd(t, nil, "dead", "replay", deadID, "--config", cfg); code != 2 || !strings.Contains(e, "no dead letter") {
		t.Fatalf("second replay of the same id: %d %s", code, e)
	}

	// Every job's slots ran once (lines fails on a repeat) and none is
	// missing between the first and the last seen (job2: while paused).
	byJob := map[string][]int64{}
	for _, l := range lines(t, out) {
		job, slot, ok := strings.Cut(l, ":")
		ms, err := strconv.ParseInt(slot, 10, 64)
		if !ok || err != nil {
			continue // a trigger's tick
		}
		byJob[job] = append(byJob[job], ms)
	}
	for _, j := range []string{"job0", "job1", "job3"} {
		s := byJob[j]
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		for i := 1; i < len(s); i++ {
			if s[i]-s[i-1] != 1000 {
				t.Errorf("%s: slot %d follows %d: a slot is missing", j, s[i], s[i-1])
			}
		}
	}
}

// TestRunShardsOnCluster: on a Redis Cluster of three primaries, `shards:
// 3` runs each job's slots from its shard's slot: the default streams are
// under each shard's tag, and a job's own stream named with the tag the
// topology check suggests is accepted and worked; a stream in another
// slot is refused by validate and run alike (exit 2), naming the tag.
func TestRunShardsOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterOptions{})
	out := filepath.Join(t.TempDir(), "ran")
	tag := redis.ShardPrefix("{onetick}", onetick.ShardOf("own", 3), 3)
	head := fmt.Sprintf(`backend:
  redis:
    cluster:
      addrs: [%s]
lease:
  ttl: 2s
shards: 3
jobs:
`, strings.Join(cl.Addrs(), ", "))
	job := func(name, stream string) string {
		s := fmt.Sprintf(`  - name: %s
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'echo "$ONETICK_TICK" >> "$OUT"']
        env: {OUT: %q}
`, name, out)
		if stream != "" {
			s += "    stream: '" + stream + "'\n"
		}
		return s
	}
	bad := writeFile(t, "bad.yaml", head+job("own", "{onetick}:own"))
	_, stderr, code := runCmd(t, nil, "validate", "--config", bad)
	if code != 2 || !strings.Contains(stderr, "name it like "+tag+":own") {
		t.Fatalf("validate of a stream outside its shard's slot: %d %q", code, stderr)
	}
	if code, rerr := runChecked(t, nil, "--config", bad); code != 2 {
		t.Fatalf("run of a stream outside its shard's slot: exit %d\n%s", code, rerr)
	}

	var names []string
	var jobs strings.Builder
	for i := range 3 {
		names = append(names, "job"+strconv.Itoa(i))
		jobs.WriteString(job(names[i], ""))
	}
	jobs.WriteString(job("own", tag+":own"))
	names = append(names, "own")
	cfg := writeFile(t, "cluster.yaml", head+jobs.String())
	if o, e, code := runCmd(t, nil, "validate", "--config", cfg); code != 0 {
		t.Fatalf("validate: %d %q %q", code, o, e)
	}
	p := startProc(t, "r0", "--config", cfg)
	<-p.addr
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := map[string]int{}
		for _, l := range lines(t, out) {
			j, _, _ := strings.Cut(l, ":")
			n[j]++
		}
		done := true
		for _, j := range names {
			done = done && n[j] >= 2
		}
		if done {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("not every job ran twice within 30s: %v", n)
		}
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs()})
	defer c.Close()
	ctx := context.Background()
	for _, j := range names[:3] {
		stream := redis.ShardPrefix("{onetick}", onetick.ShardOf(j, 3), 3) + ":stream:" + j
		if n, err := c.XLen(ctx, stream).Result(); err != nil || n == 0 {
			t.Errorf("%s: stream %s has %d entries (%v)", j, stream, n, err)
		}
	}
	if n, err := c.XLen(ctx, tag+":own").Result(); err != nil || n == 0 {
		t.Errorf("own: stream %s has %d entries (%v)", tag+":own", n, err)
	}
}

// TestRepairShards: `onetick repair` with shards inspects every shard's
// view: damage in one shard's keys is found, moved aside with --apply
// through that shard, and gone after.
func TestRepairShards(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "repair.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: rs
shards: 4
jobs:
  - {name: job0, schedule: "@every 1s"}
  - {name: job2, schedule: "@every 1s"}
`, srv.URL()))
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "rs"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Client().Set(context.Background(), "rs:02:ledger:log", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	o, e, code := runCmd(t, nil, "repair", "--config", cfg)
	if code != 1 || !strings.Contains(o, "rs:02:ledger:log") {
		t.Fatalf("repair: %d %q %q", code, o, e)
	}
	o, e, code = runCmd(t, nil, "repair", "--config", cfg, "--apply")
	if code != 0 || !strings.Contains(o, "moved rs:02:ledger:log to ") {
		t.Fatalf("repair --apply: %d %q %q", code, o, e)
	}
	o, e, code = runCmd(t, nil, "repair", "--config", cfg)
	if code != 0 || !strings.Contains(o, "no damaged store state found") {
		t.Fatalf("repair after: %d %q %q", code, o, e)
	}
}

// TestRunRefusesAnotherLayout: the store records the fleet's shard count
// (onetick.Layouter); a replica configured with another count exits 2
// naming the shards line, before it serves or fires anything.
func TestRunRefusesAnotherLayout(t *testing.T) {
	prefix := fmt.Sprintf("layout-%d", time.Now().UnixNano())
	b, err := redis.Open("redis://127.0.0.1:6379/0", redis.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	shardtest.DropRedisKeys(t, prefix)
	if err := b.Layout(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, shards, want string }{
		{"two", "shards: 2\n", ":5: shards: configured 2, but the store holds the layout of 4 shard(s)"},
		{"default", "", ": shards: configured 1, but the store holds the layout of 4 shard(s)"},
	} {
		path := writeFile(t, tc.name+".yaml", fmt.Sprintf("backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n    prefix: %s\n%sjobs:\n  - {name: a, schedule: '@every 1s'}\n", prefix, tc.shards))
		code, stderr := runChecked(t, nil, "--config", path)
		if code != 2 || !strings.Contains(stderr, path+tc.want) {
			t.Errorf("%s on a 4-shard store: exit %d, want 2 and %q in\n%s", tc.name, code, path+tc.want, stderr)
		}
	}
}
