package web_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/web"
)

var t0 = time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)

func slot(t time.Time) *onetick.Slot { s := onetick.SlotOf(t); return &s }

// Names that would be markup, script or a broken attribute if printed as
// they are.
const (
	scriptName = `<script>alert(1)</script>`
	quoteName  = `"onmouseover=alert(1)`
)

var longName = strings.Repeat("very-long-job-name-", 10) + "end"

// fixedPage is page 2 of 250 matching jobs, filtered by a filter full of
// characters that need escaping, with every kind of row and term.
func fixedPage() *web.Page {
	filter := `a&b<"`
	p := &web.Page{
		Replica:   web.Replica{Name: "r<1>", Problems: []onetick.Problem{{State: onetick.StateElection, Since: t0, Blocking: true, Error: &onetick.DamageError{Key: "ot:leader", Reason: "holds a <list>"}}}},
		StoreTime: t0,
		Leader:    &onetick.LeaderView{Holder: "r<1>", Epoch: 42, TTLLeft: 3.5},
		Terms: []onetick.Term{
			{Epoch: 42, Holder: "r<1>", Start: t0.Add(-time.Hour)},
			{Epoch: 41, Holder: "r2", Start: t0.Add(-2 * time.Hour), End: t0.Add(-time.Hour), Reason: onetick.EndFenced},
			{Epoch: 40, Holder: "r3", Start: t0.Add(-5 * time.Hour), End: t0.Add(-2 * time.Hour), Reason: onetick.EndExpired},
			{Epoch: 39, Holder: "r2", Start: t0.Add(-50 * time.Hour), End: t0.Add(-5 * time.Hour), Reason: onetick.EndReleased},
		},
		Damage:  []*onetick.DamageError{{Key: "ot:ticks:1", Reason: "holds a <string>", Repairable: true}},
		Total:   100000,
		Matched: 250,
		Query:   web.Query{Job: filter, Page: 2},
		Workers: true,
	}
	for i := range 100 {
		j := web.Job{JobStatus: onetick.JobStatus{Name: fmt.Sprintf("job-%03d", 100+i), Schedule: "@every 1m", Zone: "UTC",
			Prefer: onetick.PreferMissed, Next: slot(t0.Add(time.Minute)), LastFired: slot(t0)}}
		switch i {
		case 0:
			j.Name = scriptName
		case 1:
			j.Name = quoteName
		case 2:
			j.Name = longName
		case 3:
			j.Damage = []*onetick.DamageError{{Key: "ot:stream:x", Job: j.Name, Reason: `<img src=x onerror=alert(1)>`}}
		case 4:
			j.Paused = &web.Pause{Since: t0.Add(-10 * time.Minute), By: "ops<b>", Reason: "incident </td><script>alert(2)</script>"}
		case 5:
			n := int64(3)
			j.LastRun = &web.Run{At: t0.Add(-time.Minute), Outcome: "failed: <timeout>"}
			j.DeadLetters = &n
		case 6:
			j.Gap, j.GapFrom, j.GapTo = 7, slot(t0.Add(-8*time.Minute)), slot(t0.Add(-2*time.Minute))
		case 7:
			j.Schedule, j.Zone, j.Next = "30 2 * * *", "Europe/Berlin", slot(time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC))
		}
		p.Jobs = append(p.Jobs, j)
	}
	return p
}

