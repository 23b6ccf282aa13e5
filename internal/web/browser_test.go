package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/onetick/onetick/internal/browsertest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/internal/web"
)

// The jobs of the browser test's fleet, in configuration order. One name
// is markup: the page must show it as text.
var fleetJobs = []string{"heartbeat", "nightly-report", "<b>bold</b>", "invoices-eu"}

// pageToken is the fleet's http.token, for the pause made through the API.
const pageToken = "page-test-token-0123456789"

const fleetConfig = `backend:
  redis:
    url: %s
    prefix: webtest
lease:
  ttl: 2s
http:
  token: ` + pageToken + `
jobs:
  - name: heartbeat
    schedule: "@every 1s"
    stream: webtest:heartbeat
  - name: nightly-report
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
  - name: "<b>bold</b>"
    schedule: "@every 10m"
  - name: invoices-eu
    schedule: "*/5 * * * *"
    timezone: America/New_York
    prefer: duplicate
`

// The page in headless Chromium: a fixed page full of markup in names, and
// a real fleet's.
func TestPageInBrowser(t *testing.T) {
	browser := browsertest.Start(t)
	t.Run("fixed", func(t *testing.T) { testFixedPage(t, browser) })
	t.Run("fleet", func(t *testing.T) { testFleetPage(t, browser) })
}

// The browser's parser finds exactly the page's elements: names and
// reasons full of markup stay text, and nothing of it runs. On a phone the
// longest names wrap instead of widening the page.
func testFixedPage(t *testing.T, browser *browsertest.Browser) {
	srv := httptest.NewServer(web.Handler(fixedSource(fixedPage(), nil), web.Options{}))
	defer srv.Close()
	tab := browser.Tab(t, 30*time.Second)
	do(t, tab, chromedp.Navigate(srv.URL+"/"))
	if n := run(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("tr[data-job]").length`)); n != 100 {
		t.Errorf("%d job rows, want 100", n)
	}
	if n := run(t, tab, chromedp.Evaluate[int](`document.scripts.length + document.images.length + document.querySelectorAll("td b b, [onmouseover]").length`)); n != 1 {
		t.Errorf("%d scripts, images and injected elements, want the page's one script", n)
	}
	for _, name := range []string{scriptName, quoteName, longName} {
		got := run(t, tab, chromedp.Evaluate[string](fmt.Sprintf(`[...document.querySelectorAll("tr[data-job]")].find(r => r.dataset.job === %q)?.querySelector("td").textContent.trim() ?? "no row"`, name)))
		if got != name {
			t.Errorf("the row of %q shows %q", name, got)
		}
	}
	if got := run(t, tab, chromedp.Evaluate[string](`document.querySelector('input[name="job"]').value`)); got != `a&b<"` {
		t.Errorf("the filter input holds %q", got)
	}
	do(t, tab, browsertest.Emulate(browsertest.Phone))
	if wide := run(t, tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		t.Error("at phone width the page is wider than the screen")
	}
}

