package cli

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/worker"
)

// shardedHandle opens the in-process store with four shards and the jobs
// job0..job3 (one per shard), each with a run block (HTTP: the command
// executor needs the supervisor set up in main).
func shardedHandle(t *testing.T) (*config.File, []onetick.Job, *stores.Handle) {
	t.Helper()
	var doc strings.Builder
	doc.WriteString("backend: {memory: {}}\nshards: 4\njobs:\n")
	for _, j := range []string{"job0", "job1", "job2", "job3"} {
		doc.WriteString("  - {name: " + j + ", schedule: '@every 1s', run: {http: {url: 'https://example.invalid/x', secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u]}}}\n")
	}
	f, err := config.Parse("shards.yaml", []byte(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	h, err := stores.Open(context.Background(), f, stores.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return f, jobs, h
}

// TestShardedAPI: the API's pause lands in the job's shard only; the
// control log and the jobs' states merge the shards.
func TestShardedAPI(t *testing.T) {
	f, jobs, h := shardedHandle(t)
	f.HTTP.Token = testToken
	shards, err := newFleetOps(h, func(v onetick.Backend) *onetick.Ops { return &onetick.Ops{Backend: v, Jobs: jobs} })
	if err != nil {
		t.Fatal(err)
	}
	a := &api{ops: &onetick.Ops{Backend: h.Backend(), Jobs: jobs}, shards: shards, http: f.HTTP,
		log: slog.New(slog.DiscardHandler), file: f, store: h}
	mux := http.NewServeMux()
	a.register(mux)
	for _, j := range []string{"job2", "job0"} {
		if code, body := do(mux, "POST", "/api/v1/jobs/"+j+"/pause", "127.0.0.1:1", "Bearer "+testToken, `{"reason":"r `+j+`"}`); code != 200 {
			t.Fatalf("pause %s: %d %s", j, code, body)
		}
	}
	ctx := context.Background()
	for n := range 4 {
		v, _ := h.View(n)
		ctls, _, err := v.Controls(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range []string{"job0", "job2"} {
			if want := onetick.ShardOf(j, 4) == n; ctls[j].Paused != want {
				t.Errorf("shard %d: %s paused %v, want %v", n, j, ctls[j].Paused, want)
			}
		}
	}
	code, body := do(mux, "GET", "/api/v1/controls", "127.0.0.1:1", "", "")
	var recs []onetick.ControlRecord
	if code != 200 || json.Unmarshal([]byte(body), &recs) != nil || len(recs) != 2 || recs[0].Job != "job0" || recs[1].Job != "job2" {
		t.Fatalf("controls: %d %s", code, body)
	}
	code, body = do(mux, "GET", "/api/v1/jobs", "127.0.0.1:1", "", "")
	var states []onetick.JobStatus
	if code != 200 || json.Unmarshal([]byte(body), &states) != nil || len(states) != 4 {
		t.Fatalf("jobs: %d %s", code, body)
	}
	for _, s := range states {
		if paused := s.Paused != nil; paused != (s.Name == "job0" || s.Name == "job2") {
			t.Errorf("%s: paused %v", s.Name, paused)
		}
	}
	if code, body := do(mux, "POST", "/api/v1/jobs/nope/pause", "127.0.0.1:1", "Bearer "+testToken, `{"reason":"x"}`); code != 404 {
		t.Fatalf("pause of an unknown job: %d %s", code, body)
	}
	// The dead letters of every shard: none yet; a cursor or an id that
	// names no shard is refused.
	code, body = do(mux, "GET", "/api/v1/jobs/job1/dead", "127.0.0.1:1", "", "")
	if code != 200 || !strings.Contains(body, `"dead":[]`) {
		t.Fatalf("dead letters: %d %s", code, body)
	}
	if code, body := do(mux, "GET", "/api/v1/jobs/job1/dead?after=x", "127.0.0.1:1", "", ""); code != 400 {
		t.Fatalf("a cursor without its shard: %d %s", code, body)
	}
	in, err := workInspector(h, "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "x", "4/1-0", "04/1-0", "-1/1-0", "1/1-0", "01/1-0"} {
		if _, err := in.Replay(ctx, id); !errors.Is(err, worker.ErrDeadLetterNotFound) {
			t.Errorf("Replay(%q): %v", id, err)
		}
	}
}

// TestShardedWorkers: a worker per shard that has jobs, each handling its
// shard's; one worker with one shard.
func TestShardedWorkers(t *testing.T) {
	f, _, h := shardedHandle(t)
	ws, rt, closeRelays, err := buildWorker(f, h, "r0", slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRelays()
	if len(ws) != 4 || rt != nil {
		t.Fatalf("%d workers, runtime %v; want 4 and none", len(ws), rt)
	}
	one, err := config.Parse("one.yaml", []byte("backend: {memory: {}}\njobs:\n  - {name: a, schedule: '@every 1s', run: {http: {url: 'https://example.invalid/x', secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u]}}}\n  - {name: b, schedule: '@every 1s', run: {http: {url: 'https://example.invalid/x', secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1u]}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h1, err := stores.Open(context.Background(), one, stores.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	ws, _, closeOne, err := buildWorker(one, h1, "r0", slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeOne()
	if len(ws) != 1 {
		t.Fatalf("%d workers with one shard, want 1", len(ws))
	}
	// Jobs defined at run time may come to any shard: a worker for each,
	// and each job is registered with its shard's.
	dyn, err := config.Parse("dyn.yaml", []byte("backend: {memory: {}}\nshards: 4\nworker: {allow_http_hosts: [example.invalid]}\njobs: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	ws, rt, closeDyn, err := buildWorker(dyn, h, "r0", slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDyn()
	if len(ws) != 4 || rt == nil {
		t.Fatalf("%d workers, runtime %v; want 4 and one", len(ws), rt)
	}
	for _, j := range []string{"job0", "job1", "job2", "job3"} {
		if rt.worker(j) != ws[onetick.ShardOf(j, 4)] {
			t.Errorf("%s is not registered with its shard's worker", j)
		}
	}
}