func render(t *testing.T, p *web.Page) string {
	t.Helper()
	var b bytes.Buffer
	if err := web.Render(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRenderEscapes(t *testing.T) {
	out := render(t, fixedPage())
	for _, bad := range []string{scriptName, "<img", "alert(2)</script>", `"onmouseover`, "ops<b>", "r<1>", "<timeout>", "<list>", "<string>", `a&b<"`} {
		if strings.Contains(out, bad) {
			t.Errorf("the page contains %q unescaped", bad)
		}
	}
	if n := strings.Count(out, "<script"); n != 1 {
		t.Errorf("%d <script elements, want the page's own one", n)
	}
	for _, want := range []string{
		`&lt;script&gt;alert(1)&lt;/script&gt;`,
		`data-job="&#34;onmouseover=alert(1)"`,
		`value="a&amp;b&lt;&#34;"`, // the filter, kept in its input
		longName,
		`&lt;img src=x onerror=alert(1)&gt;`,
		`incident &lt;/td&gt;&lt;script&gt;alert(2)&lt;/script&gt;`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestRenderPaging(t *testing.T) {
	p := fixedPage()
	out := render(t, p)
	if n := strings.Count(out, "<tr data-job="); n != 100 {
		t.Errorf("%d job rows, want 100", n)
	}
	for _, want := range []string{
		"101–200 of 250",
		"page 2 of 3",
		`matching “a&amp;b&lt;&#34;”`,
		// The links keep the filter, escaped for a URL and then for HTML.
		`href="?job=a%26b%3C%22"`,
		`href="?job=a%26b%3C%22&amp;page=3"`,
		`rel="next"`, `rel="prev"`,
		">100,000<",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The first page links no further back, the last no further on.
	p.Query.Page = 1
	if out := render(t, p); strings.Contains(out, `rel="prev"`) || !strings.Contains(out, "1–100 of 250") {
		t.Error("page 1 has a previous link or the wrong range")
	}
	p.Query.Page, p.Jobs = 3, p.Jobs[:50]
	if out := render(t, p); strings.Contains(out, `rel="next"`) || !strings.Contains(out, "201–250 of 250") {
		t.Error("page 3 has a next link or the wrong range")
	}
	// One page: no pager.
	p.Query, p.Matched = web.Query{Page: 1}, 50
	if out := render(t, p); strings.Contains(out, "page 1 of") {
		t.Error("a single page shows a pager")
	}
}

func TestRenderStates(t *testing.T) {
	out := render(t, fixedPage())
	for _, want := range []string{
		`id="leader-name" class="name">r&lt;1&gt;</span>`,
		`id="leader-epoch" class="mono">42</b>`,
		`class="badge current">current<`, `class="badge fenced">fenced<`,
		`class="badge expired">expired<`, `class="badge released">released<`,
		"1d 21h",                       // the released term's length
		`class="badge paused">paused<`, // the paused row
		"10m 00s ago by ops&lt;b&gt;",  // who paused, when
		`>failed: &lt;timeout&gt;<`,    // the failed last run
		`<span class="bad">3</span>`,   // dead letters
		`<span class="bad">7 missed</span>`,
		"2026-03-29 03:00:00 CEST", // the Berlin job's next slot, after the spring-forward
		"01:00:00 UTC",
		"stops its work", "holds a &lt;list&gt;", // this replica's blocking problem
		"holds a &lt;string&gt;", // store damage
		"1 job on this page has damaged state",
		"<th>Last run</th>", "<th>Dead letters</th>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(out, `class="attn"`); n != 4 {
		t.Errorf("%d rows marked for attention, want 4 (damage, pause, failed run with dead letters, gap)", n)
	}

	// Without workers the last run and dead letter columns are not shown;
	// the paused column always is.
	p := fixedPage()
	p.Workers = false
	for i := range p.Jobs {
		p.Jobs[i].LastRun, p.Jobs[i].DeadLetters = nil, nil
	}
	out = render(t, p)
	if strings.Contains(out, "Last run") || strings.Contains(out, "Dead letters") || !strings.Contains(out, "<th>Paused</th>") {
		t.Error("without workers: want a Paused column and no Last run or Dead letters column")
	}
	// A row with a worker value shows the columns although Workers is off.
	n := int64(0)
	p.Jobs[9].DeadLetters = &n
	if out := render(t, p); !strings.Contains(out, "<th>Dead letters</th>") {
		t.Error("a row's dead letter count does not show its column")
	}

	// No leader, no term, no job.
	out = render(t, &web.Page{Replica: web.Replica{Name: "solo"}, StoreTime: t0, Query: web.Query{Page: 1}})
	for _, want := range []string{`<span id="leader-name">none</span>`, "nobody holds the lease", "No leadership term recorded yet", "No job is configured"} {
		if !strings.Contains(out, want) {
			t.Errorf("the empty page lacks %q", want)
		}
	}
}

func fixedSource(p *web.Page, err error) web.Source {
	return web.SourceFunc(func(context.Context, web.Query) (*web.Page, error) { return p, err })
}

func get(t *testing.T, h http.Handler, method, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func TestHandler(t *testing.T) {
	var asked web.Query
	h := web.Handler(web.SourceFunc(func(_ context.Context, q web.Query) (*web.Page, error) {
		asked = q
		return &web.Page{Query: q, Replica: web.Replica{Name: "r1"}}, nil
	}), web.Options{})

	res, body := get(t, h, "GET", "/?job=%20Nightly%20&page=3&attention=on&refresh=2")
	if res.StatusCode != 200 || asked != (web.Query{Job: "Nightly", Page: 3, Attention: true}) {
		t.Fatalf("status %d, source asked %+v", res.StatusCode, asked)
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'sha256-") || strings.Contains(csp, "script-src 'unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if res.Header.Get("Content-Type") != "text/html; charset=utf-8" || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", res.Header)
	}
	if !strings.Contains(body, `data-refresh="2"`) || !strings.Contains(body, `name="refresh" value="2"`) {
		t.Error("?refresh=2 is not the page's refresh, or the filter form drops it")
	}

	for _, tc := range []struct{ param, want string }{
		{"", "5"}, {"abc", "5"}, {"0", "1"}, {"-5", "1"}, {"99999999999999999", "3600"}, {"30", "30"},
	} {
		_, body := get(t, h, "GET", "/?refresh="+tc.param)
		if !strings.Contains(body, `data-refresh="`+tc.want+`"`) {
			t.Errorf("refresh=%q: want a refresh of %ss", tc.param, tc.want)
		}
	}

	// Read-only, and only at "/".
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		res, _ := get(t, h, m, "/")
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: status %d, Allow %q", m, res.StatusCode, res.Header.Get("Allow"))
		}
	}
	if res, _ := get(t, h, "GET", "/nope"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %d", res.StatusCode)
	}
	if res, body := get(t, h, "HEAD", "/"); res.StatusCode != 200 || body != "" || res.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD /: %d, body %q", res.StatusCode, body)
	}
}

// A store that cannot be read still gives a page: the replica's own part
// and the error, with 503 so a probe sees it.
func TestHandlerStoreError(t *testing.T) {
	h := web.Handler(fixedSource(&web.Page{Replica: web.Replica{Name: "r-<9>"}, Total: 3}, errors.New("dial tcp 127.0.0.1:1: connection refused")), web.Options{})
	res, body := get(t, h, "GET", "/")
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d", res.StatusCode)
	}
	for _, want := range []string{"The store could not be read", "connection refused", "r-&lt;9&gt;", "the store could not be read"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// A source that returns no page at all.
	res, body = get(t, web.Handler(fixedSource(nil, errors.New("boom")), web.Options{}), "GET", "/")
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "boom") {
		t.Errorf("nil page: %d %q", res.StatusCode, body)
	}
}

var dataRefresh = regexp.MustCompile(`data-refresh="(\d+)"`)

func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "job=a&page=2", "page=-1", "page=99999999999999999999", "job=%ff%fe", "attention=1&refresh=0",
		"job=" + strings.Repeat("é", 300), "refresh=9223372036854775807", "job=<script>"} {
		f.Add(s)
	}
	h := web.Handler(web.SourceFunc(func(_ context.Context, q web.Query) (*web.Page, error) {
		return &web.Page{Query: q, Matched: 250, Jobs: fixedPage().Jobs[:3]}, nil
	}), web.Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q := web.ParseQuery(v)
		if q.Page < 1 || len(q.Job) > 200 || !utf8.ValidString(q.Job) && utf8.ValidString(v.Get("job")) {
			t.Fatalf("%q: query %+v", raw, q)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, &http.Request{Method: "GET", URL: &url.URL{Path: "/", RawQuery: raw}})
		if rec.Code != 200 {
			t.Fatalf("%q: status %d", raw, rec.Code)
		}
		m := dataRefresh.FindStringSubmatch(rec.Body.String())
		if m == nil || len(m[1]) > 4 || m[1] == "0" {
			t.Fatalf("%q: refresh %v", raw, m)
		}
	})
}

