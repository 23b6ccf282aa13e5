package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "0123456789abcdef0123"

// newAPI serves the API over a memory backend with one job "a".
func newAPI(t testing.TB, token string) (*http.ServeMux, *memory.Backend, *bytes.Buffer) {
	t.Helper()
	s, err := cron.Parse("@every 1s", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(memory.Options{})
	t.Cleanup(func() { _ = b.Close() })
	var logs bytes.Buffer
	f, err := config.Parse("test.yaml", []byte("backend: {memory: {}}\njobs:\n  - {name: a, schedule: \"@every 1s\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f.HTTP.Token = token
	a := &api{ops: &onetick.Ops{Backend: b, Jobs: []onetick.Job{{Name: "a", Schedule: s}}}, http: f.HTTP,
		log: slog.New(slog.NewTextHandler(&logs, nil)), file: f}
	mux := http.NewServeMux()
	a.register(mux)
	return mux, b, &logs
}

func do(mux http.Handler, method, path, remote, auth, body string) (int, string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = remote
	r.Host = "127.0.0.1:9464"
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	if method == "POST" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	out, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(out)
}

const (
	local  = "127.0.0.1:5555"
	remote = "10.1.2.3:5555"
)

func TestAPIAuth(t *testing.T) {
	mux, b, logs := newAPI(t, testToken)
	bearer := "Bearer " + testToken
	for _, tc := range []struct {
		name, method, path, from, auth, body string
		want                                 int
	}{
		{"read from loopback, no token", "GET", "/api/v1/jobs", local, "", "", 200},
		{"read from outside, no token", "GET", "/api/v1/jobs", remote, "", "", 401},
		{"read from outside, wrong token", "GET", "/api/v1/jobs", remote, "Bearer nope", "", 401},
		{"read from outside, token", "GET", "/api/v1/jobs", remote, bearer, "", 200},
		{"change without token, even on loopback", "POST", "/api/v1/jobs/a/pause", local, "", `{"reason":"x"}`, 401},
		{"change with a wrong token", "POST", "/api/v1/jobs/a/pause", local, "Bearer " + testToken + "x", `{"reason":"x"}`, 401},
		{"change with the token in another scheme", "POST", "/api/v1/jobs/a/pause", local, "Basic " + testToken, `{"reason":"x"}`, 401},
		{"unknown job", "POST", "/api/v1/jobs/nope/pause", local, bearer, `{"reason":"x"}`, 404},
		{"pause without a reason", "POST", "/api/v1/jobs/a/pause", local, bearer, `{}`, 400},
		{"unknown field", "POST", "/api/v1/jobs/a/pause", local, bearer, `{"reason":"x","colour":1}`, 400},
		{"backfill reversed", "POST", "/api/v1/jobs/a/backfill", local, bearer, `{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}`, 400},
		{"backfill malformed", "POST", "/api/v1/jobs/a/backfill", local, bearer, `{"from":"yesterday","to":"2026-01-01T00:00:00Z"}`, 400},
		{"backfill too large", "POST", "/api/v1/jobs/a/backfill", local, bearer, `{"from":"2025-01-01T00:00:00Z","to":"2025-01-02T00:00:00Z"}`, 400},
		{"trigger with invalid payload", "POST", "/api/v1/jobs/a/trigger", local, bearer, `{"payload":"x}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(mux, tc.method, tc.path, tc.from, tc.auth, tc.body)
			if code != tc.want {
				t.Fatalf("%s %s from %s: %d %s, want %d", tc.method, tc.path, tc.from, code, body, tc.want)
			}
			if code >= 400 && !strings.Contains(body, `"error"`) {
				t.Fatalf("error body %q", body)
			}
		})
	}
	// None of the refused requests changed anything.
	if recs, _ := b.ControlLog(t.Context(), 10); len(recs) != 0 {
		t.Fatalf("refused requests recorded controls: %+v", recs)
	}
	// A good pause.
	if code, body := do(mux, "POST", "/api/v1/jobs/a/pause", local, bearer, `{"reason":"incident","who":"ops"}`); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	ctl, _, _ := b.Controls(t.Context())
	if !ctl["a"].Paused || !strings.HasPrefix(ctl["a"].Actor.Who, "ops (") || ctl["a"].Actor.Reason != "incident" {
		t.Fatalf("controls %+v", ctl)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the token appears in the log")
	}
}

func TestAPIReadOnlyWithoutToken(t *testing.T) {
	mux, _, _ := newAPI(t, "")
	if code, _ := do(mux, "GET", "/api/v1/jobs", remote, "", ""); code != 200 {
		t.Fatalf("read without a configured token: %d", code)
	}
	code, body := do(mux, "POST", "/api/v1/jobs/a/resume", local, "Bearer anything", "")
	if code != 403 || !strings.Contains(body, "http.token") {
		t.Fatalf("change without a configured token: %d %s", code, body)
	}
}

func TestAPITriggerIdempotency(t *testing.T) {
	mux, b, _ := newAPI(t, testToken)
	post := func(hdr, body string) onetick.TriggerResult {
		r := httptest.NewRequest("POST", "/api/v1/jobs/a/trigger", strings.NewReader(body))
		r.RemoteAddr = local
		r.Host = "localhost:9464"
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set("Content-Type", "application/json")
		if hdr != "" {
			r.Header.Set("Idempotency-Key", hdr)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("trigger: %d %s", w.Code, w.Body.String())
		}
		var res onetick.TriggerResult
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := post("k1", `{"payload":{"n":1}}`)
	again := post("k1", `{"payload":{"n":1}}`)
	if !first.Enqueued || again.Enqueued || first.Tick != "a:trigger:k1" || again.Tick != first.Tick {
		t.Fatalf("first %+v, retry %+v", first, again)
	}
	recs := b.Stream(onetick.DefaultStream("a"))
	if len(recs) != 1 || recs[0].Payload != `{"n":1}` || recs[0].Kind != onetick.KindTrigger {
		t.Fatalf("stream %+v", recs)
	}
	// A backfill: dry run first, then twice for real.
	from := time.Now().Add(-10 * time.Second).UTC().Format(time.RFC3339)
	to := time.Now().Add(-6 * time.Second).UTC().Format(time.RFC3339)
	for i, want := range []string{`"dry_run":true`, `"enqueued":5`, `"enqueued":0`} {
		body := `{"from":"` + from + `","to":"` + to + `"` + map[bool]string{true: `,"dry_run":true`, false: ``}[i == 0] + `}`
		code, out := do(mux, "POST", "/api/v1/jobs/a/backfill", local, "Bearer "+testToken, body)
		if code != 200 || !strings.Contains(out, want) {
			t.Fatalf("backfill %d: %d %s, want %s", i, code, out, want)
		}
	}
}
