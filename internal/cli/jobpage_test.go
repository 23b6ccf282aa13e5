package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/worker"
)

// pageServer is a replica's HTTP API and pages over a real store, served
// on a loopback port: optionally with its scheduler and a worker whose Go
// handlers print.
type pageServer struct {
	t    *testing.T
	api  *api
	h    *stores.Handle
	ws   stores.WorkStore
	url  string
	logs *syncBuffer
}

// syncBuffer is a log destination that goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pageOpts say what runs beside the API.
type pageOpts struct {
	// store is "" for the in-process store, else one of pageStores;
	// each test has a fresh, empty one.
	store    string
	schedule bool // run the scheduler
	// handlers are the worker's Go handlers by job (none: no worker);
	// what a handler writes to its *strings.Builder is the attempt's
	// output in the ledger.
	handlers map[string]func(t *worker.Task, out *strings.Builder) error
	deadline func(onetick.Job) onetick.Deadline
}

func startPageServer(t *testing.T, yaml string, o pageOpts) *pageServer {
	t.Helper()
	so := stores.Options{Schema: stores.MigrateSchema}
	switch o.store {
	case "":
		so.Memory = true
	case "file":
		so.Path = filepath.Join(t.TempDir(), "onetick.db")
	default:
		yaml = withSharedStore(t, yaml, o.store)
	}
	f, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := stores.Open(ctx, f, so)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ws, err := h.WorkStore(f.Worker.Group)
	if err != nil {
		t.Fatal(err)
	}
	a := &api{ops: &onetick.Ops{Backend: h.Backend(), Jobs: jobs}, http: f.HTTP, log: log, file: f, store: h, deadline: o.deadline}
	var wg sync.WaitGroup
	if o.schedule {
		s, err := onetick.New(onetick.Config{Backend: h.Backend(), Replica: "page-test", Jobs: jobs, Lease: f.LeaseConfig(), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		a.sched = s
		wg.Go(func() { _ = s.Run(ctx) })
	}
	if len(o.handlers) > 0 {
		w, err := worker.New(worker.Config{Store: ws, Consumer: "page-worker", Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		streams := map[string]string{} // a store's key prefix names them
		for _, j := range jobs {
			streams[j.Name] = j.Stream
		}
		for job, fn := range o.handlers {
			err := w.Handle(job, worker.HandlerFunc(func(ctx context.Context, task *worker.Task) error {
				var out strings.Builder
				err := fn(task, &out)
				worker.Report(ctx, onetick.Result{Output: out.String()}) // as the executors do
				return err
			}), worker.WithStream(streams[job]), worker.WithMaxAttempts(1), worker.WithOverlap(worker.OverlapAllow))
			if err != nil {
				t.Fatal(err)
			}
		}
		wg.Go(func() { _ = w.Run(ctx) })
	}
	mux := http.NewServeMux()
	a.register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		wg.Wait()
		_ = h.Close()
	})
	return &pageServer{t: t, api: a, h: h, ws: ws, url: srv.URL, logs: logs}
}

// call sends a request as a client that is not a browser.
func (s *pageServer) call(method, path, body string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res.StatusCode, b.String()
}

const pageYAML = `backend: {memory: {}}
http:
  token: ` + testToken + `
jobs:
  - {name: a, schedule: "@every 1h"}
  - {name: b, schedule: "@every 1h"}
`

// deadLetter makes one dead letter of job through the worker store's own
// steps: a trigger, fetched and settled dead.
func deadLetter(t *testing.T, s *pageServer, job, key string) {
	t.Helper()
	if code, body := s.call("POST", "/api/v1/jobs/"+job+"/trigger", `{"key":"`+key+`"}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	ctx := t.Context()
	ds, err := s.ws.Fetch(ctx, "w", []string{onetick.DefaultStream(job)}, 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v, %d deliveries", err, len(ds))
	}
	if _, err := s.ws.Finish(ctx, "w", []worker.Finish{{D: ds[0], Kind: worker.FinishDead, Err: "boom " + key}}); err != nil {
		t.Fatal(err)
	}
}

// A job's dead letters over HTTP, paged, and a replay: the tick back in
// its stream, the dead letter gone, the ledger's record replayed.
func TestDeadLettersAndReplayAPI(t *testing.T) {
	s := startPageServer(t, pageYAML, pageOpts{})
	deadLetter(t, s, "a", "k1")
	deadLetter(t, s, "b", "k2")
	deadLetter(t, s, "a", "k3")

	list := func(path string) (dead []worker.DeadLetter, next string) {
		t.Helper()
		code, body := s.call("GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var out struct {
			Dead []worker.DeadLetter `json:"dead"`
			Next string              `json:"next"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || out.Dead == nil {
			t.Fatalf("GET %s: %v %s", path, err, body)
		}
		return out.Dead, out.Next
	}
	dead, next := list("/api/v1/jobs/a/dead")
	if len(dead) != 2 || dead[0].Tick != "a:trigger:k1" || dead[1].Tick != "a:trigger:k3" || next != "" || dead[0].Error != "boom k1" {
		t.Fatalf("dead letters of a: %+v next %q", dead, next)
	}
	first, next := list("/api/v1/jobs/a/dead?limit=1")
	if len(first) != 1 || first[0].ID != dead[0].ID || next == "" {
		t.Fatalf("page 1: %+v next %q", first, next)
	}
	second, next := list("/api/v1/jobs/a/dead?limit=1&after=" + next)
	if len(second) != 1 || second[0].ID != dead[1].ID {
		t.Fatalf("page 2: %+v next %q", second, next)
	}
	if none, _ := list("/api/v1/jobs/nope/dead"); len(none) != 0 {
		t.Fatalf("dead letters of an unknown job: %+v", none)
	}
	for _, bad := range []string{"0", "1001", "x"} {
		if code, body := s.call("GET", "/api/v1/jobs/a/dead?limit="+bad, ""); code != 400 || !strings.Contains(body, "limit") {
			t.Errorf("limit=%s: %d %s", bad, code, body)
		}
	}

	// Replay: an unknown id is 404, a body is required, the known one goes back.
	if code, body := s.call("POST", "/api/v1/dead/nope/replay", `{}`); code != 404 || !strings.Contains(body, "no dead letter") {
		t.Fatalf("replay of an unknown id: %d %s", code, body)
	}
	if code, body := s.call("POST", "/api/v1/dead/"+dead[0].ID+"/replay", ``); code != 400 {
		t.Fatalf("replay without a body: %d %s", code, body)
	}
	code, body := s.call("POST", "/api/v1/dead/"+dead[0].ID+"/replay", `{"who":"ops","reason":"fixed upstream"}`)
	if code != 200 || !strings.Contains(body, `"tick":"a:trigger:k1"`) {
		t.Fatalf("replay: %d %s", code, body)
	}
	if code, _ := s.call("POST", "/api/v1/dead/"+dead[0].ID+"/replay", `{}`); code != 404 {
		t.Fatalf("a second replay of the same dead letter: %d", code)
	}
	if left, _ := list("/api/v1/jobs/a/dead"); len(left) != 1 || left[0].ID != dead[1].ID {
		t.Fatalf("after the replay: %+v", left)
	}
	lg, err := s.h.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	r, ok, err := lg.Run(t.Context(), "a", "a:trigger:k1")
	if err != nil || !ok || r.Fate != onetick.FateEnqueued || r.Events[len(r.Events)-1].What != onetick.EventReplayed {
		t.Fatalf("the replayed tick's record: %v %v %+v", err, ok, r)
	}
	if !strings.Contains(s.logs.String(), "dead letter replayed through the API") || !strings.Contains(s.logs.String(), "fixed upstream") {
		t.Errorf("the replay is not logged:\n%s", s.logs.String())
	}
	if strings.Contains(s.logs.String(), testToken) {
		t.Error("the token appears in the log")
	}
}
