package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/onetick/onetick"
)

// FuzzAPIBody sends arbitrary bodies to every endpoint that reads one:
// nothing panics; a JSON body that is not exactly one object and an empty
// body are refused; every refusal is a JSON error with a 4xx status, and
// a refused request changes nothing (the control log, the job sets).
func FuzzAPIBody(f *testing.F) {
	for _, s := range []struct {
		op      uint8
		chunked bool
		body    string
	}{
		{0, false, `{"reason":"x","who":"ops"}`},
		{0, false, `{"reason":"x"} GARBAGE`},
		{0, true, `{"reason":"x"}{}`},
		{1, false, ``},
		{1, false, `null`},
		{1, false, `{"reason":"\u001b[2J"}`},
		{2, false, `{"key":"k1","payload":{"n":1}}`},
		{2, false, `{"key":"123"}`},
		{2, false, `{"payload":[1,2,` + strings.Repeat("3,", 100) + `4]}`},
		{3, false, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:00:05Z","dry_run":true}`},
		{3, false, `{"from":"x","to":"y","max":-1}`},
		{4, false, "jobs:\n  - {name: b1, schedule: \"@every 1h\"}\n"},
		{4, true, "jobs: []\n"},
		{4, false, "jobs:\n"},
		{4, false, "jobs: []\n---\njobs: []\n"},
		{4, false, "jobs:\n  - {name: b1, schedule: \"@every 1h\", payload: {k: \"${HOME}\"}}\n"},
		{4, false, `{"jobs":[{"name":"j","schedule":"@daily"}]}`},
		{4, false, "jobs:\n  - &x {name: b1, schedule: \"@daily\"}\n  - *x\n"},
	} {
		f.Add(s.op, s.chunked, []byte(s.body))
	}
	mux, b, _ := newAPI(f, testToken)
	paths := []struct{ method, path string }{
		{"POST", "/api/v1/jobs/a/pause"}, {"POST", "/api/v1/jobs/a/resume"}, {"POST", "/api/v1/jobs/a/trigger"},
		{"POST", "/api/v1/jobs/a/backfill"}, {"PUT", "/api/v1/jobsets/s?dry_run=false"},
	}
	// Every pause, resume, trigger and backfill is recorded in the control
	// log, every set change moves the version: the newest record and the
	// version are the state.
	type snapshot struct {
		newest  onetick.ControlRecord
		version int64
	}
	state := func(t *testing.T) snapshot {
		var s snapshot
		recs, err := b.ControlLog(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			s.newest = recs[0]
		}
		if s.version, err = b.JobsVersion(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	f.Fuzz(func(t *testing.T, op uint8, chunked bool, body []byte) {
		p := paths[int(op)%len(paths)]
		var r io.Reader = strings.NewReader(string(body))
		if chunked {
			r = hiddenLen{r}
		}
		req := httptest.NewRequest(p.method, p.path, r)
		req.RemoteAddr = local
		req.Host = "127.0.0.1:9464"
		req.Header.Set("Authorization", "Bearer "+testToken)
		if p.method == "POST" {
			req.Header.Set("Content-Type", "application/json")
		}
		before := state(t)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		// What must be refused whatever else is wrong with it: a JSON body
		// that is not exactly one JSON object, an empty job set.
		trimmed := bytes.TrimSpace(body)
		mustRefuse := len(trimmed) == 0 || p.method == "POST" && (!json.Valid(trimmed) || trimmed[0] != '{')
		if w.Code == http.StatusOK {
			if mustRefuse {
				t.Fatalf("%s %s %q was accepted: %s", p.method, p.path, body, w.Body.String())
			}
			return
		}
		var e apiError
		if w.Code < 400 || w.Code >= 500 || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
			t.Fatalf("%s %s %q: %d %s", p.method, p.path, body, w.Code, w.Body.String())
		}
		if after := state(t); after != before {
			t.Fatalf("%s %s %q refused (%d %s) but changed the state: %v -> %v", p.method, p.path, body, w.Code, e.Error, before, after)
		}
	})
}
