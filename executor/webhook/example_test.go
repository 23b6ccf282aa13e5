package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/onetick/onetick/executor/webhook"
)

// A receiver checks the signature on the raw body before decoding it, and
// answers 401 when it fails: onetick treats a 4xx other than 408 and 429 as
// permanent and dead-letters the tick, so a misconfigured secret shows up in
// `onetick dead list` instead of being retried forever.
func ExampleVerify() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // from your configuration

	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, r.Header, body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// The webhook-id is the same on every attempt of a tick: keep the
		// ids you processed (for longer than onetick's retries last) and
		// answer 2xx to a repeat without doing the work again.
		var tick struct {
			Job     string          `json:"job"`
			Slot    time.Time       `json:"slot"`
			Attempt int             `json:"attempt"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(body, &tick); err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
		fmt.Printf("run %s for %s (attempt %d) with %s\n", tick.Job, tick.Slot.Format(time.RFC3339), tick.Attempt, tick.Payload)
		w.WriteHeader(http.StatusNoContent)
	})

	// What onetick sends, built here by hand for the example.
	body := []byte(`{"job":"report","slot":"2024-05-01T06:00:00.000Z","slot_ms":1714543200000,"tick":"report:1714543200000","epoch":7,"attempt":1,"payload":{"to":"ops"}}`)
	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	key, _ := webhook.ParseSecret(secret)
	webhook.SetHeaders(req.Header, []webhook.Secret{key}, webhook.MessageID("report:1714543200000"), time.Now(), body)

	rec := httptest.NewRecorder()
	receiver.ServeHTTP(rec, req)
	fmt.Println(rec.Code)

	// A request signed with another secret is refused.
	other, _ := webhook.ParseSecret("whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	webhook.SetHeaders(req.Header, []webhook.Secret{other}, webhook.MessageID("report:1714543200000"), time.Now(), body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec = httptest.NewRecorder()
	receiver.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// run report for 2024-05-01T06:00:00Z (attempt 1) with {"to":"ops"}
	// 204
	// 401
}
