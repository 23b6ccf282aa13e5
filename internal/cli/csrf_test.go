package cli

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// A change from another site is refused before the token is looked at,
// and a POST that does not declare JSON is refused with 415; none of them
// changes anything. The job page's own requests (same-origin fetch with
// Origin and Content-Type: application/json) and clients that are not
// browsers (no Sec-Fetch-Site, no Origin) pass.
func TestCSRFRefusals(t *testing.T) {
	mux, b, _ := newAPI(t, testToken)
	const host = "127.0.0.1:9464"
	type hdrs map[string]string
	json := "application/json"
	for _, tc := range []struct {
		name   string
		method string
		path   string
		h      hdrs
		want   int
		says   string
	}{
		{"cross-site fetch", "POST", "/api/v1/jobs/a/pause", hdrs{"Sec-Fetch-Site": "cross-site", "Content-Type": json}, 403, "cross-site"},
		{"same-site fetch (another port or subdomain)", "POST", "/api/v1/jobs/a/pause", hdrs{"Sec-Fetch-Site": "same-site", "Content-Type": json}, 403, "same-site"},
		{"cross-site resume", "POST", "/api/v1/jobs/a/resume", hdrs{"Sec-Fetch-Site": "cross-site", "Content-Type": json}, 403, "Sec-Fetch-Site"},
		{"cross-site trigger", "POST", "/api/v1/jobs/a/trigger", hdrs{"Sec-Fetch-Site": "cross-site", "Content-Type": json}, 403, "Sec-Fetch-Site"},
		{"cross-site backfill", "POST", "/api/v1/jobs/a/backfill", hdrs{"Sec-Fetch-Site": "cross-site", "Content-Type": json}, 403, "Sec-Fetch-Site"},
		{"cross-site replay", "POST", "/api/v1/dead/1-0/replay", hdrs{"Sec-Fetch-Site": "cross-site", "Content-Type": json}, 403, "Sec-Fetch-Site"},
		{"cross-site job set", "PUT", "/api/v1/jobsets/s", hdrs{"Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"cross-site removal", "DELETE", "/api/v1/jobsets/s/jobs/x", hdrs{"Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"an old browser on another site", "POST", "/api/v1/jobs/a/pause", hdrs{"Origin": "http://evil.example", "Content-Type": json}, 403, "evil.example"},
		{"another port of this host", "POST", "/api/v1/jobs/a/pause", hdrs{"Origin": "http://127.0.0.1:8080", "Content-Type": json}, 403, "origin"},
		{"an opaque origin (sandboxed frame, file)", "POST", "/api/v1/jobs/a/pause", hdrs{"Origin": "null", "Content-Type": json}, 403, "origin"},
		{"a matching Origin with a cross-site mark", "POST", "/api/v1/jobs/a/pause", hdrs{"Origin": "http://" + host, "Sec-Fetch-Site": "cross-site", "Content-Type": json}, 403, "cross-site"},
		{"a form's text/plain", "POST", "/api/v1/jobs/a/pause", hdrs{"Content-Type": "text/plain"}, 415, "application/json"},
		{"a form's urlencoded body", "POST", "/api/v1/jobs/a/pause", hdrs{"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"a multipart form", "POST", "/api/v1/jobs/a/trigger", hdrs{"Content-Type": "multipart/form-data; boundary=x"}, 415, "application/json"},
		{"no Content-Type", "POST", "/api/v1/jobs/a/backfill", hdrs{}, 415, "got none"},
		{"no Content-Type on a replay", "POST", "/api/v1/dead/1-0/replay", hdrs{}, 415, "got none"},
		{"a malformed Content-Type", "POST", "/api/v1/jobs/a/pause", hdrs{"Content-Type": "application/json; ="}, 415, "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"reason":"x"}`
			if tc.method == "PUT" {
				body = "jobs: []\n"
			}
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(body))
			r.RemoteAddr, r.Host = local, host
			r.Header.Set("Authorization", "Bearer "+testToken)
			for k, v := range tc.h {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.says) || !strings.Contains(w.Body.String(), "nothing was changed") {
				t.Fatalf("%d %s, want %d saying %q and nothing was changed", w.Code, w.Body.String(), tc.want, tc.says)
			}
		})
	}
	if recs, _ := b.ControlLog(t.Context(), 10); len(recs) != 0 {
		t.Fatalf("refused requests recorded controls: %+v", recs)
	}
	if v, _ := b.JobsVersion(t.Context()); v != 0 {
		t.Fatalf("a refused job set changed the version to %d", v)
	}
	// What passes: the page's own request, a typed one, a client that is
	// not a browser, JSON with a charset.
	for i, h := range []hdrs{
		{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + host, "Content-Type": json},
		{"Sec-Fetch-Site": "none", "Content-Type": json},
		{"Origin": "http://" + strings.ToUpper("localhost") + ":9464", "Content-Type": json},
		{"Content-Type": "application/json; charset=utf-8"},
	} {
		r := httptest.NewRequest("POST", "/api/v1/jobs/a/pause", strings.NewReader(`{"reason":"ok"}`))
		r.RemoteAddr, r.Host = local, host
		if _, ok := h["Origin"]; ok && strings.Contains(h["Origin"], "LOCALHOST") {
			r.Host = "localhost:9464"
		}
		r.Header.Set("Authorization", "Bearer "+testToken)
		for k, v := range h {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Errorf("case %d %v: %d %s", i, h, w.Code, w.Body.String())
		}
	}
	// A cross-site request is refused before the token: a wrong token
	// gets 403, not 401 (nothing about the token is told to another site).
	r := httptest.NewRequest("POST", "/api/v1/jobs/a/pause", strings.NewReader(`{"reason":"x"}`))
	r.RemoteAddr, r.Host = local, host
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	r.Header.Set("Authorization", "Bearer wrong")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != 403 {
		t.Errorf("cross-site with a wrong token: %d", w.Code)
	}
	// Reads are not changes: a cross-site GET is answered (the Host check
	// and the browser's same-origin policy keep its answer from the page).
	r = httptest.NewRequest("GET", "/api/v1/jobs", nil)
	r.RemoteAddr, r.Host = local, host
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("cross-site read: %d", w.Code)
	}
}
