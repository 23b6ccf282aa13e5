// Package notify sends the changes of the jobs' deadline states
// (onetick.DeadlineNotice) to a webhook, signed as the HTTP executor signs
// its requests: the Standard Webhooks scheme of package
// executor/webhook. One POST per change, with a JSON body
//
//	{"job":"nightly","status":"late","deadline":"start",
//	 "slot":"2026-12-02T02:00:00.000Z","slot_ms":1796176800000,
//	 "due":"2026-12-02T02:05:00.000Z","takeover":true,
//	 "at":"2026-12-02T02:05:10.000Z"}
//
// status is late or ok; deadline is the one missed (late) or met again
// (ok); slot the slot that missed it (late) or the newest that met it
// (ok); takeover is present when a new leader announces a job it found
// late (the old leader may have announced it already). The webhook-id is
// JOB:DEADLINE:STATUS:SLOT_MS (webhook.MessageID's encoding), the same
// whichever leader sends it, so a receiver deduplicates on it.
//
// A 2xx answer delivers the notice; anything else (and no answer within
// Timeout) is an error, and the watcher sends the notice again at its next
// check unless the state changed back meanwhile. Redirects are not
// followed. Logs and errors show the URL with its credentials masked,
// never a secret or a signature.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor/webhook"
	"github.com/onetick/onetick/internal/redact"
)

// Bounds and defaults.
const (
	DefaultTimeout = 10 * time.Second
	MaxTimeout     = 5 * time.Minute
	MaxSecrets     = webhook.MaxSecrets
	// drainLimit is how much of an answer is read so the connection can
	// be reused.
	drainLimit = 64 << 10
)

// Config configures a Webhook.
type Config struct {
	// URL is an absolute http or https URL.
	URL string
	// Secrets sign every request, one webhook-signature entry each; list
	// the new and the old secret while a receiver rotates. Each is
	// "whsec_" + standard base64 of 24 to 64 bytes. At least one.
	Secrets []string
	// Timeout bounds one notice (DefaultTimeout when zero).
	Timeout time.Duration
	// Client sends the requests (a copy is used, which follows no
	// redirect); http.DefaultTransport when nil.
	Client *http.Client
	// Clock stamps webhook-timestamp (real time when nil).
	Clock clockwork.Clock
}

// Webhook sends notices to one URL. It implements onetick.DeadlineNotifier.
type Webhook struct {
	url     string
	safeURL string
	secrets []webhook.Secret
	timeout time.Duration
	client  *http.Client
	clock   clockwork.Clock
}

var _ onetick.DeadlineNotifier = (*Webhook)(nil)

// Validate checks cfg as New does (for `onetick validate`).
func (cfg Config) Validate() error {
	_, err := New(cfg)
	return err
}

// New validates cfg and returns the webhook. Errors are
// *onetick.ConfigError naming the field (url, secrets[i], timeout); none
// quotes a secret or the URL's credentials.
func New(cfg Config) (*Webhook, error) {
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return nil, configErr("url", "is required")
	case err != nil:
		return nil, configErr("url", "is not a URL: %s", redact.Error(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, configErr("url", "must be an absolute http:// or https:// URL")
	case u.Host == "":
		return nil, configErr("url", "has no host")
	}
	w := &Webhook{url: cfg.URL, safeURL: redact.URL(cfg.URL), timeout: cfg.Timeout, clock: cfg.Clock}
	if w.secrets, err = webhook.ParseSecrets(cfg.Secrets); err != nil {
		field := "secrets"
		var se *webhook.SecretsError
		if errors.As(err, &se) && se.Index >= 0 {
			field = fmt.Sprintf("secrets[%d]", se.Index)
		}
		return nil, configErr(field, "%v", err)
	}
	switch {
	case w.timeout < 0 || w.timeout > MaxTimeout:
		return nil, configErr("timeout", "must be between 0 and %s", MaxTimeout)
	case w.timeout == 0:
		w.timeout = DefaultTimeout
	}
	w.client = webhook.NoRedirects(cfg.Client)
	if w.clock == nil {
		w.clock = clockwork.NewRealClock()
	}
	return w, nil
}

// body is the JSON sent; its field order is fixed.
type body struct {
	Job      string `json:"job"`
	Status   string `json:"status"`
	Deadline string `json:"deadline"`
	Slot     string `json:"slot"`
	SlotMS   int64  `json:"slot_ms"`
	Due      string `json:"due"`
	Takeover bool   `json:"takeover,omitempty"`
	At       string `json:"at"`
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// Body returns the JSON body of n, as NotifyDeadline sends it.
func Body(n onetick.DeadlineNotice) []byte {
	b, _ := json.Marshal(body{Job: n.Job, Status: n.Status, Deadline: n.Deadline, Slot: n.Slot.String(),
		SlotMS: int64(n.Slot), Due: n.Due.UTC().Format(timeFormat), Takeover: n.Takeover,
		At: n.At.UTC().Format(timeFormat)})
	return b
}

// NotifyDeadline posts n, signed; nil when the receiver answered 2xx.
func (w *Webhook) NotifyDeadline(ctx context.Context, n onetick.DeadlineNotice) error {
	data := Body(n)
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("POST %s: %s", w.safeURL, redact.Error(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "onetick")
	webhook.SetHeaders(req.Header, w.secrets, webhook.MessageID(n.ID()), w.clock.Now(), data)
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL, credentials and all
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("POST %s: no answer within %s", w.safeURL, w.timeout)
		}
		return fmt.Errorf("POST %s: %v", w.safeURL, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST %s: answered %s", w.safeURL, resp.Status)
	}
	return nil
}

func configErr(field, format string, args ...any) error {
	return &onetick.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
