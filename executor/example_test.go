package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/onetick/onetick/executor"
	"github.com/onetick/onetick/executor/webhook"
)

// An HTTP executor signs each request per the Standard Webhooks spec; the
// receiver checks it with webhook.Verify. A 410 from the receiver is
// permanent: the tick is dead-lettered at once.
func ExampleHTTP() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var gone atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var tick struct {
			Tick    string          `json:"tick"`
			Attempt int             `json:"attempt"`
			Payload json.RawMessage `json:"payload"`
		}
		json.Unmarshal(body, &tick)
		fmt.Printf("receiver: %s attempt %d payload %s id %s\n", tick.Tick, tick.Attempt, tick.Payload, r.Header.Get("webhook-id"))
		if gone.Load() {
			w.WriteHeader(http.StatusGone)
		}
	}))
	defer srv.Close()

	hook, err := executor.NewHTTP(executor.HTTPConfig{
		URL:     srv.URL + "/tick",
		Secrets: []string{secret},
		Timeout: 10 * time.Second,
		Client:  srv.Client(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	run := executor.Run{Job: "report", Slot: 1714543200000, Epoch: 7, Attempt: 1, Payload: json.RawMessage(`{"to":"ops"}`)}
	fmt.Println("error:", hook.Execute(context.Background(), run))

	gone.Store(true)
	run.Attempt = 2
	err = hook.Execute(context.Background(), run)
	fmt.Println("permanent:", errors.Is(err, executor.ErrPermanent))
	// Output:
	// receiver: report:1714543200000 attempt 1 payload {"to":"ops"} id report:1714543200000
	// error: <nil>
	// receiver: report:1714543200000 attempt 2 payload {"to":"ops"} id report:1714543200000
	// permanent: true
}