// TestRenderRelays: the relays table lists each relay's kind, queue,
// backlog (n/a with the reason when the store cannot tell) and jobs (the
// first five, then a count), escaped; a page without relays has none.
func TestRenderRelays(t *testing.T) {
	p := fixedPage()
	three, many := int64(3), int64(1234567)
	p.Relays = []onetick.RelayStatus{
		{Kind: onetick.RelayAsynq, Queue: "st1", Jobs: []string{"audit", "report"}, Backlog: &three},
		{Kind: onetick.RelayNATS, Queue: "ticks.mail", Jobs: []string{"mail"}, Note: "not known: JetStream's consumers are yours"},
		{Kind: onetick.RelayRiver, Queue: "<q>", Jobs: []string{"a1", scriptName, "a3", "a4", "a5", "a6", "a7"}, Backlog: &many},
		{Kind: onetick.RelayRiver, Queue: "broken", Jobs: []string{"b"}, Error: "river's tables are not in <schema>"},
	}
	out := render(t, p)
	if !strings.Contains(out, "<h2>Relays</h2>") || !strings.Contains(out, "<th>Relay</th><th>Queue</th><th>Backlog</th><th>Jobs</th>") {
		t.Fatalf("the page has no relays table:\n%s", out)
	}
	rows := regexp.MustCompile(`(?s)<tr data-relay="([^"]*)">(.*?)</tr>`).FindAllStringSubmatch(out, -1)
	if len(rows) != 4 {
		t.Fatalf("%d relay rows, want 4", len(rows))
	}
	text := func(html string) string {
		return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(html, " ")), " ")
	}
	for i, want := range []struct{ key, text string }{
		{"asynq:st1", "asynq st1 3 audit , report"},
		{"nats:ticks.mail", "nats ticks.mail n/a not known: JetStream&#39;s consumers are yours mail"},
		{"river:&lt;q&gt;", "river &lt;q&gt; 1,234,567 a1 , &lt;script&gt;alert(1)&lt;/script&gt; , a3 , a4 , a5 and 2 more"},
		{"river:broken", "river broken n/a river&#39;s tables are not in &lt;schema&gt; b"},
	} {
		if rows[i][1] != want.key || text(rows[i][2]) != want.text {
			t.Errorf("relay row %d: %q %q, want %q %q", i, rows[i][1], text(rows[i][2]), want.key, want.text)
		}
	}
	if !strings.Contains(rows[0][2], `<a class="job" href="jobs/audit">audit</a>`) {
		t.Errorf("a relay's job is not a link to its page: %s", rows[0][2])
	}
	if strings.Contains(out, "<script>alert") {
		t.Error("a job name in the relays table is not escaped")
	}
	p.Relays = nil
	if out := render(t, p); strings.Contains(out, "Relays") || strings.Contains(out, "data-relay") {
		t.Error("a page without relays shows a relays table")
	}
}
