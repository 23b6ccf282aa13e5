package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor/webhook"
	"github.com/onetick/onetick/notify"
)

// Two secrets, as while a receiver rotates.
var (
	oldKey = []byte("0123456789abcdef01234567")
	newKey = []byte("abcdefghijklmnopqrstuvwxyz012345")
	secret = func(k []byte) string { return "whsec_" + base64.StdEncoding.EncodeToString(k) }
)

// verify checks a request's signature as a receiver written from the
// specification would, without package webhook: HMAC-SHA256 of
// id.timestamp.body under key, one of the space-separated v1 entries.
func verify(key []byte, h http.Header, body []byte) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func TestNotifySigned(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 2, 5, 10, 0, time.UTC))
	type got struct {
		h    http.Header
		body []byte
	}
	reqs := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs <- got{r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	wh, err := notify.New(notify.Config{URL: srv.URL + "/hook", Secrets: []string{secret(newKey), secret(oldKey)}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	slot := onetick.SlotOf(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	n := onetick.DeadlineNotice{Job: "nightly.backup", Status: onetick.DeadlineLate, Deadline: onetick.DeadlineStart,
		Slot: slot, Due: slot.Time().Add(5 * time.Minute), Takeover: true, At: clk.Now()}
	if err := wh.NotifyDeadline(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	r := <-reqs
	if id, want := r.h.Get("webhook-id"), "nightly%2Ebackup:start:late:"+strconv.FormatInt(int64(slot), 10); id != want {
		t.Errorf("webhook-id %q, want %q", id, want)
	}
	if ts := r.h.Get("webhook-timestamp"); ts != strconv.FormatInt(clk.Now().Unix(), 10) {
		t.Errorf("webhook-timestamp %q", ts)
	}
	if !verify(oldKey, r.h, r.body) || !verify(newKey, r.h, r.body) {
		t.Errorf("signature %q does not verify under both secrets", r.h.Get("webhook-signature"))
	}
	if err := webhook.Verify(secret(oldKey), r.h, r.body, time.Minute, clk.Now()); err != nil {
		t.Errorf("webhook.Verify: %v", err)
	}
	if ct := r.h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var b map[string]any
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"job": "nightly.backup", "status": "late", "deadline": "start",
		"slot": "2026-12-02T02:00:00.000Z", "slot_ms": float64(slot), "due": "2026-12-02T02:05:00.000Z",
		"takeover": true, "at": "2026-12-02T02:05:10.000Z"}
	for k, v := range want {
		if b[k] != v {
			t.Errorf("body %s = %v, want %v (%s)", k, b[k], v, r.body)
		}
	}
	// Recovery: no takeover key.
	n.Status, n.Takeover = onetick.DeadlineOK, false
	if strings.Contains(string(notify.Body(n)), "takeover") {
		t.Errorf("an ok notice carries takeover: %s", notify.Body(n))
	}
}

func TestNotifyFailures(t *testing.T) {
	n := onetick.DeadlineNotice{Job: "a", Status: onetick.DeadlineLate, Deadline: onetick.DeadlineFinish, Slot: 1}
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusInternalServerError) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { t.Error("a redirect was followed") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)
	send := func(path string, timeout time.Duration) error {
		u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + path + "?token=s3cret"
		wh, err := notify.New(notify.Config{URL: u, Secrets: []string{secret(oldKey)}, Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		err = wh.NotifyDeadline(context.Background(), n)
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("the error shows a credential: %v", err)
		}
		return err
	}
	if err := send("/500", 0); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("500: %v", err)
	}
	if err := send("/moved", 0); err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("redirect: %v", err)
	}
	if err := send("/slow", 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no answer within 50ms") {
		t.Errorf("timeout: %v", err)
	}
}

func TestNotifyConfig(t *testing.T) {
	const bad = "whsec_tooShort"
	for _, c := range []struct {
		cfg          notify.Config
		field, words string
	}{
		{notify.Config{Secrets: []string{secret(oldKey)}}, "url", "is required"},
		{notify.Config{URL: "ftp://h/x", Secrets: []string{secret(oldKey)}}, "url", "http:// or https://"},
		{notify.Config{URL: "http:///x", Secrets: []string{secret(oldKey)}}, "url", "no host"},
		{notify.Config{URL: "http://h/x"}, "secrets", "at least one"},
		{notify.Config{URL: "http://h/x", Secrets: []string{secret(oldKey), bad}}, "secrets[1]", "bytes"},
		{notify.Config{URL: "http://h/x", Secrets: []string{"plain"}}, "secrets[0]", "whsec_"},
		{notify.Config{URL: "http://h/x", Secrets: []string{secret(oldKey)}, Timeout: -time.Second}, "timeout", "between"},
	} {
		err := c.cfg.Validate()
		var ce *onetick.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Msg, c.words) {
			t.Errorf("%+v: %v, want %s: ...%s...", c.cfg.URL, err, c.field, c.words)
		}
		if err != nil && strings.Contains(err.Error(), "tooShort") {
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
}
