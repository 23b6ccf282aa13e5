package web_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/web"
	"github.com/onetick/onetick/memory"
)

func mustCron(t testing.TB, expr string) *cron.Schedule {
	t.Helper()
	s, err := cron.Parse(expr, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ev(what string, at time.Time) onetick.RunEvent { return onetick.RunEvent{What: what, At: at} }

// Each state of a slot, from its record or its absence, one cell per slot.
func TestBuildStripStates(t *testing.T) {
	now := time.Date(2026, 3, 29, 12, 0, 30, 0, time.UTC)
	sched := mustCron(t, "0 * * * *") // hourly: 24 slots in the window
	at := func(h int) onetick.Slot { return onetick.SlotOf(time.Date(2026, 3, 29, h, 0, 0, 0, time.UTC)) }
	run := func(h int, f onetick.Fate, evs ...onetick.RunEvent) onetick.Run {
		return onetick.Run{Job: "j", Slot: at(h), Tick: onetick.TickID("j", at(h)), Fate: f, Events: evs}
	}
	tm := func(h int, d time.Duration) time.Time { return at(h).Time().Add(d) }
	runs := []onetick.Run{
		run(1, onetick.FateSucceeded, ev("started", tm(1, time.Second)), ev("succeeded", tm(1, 2*time.Second))),
		run(2, onetick.FateSucceeded, ev("started", tm(2, 5*time.Minute)), ev("succeeded", tm(2, 6*time.Minute))), // late start
		run(3, onetick.FateDead, ev("started", tm(3, time.Second)), ev("dead", tm(3, 2*time.Second))),
		run(4, onetick.FateRetrying, ev("started", tm(4, time.Second)), ev("retried", tm(4, 2*time.Second))),
		run(5, onetick.FatePaused),
		run(6, onetick.FateRunning, ev("started", tm(6, time.Second))),
		run(7, onetick.FateEnqueued), // no worker yet, 5h past its start deadline: late
		{Job: "j", Slot: at(8), Through: at(9), Count: 2, Fate: onetick.FateSkipped, Reason: onetick.SkipGrace},              // a range
		{Job: "j", Slot: at(10), Tick: onetick.TickID("j", at(10)), Kind: onetick.KindBackfill, Fate: onetick.FateSucceeded}, // backfilled: no deadline
		{Job: "j", Slot: at(10) + 5, Tick: "j:trigger:k", Kind: onetick.KindTrigger, Fate: onetick.FateDead},                 // no slot
	}
	last := at(11)
	st := onetick.JobStatus{Name: "j", LastFired: &last}
	// Slot 12:00 is after the last fired (11:00) and 30 s past: missed.
	s := web.BuildStrip(web.StripInput{Schedule: sched, Status: st, Runs: runs, Now: now,
		Deadline: onetick.Deadline{Start: time.Minute}})
	if s.Slots != 24 || len(s.Cells) != 24 {
		t.Fatalf("%d slots, %d cells, want 24", s.Slots, len(s.Cells))
	}
	byHour := map[int]web.SlotState{}
	for _, c := range s.Cells {
		if c.From.Day() == 29 {
			byHour[c.From.Hour()] = c.State
		}
	}
	want := map[int]web.SlotState{0: web.SlotNone, 1: web.SlotFired, 2: web.SlotLate, 3: web.SlotFailed, 4: web.SlotFailed,
		5: web.SlotPaused, 6: web.SlotRunning, 7: web.SlotLate, 8: web.SlotMissed, 9: web.SlotMissed, 10: web.SlotFired,
		11: web.SlotNone, 12: web.SlotMissed}
	for h, w := range want {
		if byHour[h] != w {
			t.Errorf("slot %02d:00: %s, want %s", h, byHour[h], w)
		}
	}
	if s.Counts[web.SlotLate] != 2 || s.Late() != 2 || s.Counts[web.SlotMissed] != 3 {
		t.Errorf("counts %v", s.Counts)
	}
	// Without a deadline nothing is late; a running slot is running.
	s = web.BuildStrip(web.StripInput{Schedule: sched, Status: st, Runs: runs, Now: now})
	if s.Counts[web.SlotLate] != 0 || s.Counts[web.SlotRunning] != 1 {
		t.Errorf("without a deadline: counts %v", s.Counts)
	}
	// Just due: within the gap tolerance.
	s = web.BuildStrip(web.StripInput{Schedule: sched, Status: st, Runs: runs, Now: at(12).Time().Add(time.Second)})
	if c := s.Cells[len(s.Cells)-1]; c.State != web.SlotDue {
		t.Errorf("a slot due 1s ago: %s, want due", c.State)
	}
	// Paused now: slots since the pause without a record are paused.
	paused := st
	paused.Paused = &onetick.PauseView{Since: at(11).Time().Add(time.Minute)}
	s = web.BuildStrip(web.StripInput{Schedule: sched, Status: paused, Runs: runs, Now: now})
	if c := s.Cells[len(s.Cells)-1]; c.State != web.SlotPaused {
		t.Errorf("a slot of a paused job: %s, want paused", c.State)
	}
	// A cell's title says what it is.
	if got := s.Cells[2+len(s.Cells)-13].Title(); !strings.Contains(got, "failed") && !strings.Contains(got, "UTC") {
		t.Errorf("title %q", got)
	}
}

// A frequent schedule is shown in buckets, each the worst of its slots;
// one faster than the strip walks is shown over a shorter window.
func TestBuildStripBuckets(t *testing.T) {
	now := time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC)
	sched := mustCron(t, "* * * * *") // 1,440 slots
	bad := onetick.SlotOf(now.Add(-90 * time.Minute))
	last := onetick.SlotOf(now)
	runs := []onetick.Run{{Job: "j", Slot: bad, Fate: onetick.FateDead, Tick: "t"}}
	s := web.BuildStrip(web.StripInput{Schedule: sched, Status: onetick.JobStatus{LastFired: &last}, Runs: runs, Now: now})
	if s.Slots != 1440 || len(s.Cells) != 96 || s.Partial {
		t.Fatalf("%d slots in %d cells (partial %v), want 1440 in 96", s.Slots, len(s.Cells), s.Partial)
	}
	failed := 0
	total := 0
	for _, c := range s.Cells {
		total += c.Slots
		if c.State == web.SlotFailed {
			failed++
			if c.Counts[web.SlotFailed] != 1 || c.Counts[web.SlotNone] != 14 || !strings.Contains(c.Title(), "1 failed, 14 none") {
				t.Errorf("failed bucket %+v: %s", c.Counts, c.Title())
			}
		}
	}
	if failed != 1 || total != 1440 {
		t.Errorf("%d failed buckets, %d slots in buckets", failed, total)
	}
	fast := &everySchedule{d: 200 * time.Millisecond} // 432,000 slots a day
	s = web.BuildStrip(web.StripInput{Schedule: fast, Now: now})
	if !s.Partial || s.Slots > 100_000 || len(s.Cells) != 96 || !s.To.Equal(now) {
		t.Errorf("every 200ms: partial %v, %d slots, %d cells, to %v", s.Partial, s.Slots, len(s.Cells), s.To)
	}
	var buf bytes.Buffer
	if err := web.RenderJob(&buf, &web.JobPage{Ledger: true, Strip: s, StoreTime: now, DeadTotal: -1}); err != nil || !strings.Contains(buf.String(), "Last 3h 00m") {
		t.Errorf("the shorter window's heading: %v", err)
	}
}

type everySchedule struct{ d time.Duration }

func (e *everySchedule) Next(t time.Time) time.Time { return t.Truncate(e.d).Add(e.d) }

// The page of a job: every value escaped, the actions present with a
// token, absent without; 404 for an unknown job; read-only.
func TestJobHandler(t *testing.T) {
	p := demoJobPage()
	p.Job.Name = `<b>sync</b>"crm`
	p.Job.Paused = &onetick.PauseView{Since: demoNow.Add(-time.Minute), Who: "ops <x>", Reason: "</td><script>alert(1)</script>"}
	p.Runs[0].Events[len(p.Runs[0].Events)-1].Output = "<script>alert(2)</script>\nlast line"
	src := web.JobSourceFunc(func(_ context.Context, job string) (*web.JobPage, error) {
		if job != p.Job.Name {
			return nil, fmt.Errorf("%w %q", onetick.ErrUnknownJob, job)
		}
		cp := *p
		return &cp, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/jobs/{job}", web.JobHandler(src, web.Options{}))
	get := func(method, path string) (*http.Response, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec.Result(), rec.Body.String()
	}
	res, body := get("GET", "/jobs/%3Cb%3Esync%3C%2Fb%3E%22crm")
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	for _, bad := range []string{"<script>alert", "<b>sync", `"crm"`} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	for _, want := range []string{`id="token"`, `type="password"`, "&lt;b&gt;sync&lt;/b&gt;&#34;crm", "last line", "sessionStorage",
		`data-replay="`, "started within 2m, succeeded within 10m", `class="badge paused" id="job-state"`,
		"../api/v1/jobs/%3Cb%3Esync%3C%2Fb%3E%22crm/runs"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<form") {
		t.Error("the page has a form: the token could be submitted in a URL")
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'sha256-") || !strings.Contains(csp, "connect-src 'self'") ||
		!strings.Contains(csp, "form-action 'none'") || res.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers %v", res.Header)
	}
	p.Changes = false
	_, body = get("GET", "/jobs/%3Cb%3Esync%3C%2Fb%3E%22crm")
	if strings.Contains(body, `id="token"`) || strings.Contains(body, `data-replay="`) || !strings.Contains(body, "sets no <code>http.token</code>") {
		t.Error("without a token the page still offers actions")
	}
	if res, body := get("GET", "/jobs/nope"); res.StatusCode != 404 || !strings.Contains(body, "no job") {
		t.Errorf("unknown job: %d %q", res.StatusCode, body)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		if res, _ := get(m, "/jobs/x"); res.StatusCode != 405 || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d", m, res.StatusCode)
		}
	}
	// A store error still gives the page, with 503.
	mux2 := http.NewServeMux()
	mux2.Handle("/jobs/{job}", web.JobHandler(web.JobSourceFunc(func(context.Context, string) (*web.JobPage, error) {
		return nil, errors.New("dial tcp: connection refused")
	}), web.Options{}))
	rec := httptest.NewRecorder()
	mux2.ServeHTTP(rec, httptest.NewRequest("GET", "/jobs/a", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "connection refused") {
		t.Errorf("store error: %d", rec.Code)
	}
}

// JobStore over the in-process store: the job's records, its pause, its
// deadline, and its dead letters from the function given.
func TestJobStore(t *testing.T) {
	b := memory.New(memory.Options{})
	t.Cleanup(func() { _ = b.Close() })
	ctx := t.Context()
	jobs := []onetick.Job{{Name: "a", Schedule: mustCron(t, "* * * * *")},
		{Name: "b", Schedule: mustCron(t, "* * * * *"), Deadline: onetick.Deadline{Start: 2 * time.Minute, Finish: time.Hour}}}
	ops := &onetick.Ops{Backend: b, Jobs: jobs}
	for i := range 3 {
		if _, err := ops.Trigger(ctx, "a", fmt.Sprintf("k%d", i), "", onetick.Actor{Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ops.Pause(ctx, "a", onetick.Actor{Who: "ops", Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	src := &web.JobStore{Backend: b, AllJobs: ops.AllJobs, Changes: true, RunsShown: 2,
		Ledger: func(string) (onetick.Ledger, error) { return b, nil },
		Deadline: func(j onetick.Job) onetick.Deadline {
			return onetick.Deadline{Start: time.Duration(len(j.Name)) * time.Minute}
		},
		Dead: func(_ context.Context, job string, limit int) ([]web.DeadLetter, int, error) {
			return []web.DeadLetter{{ID: "1-0", Tick: job + ":1"}}, 1, nil
		}}
	p, err := src.JobPage(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 2 || !p.MoreRuns || p.Runs[0].Kind != onetick.KindTrigger || !p.Ledger {
		t.Errorf("runs %+v, more %v", p.Runs, p.MoreRuns)
	}
	if p.Job.Paused == nil || p.Job.Paused.Reason != "maintenance" || p.Deadline.Start != time.Minute || p.DeadTotal != 1 || p.Dead[0].Tick != "a:1" {
		t.Errorf("page %+v", p)
	}
	if p.Strip.Slots < 1439 || len(p.Strip.Cells) != 96 {
		t.Errorf("strip of %d slots in %d cells", p.Strip.Slots, len(p.Strip.Cells))
	}
	if _, err := src.JobPage(ctx, "nope"); !errors.Is(err, onetick.ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
	// Without a Deadline function, a job's own deadline (its definition).
	src.Deadline = nil
	if p, err := src.JobPage(ctx, "b"); err != nil || p.Deadline != jobs[1].Deadline {
		t.Errorf("the job's own deadline: %v %+v", err, p.Deadline)
	}
	// A store without a ledger: the page says so.
	src.Ledger = func(string) (onetick.Ledger, error) {
		return nil, errors.New("the redis store keeps no run ledger yet")
	}
	p, err = src.JobPage(ctx, "b")
	if err != nil || p.Ledger || !strings.Contains(p.LedgerNote, "no run ledger") {
		t.Errorf("no ledger: %v %+v", err, p)
	}
	var buf bytes.Buffer
	if err := web.RenderJob(&buf, p); err != nil || !strings.Contains(buf.String(), "No strip: the redis store keeps no run ledger yet.") {
		t.Errorf("render: %v", err)
	}
}
