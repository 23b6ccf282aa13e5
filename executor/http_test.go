package executor_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor"
	"github.com/onetick/onetick/executor/webhook"
)

// Secrets of the tests: two for rotation, one nobody signs with.
var (
	secretNew   = "whsec_" + base64.StdEncoding.EncodeToString([]byte("new-secret-new-secret-new-secret"))
	secretOld   = "whsec_" + base64.StdEncoding.EncodeToString([]byte("old-secret-old-secret-old-secret"))
	secretWrong = "whsec_" + base64.StdEncoding.EncodeToString([]byte("wrong-secret-wrong-secret-wrong!"))
)

// checkSignature is the receiver's side of the Standard Webhooks spec,
// written from the spec and sharing no code with package webhook: it finds
// the headers by a case-insensitive scan, rebuilds the signed content byte
// by byte and compares each "v1," entry with its own HMAC. It reports
// whether the request verifies under secret.
func checkSignature(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	get := func(name string) string {
		for k, v := range h {
			if strings.EqualFold(k, name) && len(v) == 1 {
				return v[0]
			}
		}
		return ""
	}
	id, ts, sigs := get("webhook-id"), get("webhook-timestamp"), get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook header")
	}
	if strings.Contains(id, ".") {
		return errors.New("webhook-id contains '.'")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %v", ts, err)
	}
	if skew := now.Unix() - sec; skew > int64(tolerance/time.Second) || -skew > int64(tolerance/time.Second) {
		return fmt.Errorf("stale timestamp: %ds from now", skew)
	}
	if !strings.HasPrefix(secret, "whsec_") {
		return errors.New("secret without whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	if err != nil {
		return err
	}
	signed := append(append(append(append([]byte(id), '.'), ts...), '.'), body...)
	m := hmac.New(sha256.New, key)
	m.Write(signed)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Split(sigs, " ") {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// request is what the in-test receiver saw.
type request struct {
	Method string
	Header http.Header
	Body   []byte
	// Verified maps each candidate secret to the receiver's verdict.
	Verified map[string]error
}

// receiver is an httptest server that records every request, verifies it
// against each candidate secret with checkSignature, and answers with
// respond (204 when nil).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	arrived  chan request
}

func newReceiver(t *testing.T, now func() time.Time, respond http.HandlerFunc) *receiver {
	rc := &receiver{arrived: make(chan request, 100)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("receiver: reading body: %v", err)
		}
		req := request{Method: r.Method, Header: r.Header.Clone(), Body: body, Verified: map[string]error{}}
		for _, s := range []string{secretNew, secretOld, secretWrong} {
			req.Verified[s] = checkSignature(s, r.Header, body, now(), 5*time.Minute)
		}
		rc.mu.Lock()
		rc.requests = append(rc.requests, req)
		rc.mu.Unlock()
		rc.arrived <- req
		if respond == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		respond(w, r)
	}))
	t.Cleanup(rc.Close) // also closes the idle connections of rc.Client()
	return rc
}

func (rc *receiver) Requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.requests...)
}

func newHTTP(t *testing.T, rc *receiver, cfg executor.HTTPConfig) *executor.HTTP {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = rc.URL + "/hook"
	}
	if cfg.Secrets == nil {
		cfg.Secrets = []string{secretNew}
	}
	if cfg.Client == nil {
		cfg.Client = rc.Client()
	}
	h, err := executor.NewHTTP(cfg)
	if err != nil {
		t.Fatalf("NewHTTP: %v", err)
	}
	return h
}

var testSlot = onetick.Slot(1714543200123) // 2024-05-01T06:00:00.123Z

