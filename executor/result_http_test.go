package executor_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor"
)

// reportedHTTP runs h once and returns its error and what it reported.
func reportedHTTP(t *testing.T, h *executor.HTTP) (error, onetick.Result, int) {
	t.Helper()
	var res onetick.Result
	n := 0
	err := h.Execute(context.Background(), executor.Run{Job: "j", Slot: testSlot, Attempt: 1,
		Report: func(got onetick.Result) { res = got; n++ }})
	return err, res, n
}

// An HTTP attempt reports the response's status and the end of its body;
// the error keeps the body's start.
func TestHTTPReportsStatusAndBodyTail(t *testing.T) {
	rc := newReceiver(t, time.Now, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("START" + strings.Repeat("a", 3*onetick.MaxEventOutput) + "END"))
	})
	err, res, n := reportedHTTP(t, newHTTP(t, rc, executor.HTTPConfig{}))
	var he *executor.HTTPError
	if !errors.As(err, &he) || !strings.HasPrefix(he.Body, "START") {
		t.Fatalf("Execute = %v, want a 503 with the body's start", err)
	}
	if n != 1 || res.Status != http.StatusServiceUnavailable || res.Exit != nil {
		t.Fatalf("reported %d times: %+v, want status 503 once", n, res)
	}
	if len(res.Output) != onetick.MaxEventOutput || !strings.HasSuffix(res.Output, "aaaEND") {
		t.Fatalf("output of %d bytes ending %q, want the body's last %d bytes", len(res.Output),
			res.Output[max(0, len(res.Output)-10):], onetick.MaxEventOutput)
	}

	rc = newReceiver(t, time.Now, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"rows":42}`)) })
	err, res, _ = reportedHTTP(t, newHTTP(t, rc, executor.HTTPConfig{}))
	if err != nil || res.Status != http.StatusOK || res.Output != `{"rows":42}` {
		t.Fatalf("Execute = %v, reported %+v", err, res)
	}
}

// A body longer than MaxBodyRead is read no further: the output is the
// end of its first MaxBodyRead bytes, marked.
func TestHTTPBodyBiggerThanMaxBodyRead(t *testing.T) {
	rc := newReceiver(t, time.Now, func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("a", 64<<10))
		for range executor.MaxBodyRead / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		// Past the limit: never read, so never reported.
		w.Write([]byte(strings.Repeat("b", executor.MaxBodyRead)))
	})
	err, res, _ := reportedHTTP(t, newHTTP(t, rc, executor.HTTPConfig{}))
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("Execute = %v, reported %+v", err, res)
	}
	read, note, _ := strings.Cut(res.Output, "\n[onetick: ")
	if len(res.Output) > onetick.MaxEventOutput || strings.Trim(read, "a") != "" || len(read) < onetick.MaxEventOutput-100 ||
		!strings.HasPrefix(note, "response body longer than 1048576 bytes") {
		t.Fatalf("output of %d bytes: %q", len(res.Output), res.Output[max(0, len(res.Output)-120):])
	}
}

// The attempt's timeout covers reading the body: a receiver that answers
// 200 and then stalls does not hold the attempt; its status decides, and
// the output says the body was cut.
func TestHTTPTimeoutCoversBody(t *testing.T) {
	rc := newReceiver(t, time.Now, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	err, res, _ := reportedHTTP(t, newHTTP(t, rc, executor.HTTPConfig{Timeout: 300 * time.Millisecond}))
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("Execute = %v, reported %+v: the status decides", err, res)
	}
	if !strings.HasPrefix(res.Output, "partial\n") || !strings.Contains(res.Output, "timed out after 300ms") {
		t.Fatalf("output %q", res.Output)
	}
}
