package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// The job page's actions through the API endpoints its script calls, as
// a client that is not a browser, on the in-process store and each of
// pageStores, with the scheduler and a worker whose Go handlers print:
// pause and resume (the store and the page show them), trigger (the run
// appears with its output in the runs API and on the page), a backfill's
// dry run (the slots, nothing enqueued) and its confirmation (the runs
// appear), a dead letter (on the page, with its count) replayed (it leaves
// the list and the run succeeds); 404 and 405; the status page links to
// the job page; the token stays out of the page and the log.
func TestJobPageOverAPI(t *testing.T) {
	for _, store := range append([]string{""}, pageStores...) {
		name := store
		if name == "" {
			name = "memory"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testJobPageOverAPI(t, store)
		})
	}
}

func testJobPageOverAPI(t *testing.T, store string) {
	s := startPageServer(t, actionsYAML, actionsOpts(store))
	page := func(job string) string {
		t.Helper()
		code, body := s.call("GET", "/jobs/"+job, "")
		if code != 200 {
			t.Fatalf("GET /jobs/%s: %d %s", job, code, body)
		}
		return body
	}
	post := func(path, body string, out any) {
		t.Helper()
		code, resp := s.call("POST", path, body)
		if code != 200 {
			t.Fatalf("POST %s %s: %d %s", path, body, code, resp)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp), out); err != nil {
				t.Fatalf("POST %s: %v in %s", path, err, resp)
			}
		}
	}
	// runs waits until the runs API shows the records of job that ok
	// accepts, and returns them.
	runs := func(job, what string, ok func([]onetick.Run) bool) []onetick.Run {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		end := time.After(45 * time.Second)
		for {
			code, body := s.call("GET", "/api/v1/jobs/"+job+"/runs?limit=1000", "")
			var p onetick.RunPage
			if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
				t.Fatalf("GET /api/v1/jobs/%s/runs: %d %s", job, code, body)
			}
			if ok(p.Runs) {
				return p.Runs
			}
			select {
			case <-tick.C:
			case <-end:
				t.Fatalf("the runs of %s do not show %s within 45s: %+v\nthe log:\n%s", job, what, p.Runs, s.logs.String())
			}
		}
	}
	// row is the page's row of tick in the runs table.
	row := func(body, tick string) string {
		t.Helper()
		_, r, found := strings.Cut(body, `<tr data-tick="`+tick+`"`)
		if !found {
			t.Fatalf("the page has no row of %s", tick)
		}
		r, _, _ = strings.Cut(r, "</tr>")
		return r
	}

	body := page("report")
	for _, want := range []string{`id="job-state">active<`, "started within 1m, succeeded within 5m of its slot", `type="password" id="token"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}

	// Pause and resume, as the page sends them.
	post("/api/v1/jobs/report/pause", `{"reason":"maintenance window","who":"job page"}`, nil)
	ctl, _, err := s.h.Backend().Controls(t.Context())
	if err != nil || !ctl["report"].Paused || !strings.HasPrefix(ctl["report"].Actor.Who, "job page (127.0.0.1:") {
		t.Fatalf("the store's controls: %v %+v", err, ctl["report"])
	}
	if body := page("report"); !strings.Contains(body, `id="job-state">paused<`) || !strings.Contains(body, "maintenance window") {
		t.Fatal("the page does not show the job paused with its reason")
	}
	post("/api/v1/jobs/report/resume", `{"reason":"","who":"job page"}`, nil)
	if body := page("report"); !strings.Contains(body, `id="job-state">active<`) {
		t.Fatal("the page does not show the job resumed")
	}

	// Trigger: the run appears with its output.
	var trig onetick.TriggerResult
	post("/api/v1/jobs/report/trigger", `{"who":"job page"}`, &trig)
	if !trig.Enqueued || !strings.HasPrefix(trig.Tick, "report:trigger:") {
		t.Fatalf("trigger: %+v", trig)
	}
	runs("report", "the triggered run succeeded with its output", func(rs []onetick.Run) bool {
		for _, r := range rs {
			if r.Tick == trig.Tick && r.Kind == onetick.KindTrigger && r.Fate == onetick.FateSucceeded &&
				strings.Contains(r.Events[len(r.Events)-1].Output, "wrote 42 rows") {
				return true
			}
		}
		return false
	})
	if r := row(page("report"), trig.Tick); !strings.Contains(r, `data-fate="succeeded" data-kind="trigger"`) || !strings.Contains(r, "wrote 42 rows") {
		t.Fatalf("the triggered run's row: %s", r)
	}

	// Backfill: the dry run lists the slots and enqueues nothing; the same
	// range without it enqueues them.
	from, to, want := backfillRange(t)
	rng := fmt.Sprintf(`"from":%q,"to":%q,"who":"job page"`, from.Format(time.RFC3339), to.Format(time.RFC3339))
	var dry onetick.BackfillResult
	post("/api/v1/jobs/report/backfill", `{`+rng+`,"dry_run":true}`, &dry)
	if fmt.Sprint(dry.Slots) != fmt.Sprint(want) || !dry.DryRun || dry.Enqueued != 0 {
		t.Fatalf("dry run: %+v, want the slots %v", dry, want)
	}
	if n := backfills(t, s); n != 0 {
		t.Fatalf("the dry run enqueued %d slots", n)
	}
	var bf onetick.BackfillResult
	post("/api/v1/jobs/report/backfill", `{`+rng+`}`, &bf)
	if bf.Enqueued+bf.Duplicates != len(want) || bf.Enqueued == 0 {
		t.Fatalf("backfill: %+v for %d slots", bf, len(want))
	}
	done := runs("report", "the backfilled runs succeeded", func(rs []onetick.Run) bool {
		n := 0
		for _, r := range rs {
			if r.Kind == onetick.KindBackfill && r.Fate == onetick.FateSucceeded && strings.Contains(r.Events[len(r.Events)-1].Output, "wrote 42 rows") {
				n++
			}
		}
		return n == bf.Enqueued
	})
	body = page("report")
	for _, r := range done {
		if r.Kind == onetick.KindBackfill && !strings.Contains(row(body, r.Tick), `data-kind="backfill"`) {
			t.Errorf("the backfilled run %s's row: %s", r.Tick, row(body, r.Tick))
		}
	}

	// A dead letter: on the page with its count, replayed through the
	// endpoint its button calls, gone from the list; the run succeeds.
	var dead onetick.TriggerResult
	post("/api/v1/jobs/flaky/trigger", `{"who":"job page"}`, &dead)
	runs("flaky", "the trigger dead", func(rs []onetick.Run) bool {
		return len(rs) == 1 && rs[0].Tick == dead.Tick && rs[0].Fate == onetick.FateDead
	})
	body = page("flaky")
	for _, want := range []string{`data-fate="dead" data-kind="trigger"`, "upstream answered 503", `id="dead-count">1<`, `data-replay="`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page of flaky lacks %s", want)
		}
	}
	code, resp := s.call("GET", "/api/v1/jobs/flaky/dead", "")
	var dl struct{ Dead []worker.DeadLetter }
	if code != 200 || json.Unmarshal([]byte(resp), &dl) != nil || len(dl.Dead) != 1 || dl.Dead[0].Tick != dead.Tick ||
		!strings.Contains(body, `data-replay="`+dl.Dead[0].ID+`"`) {
		t.Fatalf("the dead letters of flaky: %d %s", code, resp)
	}
	post("/api/v1/dead/"+dl.Dead[0].ID+"/replay", `{"who":"job page"}`, nil)
	runs("flaky", "the replayed tick succeeded", func(rs []onetick.Run) bool {
		if len(rs) != 1 || rs[0].Fate != onetick.FateSucceeded || !strings.Contains(rs[0].Events[len(rs[0].Events)-1].Output, "upstream back") {
			return false
		}
		for _, e := range rs[0].Events {
			if e.What == onetick.EventReplayed {
				return true
			}
		}
		return false
	})
	body = page("flaky")
	if r := row(body, dead.Tick); !strings.Contains(r, `data-fate="succeeded"`) || !strings.Contains(r, "replayed") ||
		!strings.Contains(r, "upstream back") || strings.Contains(body, `<tr data-dead=`) {
		t.Fatalf("after the replay, the run's row: %s", r)
	}

	if code, _ := s.call("GET", "/jobs/nope", ""); code != 404 {
		t.Errorf("GET /jobs/nope: %d", code)
	}
	if code, _ := s.call("POST", "/jobs/report", "{}"); code != 405 {
		t.Errorf("POST /jobs/report: %d", code)
	}
	if code, body := s.call("GET", "/", ""); code != 200 || !strings.Contains(body, `href="jobs/report"`) {
		t.Errorf("the status page does not link to the job page: %d", code)
	}
	if strings.Contains(page("report")+page("flaky")+s.logs.String(), testToken) {
		t.Error("the token appears in a page or the log")
	}
	for _, m := range []string{"job paused through the API", "job triggered through the API", "job backfilled through the API", "dead letter replayed through the API"} {
		if !strings.Contains(s.logs.String(), m) {
			t.Errorf("the log lacks %q", m)
		}
	}
}
