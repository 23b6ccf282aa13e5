package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/onetick/onetick/internal/browsertest"
	"github.com/onetick/onetick/internal/web"
)

// The demo job page in headless Chromium: the strip, the runs with their
// output and the dead letters as a browser lays them out, under the
// page's Content Security Policy; on a phone nothing scrolls sideways.
//
// ONETICK_SCREENSHOTS=DIR also writes DIR/job-page.png (the README's and
// docs/ledger.md's screenshot:
// `ONETICK_SCREENSHOTS=$PWD/docs go test -run TestJobPageDemoInBrowser ./internal/web/`).
func TestJobPageDemoInBrowser(t *testing.T) {
	browser := browsertest.Start(t)
	demo := demoJobPage()
	mux := http.NewServeMux()
	mux.Handle("/jobs/{job}", web.JobHandler(web.JobSourceFunc(func(context.Context, string) (*web.JobPage, error) {
		cp := *demo
		return &cp, nil
	}), web.Options{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tab := browser.Tab(t, 60*time.Second)
	do(t, tab, chromedp.Navigate(srv.URL+"/jobs/sync-crm"))

	if n := run(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("#strip .slots .cell").length`)); n != len(demo.Strip.Cells) {
		t.Errorf("%d strip cells, want %d", n, len(demo.Strip.Cells))
	}
	states := run(t, tab, chromedp.Evaluate[map[string]int](`Object.fromEntries([...document.querySelectorAll(".legend li")].map(l => [l.dataset.state, Number(l.querySelector("b").textContent)]))`))
	for _, s := range []web.SlotState{web.SlotFired, web.SlotLate, web.SlotFailed, web.SlotMissed, web.SlotPaused, web.SlotRunning} {
		if states[string(s)] == 0 || states[string(s)] != demo.Strip.Counts[s] {
			t.Errorf("legend %v: %s shows %d, want %d (> 0)", states, s, states[string(s)], demo.Strip.Counts[s])
		}
	}
	// A failed cell's colour is the page's "bad" red: the style applied.
	if bg := run(t, tab, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("#strip .slots .s-failed")).backgroundColor`)); bg != "rgb(192, 38, 45)" {
		t.Errorf("a failed cell's colour is %q: the page's style did not apply", bg)
	}
	if n := run(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("#runs tr[data-tick]").length`)); n != len(demo.Runs) {
		t.Errorf("%d runs listed, want %d", n, len(demo.Runs))
	}
	// The output of a run unfolds.
	do(t, tab, chromedp.Click(chromedp.CSS(`#runs tr[data-kind="trigger"] summary`)))
	if got := run(t, tab, chromedp.Evaluate[string](`document.querySelector('#runs tr[data-kind="trigger"] pre.output').innerText`)); !strings.Contains(got, "fetched 48,210 contacts") {
		t.Errorf("the trigger's output shows %q", got)
	}
	// A refresh swaps the runs for their new version and keeps the
	// unfolded run unfolded.
	do(t, tab, chromedp.Evaluate[chromedp.Void](`window.oldRuns = document.getElementById("runs");
		document.dispatchEvent(new Event("onetick:refresh"))`))
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.getElementById("runs") !== window.oldRuns`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page did not refresh: %v", err)
	}
	if open := run(t, tab, chromedp.Evaluate[bool](`document.querySelector('#runs tr[data-kind="trigger"] details').open`)); !open {
		t.Error("the refresh folded the unfolded run")
	}
	if n := run(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("#dead button[data-replay]").length`)); n != len(demo.Dead) {
		t.Errorf("%d replay buttons, want %d", n, len(demo.Dead))
	}

	dir := os.Getenv("ONETICK_SCREENSHOTS")
	if dir != "" {
		do(t, tab, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("details[open]").forEach(d => d.open = false);
			document.querySelector('#runs tr:not([data-kind]) details[data-output]').open = true;
			document.getElementById("bf-from").value = "2026-12-02T12:00:00";
			document.getElementById("bf-to").value = "2026-12-02T14:00:00"`))
		shot, err := browsertest.Screenshot(tab, browsertest.Desktop)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "job-page.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	do(t, tab, browsertest.Emulate(browsertest.Phone))
	if wide := run(t, tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		t.Error("at phone width the job page is wider than the screen")
	}
}