func TestHTTPRequestIsSignedPerSpec(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Now().Truncate(time.Second))
	rc := newReceiver(t, clock.Now, nil)
	h := newHTTP(t, rc, executor.HTTPConfig{
		Secrets: []string{secretNew, secretOld}, // rotating: both sign
		Headers: map[string]string{"X-Api-Key": "k1", "User-Agent": "custom"},
		Clock:   clock,
	})
	run := executor.Run{Job: "db.backup", Slot: testSlot, Tick: onetick.TickID("db.backup", testSlot),
		Epoch: 42, Attempt: 1, Payload: json.RawMessage(`{"db": "main", "n": [1, 2]}`)}
	if err := h.Execute(context.Background(), run); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	clock.Advance(90 * time.Second)
	run.Attempt = 2
	if err := h.Execute(context.Background(), run); err != nil {
		t.Fatalf("Execute, attempt 2: %v", err)
	}

	reqs := rc.Requests()
	if len(reqs) != 2 {
		t.Fatalf("receiver saw %d requests, want 2", len(reqs))
	}
	for i, req := range reqs {
		if req.Verified[secretNew] != nil || req.Verified[secretOld] != nil {
			t.Errorf("attempt %d: a receiver holding either rotated secret must verify: new=%v old=%v", i+1, req.Verified[secretNew], req.Verified[secretOld])
		}
		if req.Verified[secretWrong] == nil {
			t.Errorf("attempt %d: verified under a secret nobody signed with", i+1)
		}
		if n := len(strings.Split(req.Header.Get("Webhook-Signature"), " ")); n != 2 {
			t.Errorf("attempt %d: %d signatures, want one per secret", i+1, n)
		}
		if got, want := req.Header.Get("Webhook-Timestamp"), strconv.FormatInt(clock.Now().Add(time.Duration(i-1)*90*time.Second).Unix(), 10); got != want {
			t.Errorf("attempt %d: webhook-timestamp %s, want the send time %s", i+1, got, want)
		}
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" ||
			req.Header.Get("X-Api-Key") != "k1" || req.Header.Get("User-Agent") != "custom" {
			t.Errorf("attempt %d: method %s, headers %v", i+1, req.Method, req.Header)
		}
		var body map[string]any
		if err := json.Unmarshal(req.Body, &body); err != nil {
			t.Fatalf("body %s: %v", req.Body, err)
		}
		want := map[string]any{
			"job": "db.backup", "slot": "2024-05-01T06:00:00.123Z", "slot_ms": float64(1714543200123),
			"tick": "db.backup:1714543200123", "epoch": float64(42), "attempt": float64(i + 1),
			"payload": map[string]any{"db": "main", "n": []any{float64(1), float64(2)}},
		}
		if fmt.Sprint(body) != fmt.Sprint(want) {
			t.Errorf("attempt %d: body %v, want %v", i+1, body, want)
		}
	}
	// The id is derived from the tick (the job's '.' escaped as the spec
	// requires) and stays the same across attempts: receivers dedupe on it.
	id1, id2 := reqs[0].Header.Get("Webhook-Id"), reqs[1].Header.Get("Webhook-Id")
	if id1 != "db%2Ebackup:1714543200123" || id1 != id2 || id1 != webhook.MessageID(run.Tick) {
		t.Errorf("webhook-id %q then %q, want db%%2Ebackup:1714543200123 both times", id1, id2)
	}
}

func TestHTTPStaleTimestampIsRejectedByReceiver(t *testing.T) {
	real := time.Now()
	// The sender's clock is ten minutes behind: its signature is valid but
	// its timestamp is outside the receiver's five-minute tolerance.
	clock := clockwork.NewFakeClockAt(real.Add(-10 * time.Minute))
	rc := newReceiver(t, time.Now, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	h := newHTTP(t, rc, executor.HTTPConfig{Clock: clock})
	err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1})
	if !errors.Is(err, executor.ErrPermanent) {
		t.Fatalf("Execute = %v, want a permanent failure (401)", err)
	}
	req := <-rc.arrived
	if v := req.Verified[secretNew]; v == nil || !strings.Contains(v.Error(), "stale") {
		t.Fatalf("receiver verdict %v, want a stale timestamp", v)
	}
	// The same request, judged at the sender's time, verifies: only the
	// timestamp made it fail.
	if err := checkSignature(secretNew, req.Header, req.Body, clock.Now(), 5*time.Minute); err != nil {
		t.Fatalf("signature itself invalid: %v", err)
	}
}

