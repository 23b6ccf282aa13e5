package onetick_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/executor/webhook"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/notify"
	"github.com/onetick/onetick/sqlite"
	"github.com/onetick/onetick/worker"
)

// The watcher's tests run on the stores that keep a ledger in process:
// the memory store and the file store, both on a fake clock.

// dlT0 is the tests' start: a slot of every schedule they use.
var dlT0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

type ledgerStore interface {
	onetick.Backend
	onetick.Ledger
}

type dlEnv struct {
	t     *testing.T
	clk   *clockwork.FakeClock
	b     ledgerStore
	ws    worker.Store
	lease onetick.Lease
	held  map[string][]*worker.Delivery // begun, not finished, by job
	logs  *logBuf
}

// eachLedgerStore runs fn on the memory store and on the file store.
func eachLedgerStore(t *testing.T, fn func(t *testing.T, e *dlEnv)) {
	for _, kind := range []string{"memory", "file"} {
		t.Run(kind, func(t *testing.T) {
			clk := clockwork.NewFakeClockAt(dlT0)
			e := &dlEnv{t: t, clk: clk, held: map[string][]*worker.Delivery{}, logs: &logBuf{t: t}}
			switch kind {
			case "memory":
				m := memory.New(memory.Options{Clock: clk})
				e.b, e.ws = m, m.WorkerStore("g")
			case "file":
				f, err := sqlite.Open(filepath.Join(t.TempDir(), "onetick.db"), sqlite.Options{Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				e.b, e.ws = f, f.WorkerStore("g")
			}
			g, err := e.b.Acquire(context.Background(), "leader", 30*24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			e.lease = g.Lease
			fn(t, e)
		})
	}
}

// at moves the clock to dlT0+d.
func (e *dlEnv) at(d time.Duration) {
	e.t.Helper()
	to := dlT0.Add(d)
	if to.Before(e.clk.Now()) {
		e.t.Fatalf("the clock would go back from %s to %s", e.clk.Now(), to)
	}
	e.clk.Advance(to.Sub(e.clk.Now()))
}

func stream(job string) string { return "s:" + job }

// claim claims job's slot at dlT0+d, as the leader does.
func (e *dlEnv) claim(job string, d time.Duration) {
	e.t.Helper()
	tk := onetick.Tick{Job: job, Slot: onetick.SlotOf(dlT0.Add(d)), Stream: stream(job), Payload: "{}", Retention: time.Hour}
	res, err := e.b.Claim(context.Background(), e.lease, []onetick.Tick{tk})
	if err != nil || res.Outcomes[0] != onetick.Claimed {
		e.t.Fatalf("claim %s: %+v, %v", tk.ID(), res, err)
	}
}

// start begins job's waiting ticks, as a worker does.
func (e *dlEnv) start(job string) {
	e.t.Helper()
	ctx := context.Background()
	ds, err := e.ws.Fetch(ctx, "w1", []string{stream(job)}, 10, 0)
	if err != nil || len(ds) == 0 {
		e.t.Fatalf("fetch %s: %d, %v", job, len(ds), err)
	}
	starts := make([]worker.Start, len(ds))
	for i, d := range ds {
		starts[i] = worker.Start{D: d, Overlap: worker.OverlapAllow}
	}
	if _, err := e.ws.Begin(ctx, "w1", time.Hour, starts); err != nil {
		e.t.Fatal(err)
	}
	e.held[job] = append(e.held[job], ds...)
}

// finish ends job's begun ticks with success.
func (e *dlEnv) finish(job string) {
	e.t.Helper()
	var fs []worker.Finish
	for _, d := range e.held[job] {
		fs = append(fs, worker.Finish{D: d, Kind: worker.FinishDone, Retention: time.Hour})
	}
	if _, err := e.ws.Finish(context.Background(), "w1", fs); err != nil {
		e.t.Fatal(err)
	}
	delete(e.held, job)
}

// job is a job of schedule with deadline d.
func dlJob(t *testing.T, name, schedule string, d onetick.Deadline) onetick.Job {
	t.Helper()
	s, err := cron.Parse(schedule, nil)
	if err != nil {
		t.Fatal(err)
	}
	return onetick.Job{Name: name, Schedule: s, Deadline: d}
}

// watcher builds a watcher of jobs on e's store.
func (e *dlEnv) watcher(n onetick.DeadlineNotifier, reg prometheus.Registerer, jobs ...onetick.Job) (*onetick.DeadlineWatcher, *onetick.Metrics) {
	e.t.Helper()
	m, err := onetick.NewMetrics(reg)
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := onetick.NewDeadlineWatcher(onetick.DeadlineConfig{Ledger: e.b, Jobs: jobs, Notifier: n,
		Metrics: m, Clock: e.clk, Logger: slogTo(e.logs)})
	if err != nil {
		e.t.Fatal(err)
	}
	return w, m
}

func (e *dlEnv) check(w *onetick.DeadlineWatcher) {
	e.t.Helper()
	if err := w.Check(context.Background()); err != nil {
		e.t.Fatalf("check at %s: %v", e.clk.Now().Format(time.TimeOnly), err)
	}
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// logBuf keeps the watcher's log and passes it to t.Log.
type logBuf struct {
	t  *testing.T
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimSpace(string(p)))
	return l.b.Write(p)
}

// count returns how many lines hold every one of words.
func (l *logBuf) count(words ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all && line != "" {
			n++
		}
	}
	return n
}

// receiver is a webhook receiver that checks each notice's signature as
// a receiver would (webhook.Verify, on the raw body) and keeps them.
type receiver struct {
	srv    *httptest.Server
	secret string
	clk    clockwork.Clock
	mu     sync.Mutex
	got    []notice
	fail   bool // answer 503
	// onNotice, if set, is called after each notice is kept.
	onNotice func()
}

type notice struct {
	ID                               string
	Job, Status, Deadline, Slot, Due string
	SlotMS                           int64 `json:"slot_ms"`
	Takeover                         bool
}

func newReceiver(t *testing.T, clk clockwork.Clock) (*receiver, *notify.Webhook) {
	r := &receiver{secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("a receiver's secret, 32 bytes..")), clk: clk}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(r.secret, req.Header, body, time.Minute, r.clk.Now()); err != nil {
			t.Errorf("receiver: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var n notice
		if err := json.Unmarshal(body, &n); err != nil {
			t.Errorf("receiver: %v in %s", err, body)
		}
		n.ID = req.Header.Get(webhook.HeaderID)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		r.got = append(r.got, n)
		if r.onNotice != nil {
			r.onNotice()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	wh, err := notify.New(notify.Config{URL: r.srv.URL, Secrets: []string{r.secret}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return r, wh
}

func (r *receiver) notices() []notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notice(nil), r.got...)
}

func (r *receiver) setFail(v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = v
}
