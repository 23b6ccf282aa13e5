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
