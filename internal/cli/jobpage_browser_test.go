package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/onetick/onetick/internal/browsertest"
)

// browserWait bounds each wait for the page to show something: long, for
// a loaded two-core machine; the waits end as soon as the page shows it.
const browserWait = 45 * time.Second

// The job page in headless Chromium, against a replica's API with its
// scheduler and a worker whose Go handlers print, on each of pageStores:
// the operator enters the token, pauses and resumes the job, triggers it
// and sees the run with its output, backfills a range after its dry run,
// and replays a dead letter. The token stays out of every URL and the log.
func TestJobPageActionsInBrowser(t *testing.T) {
	browser := browsertest.Start(t)
	for _, store := range pageStores {
		t.Run(store, func(t *testing.T) { testJobPageActionsInBrowser(t, browser, store) })
	}
}

func testJobPageActionsInBrowser(t *testing.T, browser *browsertest.Browser, store string) {
	s := startPageServer(t, actionsYAML, actionsOpts(store))
	tab := browser.Tab(t, 5*time.Minute)
	wait := func(what, cond string) {
		t.Helper()
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond),
			chromedp.WithPollingTimeout(browserWait))); err != nil {
			html, _ := chromedp.Run(tab, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("the page does not show %s: %v\n%s", what, err, html)
		}
	}
	click := func(id string) { t.Helper(); cdpDo(t, tab, chromedp.Click(chromedp.ID(id))) }
	result := `document.getElementById("action-result").textContent`

	// The page refreshes itself every second (not 5): a run the worker
	// ends just after the refresh that follows an action shows sooner.
	cdpDo(t, tab, chromedp.Navigate(s.url+"/jobs/report?refresh=1"))
	if got := cdpRun(t, tab, chromedp.Text(chromedp.ID("deadline"))); !strings.Contains(got, "start ≤ 1m") || !strings.Contains(got, "done ≤ 5m") {
		t.Errorf("the deadline card shows %q", got)
	}
	if got := cdpRun(t, tab, chromedp.Text(chromedp.ID("job-state"))); got != "active" {
		t.Errorf("the job shows %q, want active", got)
	}

	// Without the token an action says so and sends nothing.
	click("trigger")
	wait("that the token is needed", result+`.includes("Enter the API token")`)

	// The token: typed into the password field, kept in this tab's
	// sessionStorage.
	cdpDo(t, tab, chromedp.SendKeys(chromedp.ID("token"), testToken))
	if got := cdpRun(t, tab, chromedp.Evaluate[string](`sessionStorage.getItem("onetick-token")`)); got != testToken {
		t.Fatalf("sessionStorage holds %q", got)
	}

	// Pause needs a reason; then the job shows paused, with it.
	click("pause")
	wait("that a pause needs a reason", result+`.includes("needs a reason")`)
	cdpDo(t, tab, chromedp.SendKeys(chromedp.ID("reason"), "maintenance window"))
	click("pause")
	wait("the job paused", `document.getElementById("job-state").textContent === "paused" &&
		document.getElementById("state").textContent.includes("maintenance window") &&
		document.getElementById("state").textContent.includes("job page")`)
	ctl, _, err := s.h.Backend().Controls(t.Context())
	if err != nil || !ctl["report"].Paused || !strings.HasPrefix(ctl["report"].Actor.Who, "job page (127.0.0.1:") {
		t.Fatalf("the store's controls: %v %+v", err, ctl["report"])
	}
	click("resume")
	wait("the job resumed", `document.getElementById("job-state").textContent === "active"`)

	// Trigger: the run appears with its output.
	click("trigger")
	wait("the triggered run with its output", `[...document.querySelectorAll('#runs tr[data-kind="trigger"]')].some(r =>
		r.dataset.fate === "succeeded" && r.querySelector("pre.output")?.textContent.includes("wrote 42 rows"))`)
	tick := cdpRun(t, tab, chromedp.Evaluate[string](`document.querySelector('#runs tr[data-kind="trigger"]').dataset.tick`))
	if !strings.HasPrefix(tick, "report:trigger:") || !strings.Contains(cdpRun(t, tab, chromedp.Evaluate[string](result)), tick) {
		t.Errorf("the triggered tick %q, the message %q", tick, cdpRun(t, tab, chromedp.Evaluate[string](result)))
	}

	// Backfill: the dry run lists the slots and enqueues nothing; Enqueue
	// sends the same range.
	from, to, want := backfillRange(t)
	cdpDo(t, tab, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("bf-from").value = %q;
		document.getElementById("bf-to").value = %q`, from.Format("2006-01-02T15:04:05"), to.Format("2006-01-02T15:04:05"))))
	click("bf-list")
	wait("the dry run's slots", fmt.Sprintf(`!document.getElementById("bf-plan").hidden &&
		document.querySelectorAll("#bf-slots li").length === %d &&
		document.getElementById("bf-confirm").textContent === "Enqueue %d slots"`, len(want), len(want)))
	shown := cdpRun(t, tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#bf-slots li")].map(l => l.textContent)`))
	for i, s := range want {
		if i >= len(shown) || shown[i] != s.Time().Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("dry run lists %q, want %v", shown, want)
			break
		}
	}
	if n := backfills(t, s); n != 0 {
		t.Fatalf("the dry run enqueued %d slots", n)
	}
	click("bf-confirm")
	wait("the backfill done", result+`.startsWith("Backfilled: ")`)
	var enqueued, dups int
	msg := cdpRun(t, tab, chromedp.Evaluate[string](result))
	fmt.Sscanf(strings.ReplaceAll(msg, "already enqueued", ""), "Backfilled: %d enqueued, %d", &enqueued, &dups)
	if enqueued+dups != len(want) || enqueued == 0 {
		t.Errorf("backfill says %q for %d slots", msg, len(want))
	}
	wait("the backfilled runs with their output", fmt.Sprintf(`[...document.querySelectorAll('#runs tr[data-kind="backfill"]')].filter(r =>
		r.dataset.fate === "succeeded" && r.querySelector("pre.output")?.textContent.includes("wrote 42 rows")).length === %d`, enqueued))

	// A dead letter, replayed from the page of its job (the token is
	// still in the tab).
	cdpDo(t, tab, chromedp.Navigate(s.url+"/jobs/flaky?refresh=1"))
	if got := cdpRun(t, tab, chromedp.Evaluate[string](`document.getElementById("token").value`)); got != testToken {
		t.Errorf("on the next page the token field holds %q", got)
	}
	click("trigger")
	wait("the dead letter", `document.querySelectorAll("#dead tr[data-dead]").length === 1 &&
		document.querySelector('#runs tr[data-kind="trigger"]')?.dataset.fate === "dead"`)
	deadTick := cdpRun(t, tab, chromedp.Evaluate[string](`document.querySelector("#dead tr[data-dead]").dataset.tick`))
	if got := cdpRun(t, tab, chromedp.Evaluate[string](`document.querySelector('#runs tr[data-kind="trigger"]').textContent`)); !strings.Contains(got, "upstream answered 503") {
		t.Errorf("the dead run's output is not shown: %s", got)
	}
	cdpDo(t, tab, chromedp.Click(chromedp.CSS("#dead button[data-replay]")))
	wait("the replayed tick succeeded", fmt.Sprintf(`document.querySelectorAll("#dead tr[data-dead]").length === 0 &&
		(r => r && r.dataset.fate === "succeeded" && r.textContent.includes("replayed") &&
			r.querySelector("pre.output").textContent.includes("upstream back"))(document.querySelector('#runs tr[data-tick=%q]'))`, deadTick))

	// The token was never in a URL, the page's markup or the log.
	if u := cdpRun(t, tab, chromedp.Evaluate[string](`location.href + " " + document.documentElement.outerHTML`)); strings.Contains(u, testToken) {
		t.Error("the token appears in the page's address or markup")
	}
	if strings.Contains(s.logs.String(), testToken) {
		t.Error("the token appears in the log")
	}
	for _, m := range []string{"job paused through the API", "job triggered through the API", "job backfilled through the API", "dead letter replayed through the API"} {
		if !strings.Contains(s.logs.String(), m) {
			t.Errorf("the log lacks %q", m)
		}
	}
}

func cdpDo(t *testing.T, ctx context.Context, a ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, a...); err != nil {
		t.Fatal(err)
	}
}

func cdpRun[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