// A fleet of two replicas against a real redis-server; the page of the
// standby shows the leader, its epoch and a row per job. After the leader
// hands over, the same page (not reloaded) shows the new leader and the
// released term: the page refreshes itself.
//
// ONETICK_SCREENSHOTS=DIR also writes DIR/status-page.png and
// DIR/status-page-phone.png (the README's screenshots:
// `ONETICK_SCREENSHOTS=$PWD/docs go test -run TestPageInBrowser ./internal/web/`).
func testFleetPage(t *testing.T, browser *browsertest.Browser) {
	srv := redistest.Start(t)
	f := newFleet(t, fmt.Sprintf(fleetConfig, srv.URL()))
	a, b := f.start("replica-a"), f.start("replica-b")
	leader, epoch := f.leader([]*replica{a, b}, []int{0, 0}, 20*time.Second)
	standby := b
	if leader == b {
		standby = a
	}
	tab := browser.Tab(t, 60*time.Second)
	url := "http://" + standby.addr + "/?refresh=1"
	do(t, tab, chromedp.Navigate(url))

	if got := run(t, tab, chromedp.Text(chromedp.ID("leader-name"))); got != leader.name {
		t.Errorf("leader shown as %q, want %q", got, leader.name)
	}
	if got := run(t, tab, chromedp.Text(chromedp.ID("leader-epoch"))); got != strconv.FormatInt(epoch, 10) {
		t.Errorf("epoch shown as %q, want %d", got, epoch)
	}
	if got := run(t, tab, chromedp.Text(chromedp.ID("replica-name"))); got != standby.name {
		t.Errorf("this replica shown as %q, want %q", got, standby.name)
	}
	if got := run(t, tab, chromedp.Text(chromedp.ID("replica-role"))); got != "standby" {
		t.Errorf("this replica's role shown as %q, want standby", got)
	}
	rows := run(t, tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr[data-job]")].map(r => r.dataset.job)`))
	if !slices.Equal(rows, fleetJobs) {
		t.Errorf("job rows %q, want %q", rows, fleetJobs)
	}
	// The markup in a job's name is text, not an element.
	name := run(t, tab, chromedp.Evaluate[string](`document.querySelector('tr[data-job="<b>bold</b>"] td').textContent.trim()`))
	nested := run(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("tr[data-job] td b b").length`))
	if name != "<b>bold</b>" || nested != 0 {
		t.Errorf("job named <b>bold</b> shows as %q with %d nested <b> elements", name, nested)
	}
	// The inline style passed the page's Content Security Policy.
	if r := run(t, tab, chromedp.Evaluate[string](`getComputedStyle(document.getElementById("leader")).borderTopLeftRadius`)); r != "10px" {
		t.Errorf("card border radius %q: the page's style did not apply", r)
	}
	// The zone-local time of a job in another zone, with UTC beside it.
	berlin := run(t, tab, chromedp.Evaluate[string](`document.querySelector('tr[data-job="nightly-report"] td:nth-child(3)').textContent`))
	if !bytes.Contains([]byte(berlin), []byte("02:30:00 CE")) || !bytes.Contains([]byte(berlin), []byte("UTC")) {
		t.Errorf("next slot of nightly-report shows %q, want 02:30 Berlin time and UTC", berlin)
	}

	// Hand over; the page follows without a reload.
	marks := []int{a.mark(), b.mark()}
	leader.stop(syscall.SIGTERM)
	next, nextEpoch := f.leader([]*replica{standby}, marks[slices.Index([]*replica{a, b}, standby):][:1], 20*time.Second)
	if next != standby || nextEpoch <= epoch {
		t.Fatalf("after the handover %s leads with epoch %d (was %d)", next.name, nextEpoch, epoch)
	}
	poll := fmt.Sprintf(`document.getElementById("leader-name").textContent === %q &&
		document.getElementById("leader-epoch").textContent === "%d" &&
		document.getElementById("replica-role").textContent === "leading" &&
		document.querySelector('tr[data-epoch="%d"] .badge')?.textContent === "released"`,
		standby.name, nextEpoch, epoch)
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](poll, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		html, _ := chromedp.Run(tab, chromedp.OuterHTML(chromedp.CSS("main")))
		t.Fatalf("the page did not show %s leading with epoch %d and term %d released: %v\n%s", standby.name, nextEpoch, epoch, err, html)
	}

	// A pause made through the API appears on the page.
	req, _ := http.NewRequest("POST", "http://"+standby.addr+"/api/v1/jobs/invoices-eu/pause",
		strings.NewReader(`{"reason":"month-end freeze","who":"ops"}`))
	req.Header.Set("Authorization", "Bearer "+pageToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pause through the API: %s", resp.Status)
	}
	pausedRow := `document.querySelector('tr[data-job="invoices-eu"] td[data-label="Paused"]')`
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](pausedRow+`?.textContent.includes("month-end freeze") &&
		`+pausedRow+`.querySelector(".badge.paused") !== null`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("the pause made through the API does not appear on the page: %v", err)
	}
	if other := run(t, tab, chromedp.Evaluate[string](`document.querySelector('tr[data-job="heartbeat"] td[data-label="Paused"]').textContent.trim()`)); other != "no" {
		t.Errorf("heartbeat shows paused %q, want no", other)
	}

	// On a phone nothing scrolls sideways: the tables stack.
	do(t, tab, browsertest.Emulate(browsertest.Phone))
	if wide := run(t, tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		t.Error("at phone width the page is wider than the screen")
	}
	if d := run(t, tab, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("table.jobs thead")).display`)); d != "none" {
		t.Errorf("at phone width the jobs table keeps its header row (display %q): it does not stack", d)
	}

	dir := os.Getenv("ONETICK_SCREENSHOTS")
	for _, s := range []struct {
		file string
		vp   browsertest.Viewport
	}{{"status-page.png", browsertest.Desktop}, {"status-page-phone.png", browsertest.Phone}} {
		shot, err := browsertest.Screenshot(tab, s.vp)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatalf("%s: %v", s.file, err)
		}
		if w := img.Bounds().Dx(); w != int(float64(s.vp.Width)*s.vp.Scale) {
			t.Errorf("%s is %d pixels wide, want %d", s.file, w, int(float64(s.vp.Width)*s.vp.Scale))
		}
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, s.file), shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The replica gone: the page keeps its last data and says it is stale.
	standby.stop(syscall.SIGKILL)
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`!document.getElementById("stale").hidden &&
		document.getElementById("stale").textContent.startsWith("Not updated since") &&
		document.querySelectorAll("tr[data-job]").length === 4`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("with its replica gone the page does not say it is stale, or lost its rows: %v", err)
	}
}

func do(t *testing.T, ctx context.Context, a ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, a...); err != nil {
		t.Fatal(err)
	}
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