func TestHTTPOutcomes(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2024, 5, 1, 6, 0, 0, 0, time.UTC))
	other := newReceiver(t, clock.Now, nil) // a redirect target that must never be hit
	long := strings.Repeat("x", 10_000)
	cases := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		ok         bool
		permanent  bool
		retryAfter time.Duration // 0: no RetryAfter
		contains   []string
	}{
		{name: "200", status: 200, ok: true},
		{name: "204", status: 204, ok: true},
		{name: "299", status: 299, ok: true},
		{name: "302 not followed", status: 302, header: map[string]string{"Location": other.URL + "/x?token=t0ps3cret"}, permanent: true,
			contains: []string{"302 Found", "redirect to " + other.URL + "/x?token=xxxxx not followed"}},
		{name: "400", status: 400, body: "field x missing", permanent: true, contains: []string{"400 Bad Request", "client error", `body "field x missing"`}},
		{name: "401", status: 401, permanent: true},
		{name: "404", status: 404, permanent: true},
		{name: "408", status: 408, contains: []string{"408 Request Timeout"}},
		{name: "410 gone", status: 410, permanent: true, contains: []string{"410 Gone", "gone"}},
		{name: "429 seconds", status: 429, header: map[string]string{"Retry-After": "7"}, retryAfter: 7 * time.Second, contains: []string{"rate limited", "retry after 7s"}},
		{name: "429 without Retry-After", status: 429},
		{name: "429 huge Retry-After capped", status: 429, header: map[string]string{"Retry-After": "99999999999999999999999"}, retryAfter: executor.MaxRetryAfter},
		{name: "500", status: 500, body: long, contains: []string{"server error"}},
		{name: "502", status: 502},
		{name: "503 date", status: 503, header: map[string]string{"Retry-After": clock.Now().Add(2 * time.Minute).Format(http.TimeFormat)}, retryAfter: 2 * time.Minute},
		{name: "503 garbage Retry-After", status: 503, header: map[string]string{"Retry-After": "soon"}},
		{name: "500 ignores Retry-After", status: 500, header: map[string]string{"Retry-After": "7"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := newReceiver(t, clock.Now, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			h := newHTTP(t, rc, executor.HTTPConfig{Clock: clock, MaxBodySnippet: 100})
			err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1})
			if c.ok {
				if err != nil {
					t.Fatalf("Execute = %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Execute = nil, want an error")
			}
			if got := errors.Is(err, executor.ErrPermanent); got != c.permanent {
				t.Errorf("permanent = %v, want %v (%v)", got, c.permanent, err)
			}
			d, has := executor.RetryAfter(err)
			if has != (c.retryAfter > 0) || d != c.retryAfter {
				t.Errorf("RetryAfter = %v, %v; want %v", d, has, c.retryAfter)
			}
			var he *executor.HTTPError
			if !errors.As(err, &he) || he.StatusCode != c.status {
				t.Fatalf("error %v is not an *HTTPError with status %d", err, c.status)
			}
			if len(he.Body) > 100+len("…") {
				t.Errorf("body snippet is %d bytes, want at most MaxBodySnippet=100", len(he.Body))
			}
			for _, s := range c.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "t0ps3cret") {
				t.Errorf("error %q leaks the Location's query", err)
			}
		})
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("the redirect target received %d requests; redirects must not be followed", n)
	}
}

// blockingReceiver holds every request until the client gives up on it.
func blockingReceiver(t *testing.T) *receiver {
	return newReceiver(t, time.Now, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
}

func TestHTTPTimeoutIsRetryable(t *testing.T) {
	rc := blockingReceiver(t)
	h := newHTTP(t, rc, executor.HTTPConfig{Timeout: 200 * time.Millisecond})
	err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1})
	if err == nil || !strings.Contains(err.Error(), "timed out: no response within 200ms") {
		t.Fatalf("Execute = %v, want a timeout", err)
	}
	if errors.Is(err, executor.ErrPermanent) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a timeout of the attempt is an ordinary failure, not %v", err)
	}
}

func TestHTTPCancelAbandonsRequest(t *testing.T) {
	rc := blockingReceiver(t)
	h := newHTTP(t, rc, executor.HTTPConfig{Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Execute(ctx, executor.Run{Job: "j", Slot: testSlot, Attempt: 1}) }()
	<-rc.arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	if err := h.Execute(ctx, executor.Run{Job: "j", Slot: testSlot, Attempt: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute with a done context = %v, want context.Canceled", err)
	}
	if n := len(rc.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1: nothing is sent once the context is done", n)
	}
}

func TestHTTPTransportErrorIsRetryable(t *testing.T) {
	rc := newReceiver(t, time.Now, nil)
	h := newHTTP(t, rc, executor.HTTPConfig{})
	rc.Close()
	err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1})
	if err == nil || errors.Is(err, executor.ErrPermanent) || !strings.Contains(err.Error(), "no response") {
		t.Fatalf("Execute = %v, want an ordinary failure with no response", err)
	}
}

