package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// runsPage runs `onetick runs` with args and reads its JSON page.
func runsPage(t *testing.T, args ...string) onetick.RunPage {
	t.Helper()
	out, stderr, code := runCmd(t, nil, append([]string{"runs", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("runs %v: exit %d\n%s%s", args, code, out, stderr)
	}
	var p onetick.RunPage
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("runs %v: %v\n%s", args, err, out)
	}
	return p
}

// waitRuns polls `onetick runs` until it lists at least n records.
func waitRuns(t *testing.T, n int, args ...string) onetick.RunPage {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if p := runsPage(t, args...); len(p.Runs) >= n {
			return p
		}
		if time.Now().After(end) {
			t.Fatalf("runs %v: fewer than %d records within 30s", args, n)
		}
	}
}

// TestRunsAndWhy: on the file store, every run of a command job is in the
// ledger with its story: `onetick runs` lists them, newest first, with
// their fate; `onetick why` tells one slot's story; a failing job's slot
// ends dead; the API serves the same pages; bad input exits 2.
func TestRunsAndWhy(t *testing.T) {
	data := filepath.Join(t.TempDir(), "state.db")
	out := filepath.Join(t.TempDir(), "ran")
	cfg := writeFile(t, "ledger.yaml", fmt.Sprintf(`jobs:
  - name: ok
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'echo "$ONETICK_TICK" >> "$OUT"']
        env: {OUT: %q}
  - name: bad
    schedule: "@every 1s"
    run:
      command: {argv: [sh, -c, 'echo failing >&2; exit 3']}
      max_attempts: 1
  - name: flaky
    schedule: "@every 1s"
    run:
      command:
        argv: [sh, -c, 'echo "attempt $ONETICK_ATTEMPT"; [ "$ONETICK_ATTEMPT" -ge 2 ] || { echo "db busy" >&2; exit 4; }']
      max_attempts: 2
      backoff: 100ms
`, out))
	p := startProc(t, "r1", "--config", cfg, "--data", data)
	addr := <-p.addr
	base := []string{"--config", cfg, "--data", data}

	ok := waitRuns(t, 2, append([]string{"ok", "--fate", "succeeded"}, base...)...)
	for i, r := range ok.Runs {
		if r.Job != "ok" || r.Fate != onetick.FateSucceeded || r.Tick != onetick.TickID("ok", r.Slot) {
			t.Fatalf("record %+v", r)
		}
		if i > 0 && r.Slot >= ok.Runs[i-1].Slot {
			t.Fatalf("records not newest first: %s after %s", r.Slot, ok.Runs[i-1].Slot)
		}
		var what []string
		for _, e := range r.Events {
			what = append(what, e.What)
		}
		if strings.Join(what, ",") != "enqueued,started,succeeded" || r.Events[0].Epoch == 0 || r.Events[0].Replica != "r1" || r.Events[1].Worker == "" {
			t.Fatalf("story of %s: %+v", r.Tick, r.Events)
		}
	}
	slot := ok.Runs[0].Slot
	text, stderr, code := runCmd(t, nil, append([]string{"why", "ok", strconv.FormatInt(int64(slot), 10)}, base...)...)
	if code != 0 || !strings.Contains(text, "fate: succeeded") || !strings.Contains(text, "tick "+onetick.TickID("ok", slot)) ||
		!strings.Contains(text, "enqueued") || !strings.Contains(text, "started") {
		t.Fatalf("why: exit %d\n%s%s", code, text, stderr)
	}
	if again, _, _ := runCmd(t, nil, append([]string{"why", "ok", slot.Time().Format(time.RFC3339Nano)}, base...)...); again != text {
		t.Fatalf("why by time differs from why by milliseconds:\n%s\n%s", again, text)
	}

	dead := waitRuns(t, 1, append([]string{"bad", "--fate", "dead"}, base...)...)
	if r := dead.Runs[0]; !strings.Contains(r.Reason, "exited with code 3") {
		t.Fatalf("dead record %+v: want the error as its reason", r)
	}

	whyResults(t, base)

	resp, err := http.Get("http://" + addr + "/api/v1/jobs/ok/runs?fate=succeeded&limit=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var page onetick.RunPage
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Runs) != 1 || page.Next == "" {
		t.Fatalf("GET runs: %d %s", resp.StatusCode, body)
	}
	next := runsPage(t, append([]string{"ok", "--fate", "succeeded", "--limit", "1", "--after", page.Next}, base...)...)
	if len(next.Runs) != 1 || next.Runs[0].Slot >= page.Runs[0].Slot {
		t.Fatalf("the page after %s: %+v", page.Runs[0].Slot, next.Runs)
	}
	if resp, err := http.Get("http://" + addr + "/api/v1/jobs/ok/runs?fate=nope"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET runs with a bad fate: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}

	for _, bad := range [][]string{
		{"runs", "ok", "--fate", "nope"},
		{"runs", "ok", "--from", "yesterday"},
		{"runs", "ok", "--after", "!!"},
		{"why", "ok", "not:a-slot"},
		{"why", "ok"},
	} {
		if o, e, code := runCmd(t, nil, append(bad, base...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", bad, code, o, e)
		}
	}
}

// whyResults: a command job's attempts leave their results in the
// ledger: `onetick why` shows each attempt's exit code and duration and
// the output of the newest attempts; `onetick runs` the last exit code;
// --json the whole results.
func whyResults(t *testing.T, base []string) {
	t.Helper()
	page := waitRuns(t, 1, append([]string{"flaky", "--fate", "succeeded"}, base...)...)
	r := page.Runs[0]
	var what []string
	for _, e := range r.Events {
		what = append(what, e.What)
	}
	if strings.Join(what, ",") != "enqueued,started,retried,started,succeeded" {
		t.Fatalf("story of %s: %+v", r.Tick, r.Events)
	}
	// Two pipes: the lines of stdout and stderr are in the order they
	// were read, which may not be the order they were written.
	if e := r.Events[2]; e.Exit == nil || *e.Exit != 4 || e.Duration <= 0 || len(e.Output) != len("attempt 1\ndb busy\n") ||
		!strings.Contains(e.Output, "attempt 1\n") || !strings.Contains(e.Output, "db busy\n") {
		t.Fatalf("the failed attempt's result: %+v", e.Result)
	}
	if e := r.Events[4]; e.Exit == nil || *e.Exit != 0 || e.Output != "attempt 2\n" {
		t.Fatalf("the attempt that succeeded: %+v", e.Result)
	}
	text, stderr, code := runCmd(t, nil, append([]string{"why", "flaky", strconv.FormatInt(int64(r.Slot), 10)}, base...)...)
	if code != 0 {
		t.Fatalf("why: exit %d\n%s%s", code, text, stderr)
	}
	for _, want := range []string{
		"fate: succeeded",
		"retried    attempt 1, worker ",
		", exit 4, took ",
		"succeeded  attempt 2, worker ",
		", exit 0, took ",
		"output of attempt 1, retried:\n  | ",
		"\n  | db busy\n",
		"\n  | attempt 1\n",
		"output of attempt 2, succeeded:\n  | attempt 2\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("why lacks %q:\n%s", want, text)
		}
	}
	list, _, _ := runCmd(t, nil, append([]string{"runs", "flaky", "--fate", "succeeded", "--limit", "1"}, base...)...)
	if !strings.Contains(list, "RESULT") || !strings.Contains(list, "exit 0") {
		t.Errorf("runs lacks the result column:\n%s", list)
	}
}