func TestHTTPInvalidPayloadIsPermanent(t *testing.T) {
	rc := newReceiver(t, time.Now, nil)
	h := newHTTP(t, rc, executor.HTTPConfig{})
	err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1, Payload: json.RawMessage(`{"a":`)})
	if !errors.Is(err, executor.ErrPermanent) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("Execute = %v, want a permanent invalid-JSON failure", err)
	}
	if err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1}); err != nil {
		t.Fatalf("empty payload: %v", err)
	}
	if req := <-rc.arrived; !strings.Contains(string(req.Body), `"payload":null`) {
		t.Fatalf("empty payload sent as %s, want null", req.Body)
	}
}

func TestHTTPNeverRevealsSecrets(t *testing.T) {
	rec := newRecorder()
	rc := newReceiver(t, time.Now, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	u := strings.Replace(rc.URL, "http://", "http://user:pa55word@", 1) + "/hook?token=t0ken"
	h := newHTTP(t, rc, executor.HTTPConfig{
		URL: u, Headers: map[string]string{"Authorization": "Bearer b3arer"},
		Secrets: []string{secretNew, secretOld}, Logger: rec.Logger(),
	})
	err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1})
	if err == nil {
		t.Fatal("want an error")
	}
	req := <-rc.arrived
	if req.Header.Get("Authorization") != "Bearer b3arer" {
		t.Fatalf("Authorization not sent: %v", req.Header)
	}
	secrets := []string{"pa55word", "t0ken", "b3arer", secretNew[6:], secretOld[6:]}
	for _, sig := range strings.Split(req.Header.Get("Webhook-Signature"), " ") {
		secrets = append(secrets, strings.TrimPrefix(sig, "v1,"))
	}
	text := err.Error() + "\n" + rec.String()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%q revealed in:\n%s", s, text)
		}
	}
	if !strings.Contains(text, strings.Replace(rc.URL, "http://", "http://user:xxxxx@", 1)+"/hook?token=xxxxx") {
		t.Errorf("the redacted URL should still name host and path:\n%s", text)
	}
	if len(rec.Entries()) == 0 {
		t.Error("no debug log line for the attempt")
	}
}

func TestNewHTTPValidation(t *testing.T) {
	ok := executor.HTTPConfig{URL: "https://example.com/hook", Secrets: []string{secretNew}}
	cases := []struct {
		field string
		edit  func(*executor.HTTPConfig)
	}{
		{"URL", func(c *executor.HTTPConfig) { c.URL = "" }},
		{"URL", func(c *executor.HTTPConfig) { c.URL = "/relative" }},
		{"URL", func(c *executor.HTTPConfig) { c.URL = "ftp://example.com/" }},
		{"URL", func(c *executor.HTTPConfig) { c.URL = "http://%zz" }},
		{"URL", func(c *executor.HTTPConfig) { c.URL = "http:///path" }},
		{"Method", func(c *executor.HTTPConfig) { c.Method = "PO ST" }},
		{`Headers["Bad Name"]`, func(c *executor.HTTPConfig) { c.Headers = map[string]string{"Bad Name": "v"} }},
		{`Headers["webhook-id"]`, func(c *executor.HTTPConfig) { c.Headers = map[string]string{"webhook-id": "v"} }},
		{`Headers["Content-Type"]`, func(c *executor.HTTPConfig) { c.Headers = map[string]string{"Content-Type": "text/plain"} }},
		{`Headers["X-A"]`, func(c *executor.HTTPConfig) { c.Headers = map[string]string{"X-A": "a\r\nInjected: 1"} }},
		{"Timeout", func(c *executor.HTTPConfig) { c.Timeout = -time.Second }},
		{"Secrets", func(c *executor.HTTPConfig) { c.Secrets = nil }},
		{"Secrets[1]", func(c *executor.HTTPConfig) { c.Secrets = []string{secretNew, "plain-text-secret"} }},
		{"Secrets[0]", func(c *executor.HTTPConfig) { c.Secrets = []string{"whsec_c2hvcnQ="} }},
		{"MaxBodySnippet", func(c *executor.HTTPConfig) { c.MaxBodySnippet = -1 }},
	}
	for _, c := range cases {
		cfg := ok
		c.edit(&cfg)
		_, err := executor.NewHTTP(cfg)
		var ce *onetick.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, onetick.ErrInvalidConfig) {
			t.Errorf("%s: NewHTTP = %v, want a ConfigError for field %s", c.field, err, c.field)
		}
		if err != nil && strings.Contains(err.Error(), "plain-text-secret") {
			t.Errorf("config error reveals the secret: %v", err)
		}
	}
	if _, err := executor.NewHTTP(ok); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}
