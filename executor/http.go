package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor/webhook"
	"github.com/onetick/onetick/internal/redact"
)

// HTTP defaults and bounds.
const (
	DefaultHTTPTimeout    = 30 * time.Second // the specification recommends 15 to 30 s
	DefaultMaxBodySnippet = 512
	maxBodySnippet        = 64 << 10
)

// HTTPConfig configures an HTTP executor.
type HTTPConfig struct {
	// Method defaults to POST.
	Method string
	// URL is an absolute http or https URL. Credentials in it are sent but
	// never logged: logs and errors show it with its password and the
	// values of its query masked (package internal/redact).
	URL string
	// Headers are added to every request. They may carry credentials
	// (Authorization): their values are never logged or put in errors. The
	// webhook-* headers, Content-Type, Content-Length, Host, Connection and
	// Transfer-Encoding are set by the executor and cannot be given here.
	Headers map[string]string
	// Timeout bounds one attempt, from sending to reading the response
	// body (at most MaxBodyRead bytes); DefaultHTTPTimeout when zero. A
	// body still arriving when it passes is cut: the status alone decides
	// the outcome.
	Timeout time.Duration
	// Secrets sign every request, one webhook-signature entry each, in this
	// order; list the new secret and the old one while receivers rotate.
	// Each is "whsec_" + standard base64 of 24 to 64 bytes (see package
	// webhook). At least one is required.
	Secrets []string
	// Client sends the requests (http.DefaultTransport when nil). The
	// executor uses a copy whose CheckRedirect refuses to follow redirects;
	// the given client is not modified.
	Client *http.Client
	// MaxBodySnippet is how many bytes of a failed response's body go into
	// the error; DefaultMaxBodySnippet when zero, at most 64 KiB.
	MaxBodySnippet int
	// Logger receives one debug line per attempt; discarded when nil.
	Logger *slog.Logger
	// Clock stamps webhook-timestamp and dates Retry-After; real time when
	// nil.
	Clock clockwork.Clock
}

// HTTP calls a URL once per attempt, signed per the Standard Webhooks
// specification. See the package documentation for the request and for how
// responses map to outcomes.
type HTTP struct {
	method  string
	url     string
	safeURL string // for logs and errors: credentials masked
	headers http.Header
	timeout time.Duration
	secrets []webhook.Secret
	client  *http.Client
	snippet int
	log     *slog.Logger
	clock   clockwork.Clock
}

var _ Executor = (*HTTP)(nil)

// reservedHeaders are set by the executor; letting the configuration set
// them would break the signature or the framing.
var reservedHeaders = map[string]bool{
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
	"Content-Type": true, "Content-Length": true, "Host": true,
	"Connection": true, "Transfer-Encoding": true,
}

// Validate checks cfg as NewHTTP does: the configuration's own checks
// (onetick validate) call it, so that a file it accepts never fails in
// NewHTTP when a replica starts. Errors are *onetick.ConfigError naming
// the field.
func (cfg HTTPConfig) Validate() error {
	_, err := NewHTTP(cfg)
	return err
}

// NewHTTP validates cfg and returns the executor. Errors are
// *onetick.ConfigError naming the field.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	h := &HTTP{
		method:  cfg.Method,
		url:     cfg.URL,
		headers: http.Header{},
		timeout: cfg.Timeout,
		snippet: cfg.MaxBodySnippet,
		log:     cfg.Logger,
		clock:   cfg.Clock,
	}
	if h.method == "" {
		h.method = http.MethodPost
	}
	if !isToken(h.method) {
		return nil, configErr("Method", "%q is not an HTTP method", truncate(h.method, 32))
	}
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return nil, configErr("URL", "is required")
	case err != nil:
		return nil, configErr("URL", "is not a URL: %v", errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, configErr("URL", "must be an absolute http:// or https:// URL")
	case u.Host == "":
		return nil, configErr("URL", "has no host")
	}
	h.safeURL = redact.URL(cfg.URL)
	for name, value := range cfg.Headers {
		field := fmt.Sprintf("Headers[%q]", truncate(name, 64))
		switch {
		case !isToken(name):
			return nil, configErr(field, "is not a valid header name")
		case reservedHeaders[http.CanonicalHeaderKey(name)]:
			return nil, configErr(field, "is set by the executor and cannot be configured")
		case !validHeaderValue(value):
			return nil, configErr(field, "value contains a control character (CR, LF, NUL, ...)")
		}
		h.headers.Set(name, value)
	}
	if h.headers.Get("User-Agent") == "" {
		h.headers.Set("User-Agent", "onetick")
	}
	switch {
	case h.timeout < 0:
		return nil, configErr("Timeout", "must not be negative")
	case h.timeout == 0:
		h.timeout = DefaultHTTPTimeout
	}
	if h.secrets, err = webhook.ParseSecrets(cfg.Secrets); err != nil {
		return nil, secretsErr("Secrets", err)
	}
	switch {
	case h.snippet < 0 || h.snippet > maxBodySnippet:
		return nil, configErr("MaxBodySnippet", "must be between 0 and %d", maxBodySnippet)
	case h.snippet == 0:
		h.snippet = DefaultMaxBodySnippet
	}
	// Redirects are not followed: the spec counts a 3xx as a failure, and
	// following one would send the signed body and the configured headers
	// (credentials included) to wherever the receiver points.
	h.client = webhook.NoRedirects(cfg.Client)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.clock == nil {
		h.clock = clockwork.NewRealClock()
	}
	return h, nil
}

// requestBody is the JSON sent to the receiver; field order is fixed so
// the bytes, and so the signature, are reproducible.
type requestBody struct {
	Job     string          `json:"job"`
	Slot    string          `json:"slot"`
	SlotMS  int64           `json:"slot_ms"`
	Tick    string          `json:"tick"`
	Epoch   onetick.Epoch   `json:"epoch"`
	Attempt int             `json:"attempt"`
	Payload json.RawMessage `json:"payload"`
}

// Execute sends one signed request and classifies the response.
func (h *HTTP) Execute(ctx context.Context, r Run) error {
	tick := r.tickID()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("http %s: not sent: %w", tick, ctxErr(ctx))
	}
	payload := r.Payload
	if len(payload) == 0 {
		payload = nil // marshals as null
	}
	body, err := json.Marshal(requestBody{
		Job: r.Job, Slot: r.Slot.String(), SlotMS: int64(r.Slot), Tick: tick,
		Epoch: r.Epoch, Attempt: r.Attempt, Payload: payload,
	})
	if err != nil {
		return permanent(fmt.Errorf("http %s: payload is not valid JSON: %w", tick, err))
	}
	actx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, h.method, h.url, bytes.NewReader(body))
	if err != nil {
		return permanent(fmt.Errorf("%s %s: %w", h.method, h.safeURL, err))
	}
	for k, v := range h.headers {
		req.Header[k] = append([]string(nil), v...)
	}
	req.Header.Set("Content-Type", "application/json")
	setTraceHeaders(ctx, req.Header)
	sent := h.clock.Now()
	webhook.SetHeaders(req.Header, h.secrets, webhook.MessageID(tick), sent, body)

	log := h.log.With("job", r.Job, "tick", tick, "attempt", r.Attempt)
	resp, err := h.client.Do(req)
	if err != nil {
		// url.Error repeats the URL with its query; name it ourselves.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("%s %s: abandoned: %w", h.method, h.safeURL, ctxErr(ctx))
		case errors.Is(actx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("%s %s: timed out: no response within %s", h.method, h.safeURL, h.timeout)
		default:
			err = fmt.Errorf("%s %s: no response: %v", h.method, h.safeURL, err)
		}
		log.Debug("webhook failed", "err", err)
		return err
	}
	// The body is read within the attempt's timeout, at most MaxBodyRead
	// bytes: its start for an error, its end for the result.
	rb := readBody(resp.Body, h.snippet+1)
	resp.Body.Close()
	if rb.err != nil {
		switch {
		case ctx.Err() != nil:
			rb.err = fmt.Errorf("abandoned: %w", ctxErr(ctx))
		case errors.Is(actx.Err(), context.DeadlineExceeded):
			rb.err = fmt.Errorf("timed out after %s", h.timeout)
		}
		log.Debug("webhook response body not read to its end", "status", resp.StatusCode, "err", rb.err)
	}
	err = h.classify(resp, rb.head)
	r.report(onetick.Result{Status: resp.StatusCode, Output: rb.output()})
	log.Debug("webhook answered", "status", resp.StatusCode, "err", err)
	return err
}

// MaxBodyRead is how much of a response body the HTTP executor reads: its
// end, up to onetick.MaxEventOutput bytes of what was read, is the
// attempt's reported output. A longer body is not read further (its
// connection is not reused).
const MaxBodyRead = 1 << 20

// respBody is what was read of a response body.
type respBody struct {
	head []byte      // its first bytes
	tail *tailBuffer // its last bytes, up to MaxBodyRead
	more bool        // longer than MaxBodyRead
	err  error       // reading stopped early (timeout, reset)
}

// readBody reads at most MaxBodyRead bytes of r, keeping the first
// headLen and the last onetick.MaxEventOutput.
func readBody(r io.Reader, headLen int) respBody {
	b := respBody{tail: newTailBuffer(onetick.MaxEventOutput)}
	buf := make([]byte, 32<<10)
	var n int64
	for n <= MaxBodyRead {
		k, err := r.Read(buf[:min(int64(len(buf)), MaxBodyRead+1-n)])
		p := buf[:k]
		if n+int64(k) > MaxBodyRead {
			p, b.more = p[:MaxBodyRead-n], true
		}
		if room := headLen - len(b.head); room > 0 {
			b.head = append(b.head, p[:min(room, len(p))]...)
		}
		b.tail.Write(p)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.err = err
			break
		}
	}
	return b
}

// output is the body's end as the attempt reports it, marked when the
// body was longer than what was read.
func (b respBody) output() string {
	var note string
	switch {
	case b.more:
		note = fmt.Sprintf("\n[onetick: response body longer than %d bytes; not read further]", MaxBodyRead)
	case b.err != nil:
		note = "\n[onetick: response body not read to its end: " + b.err.Error() + "]"
	default:
		return b.tail.String()
	}
	return tailString(b.tail.String(), onetick.MaxEventOutput-len(note)) + note
}

// HTTPError is a response other than 2xx.
type HTTPError struct {
	Method     string
	URL        string // without credentials or query
	StatusCode int
	Status     string
	// Reason says what onetick made of the status: "gone", "redirect not
	// followed", "client error", "server error", ...
	Reason string
	// Body is the start of the response body, at most MaxBodySnippet bytes.
	Body string
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s: %s", e.Method, e.URL, e.Status, e.Reason)
	if e.Body != "" {
		fmt.Fprintf(&b, "; body %q", e.Body)
	}
	return b.String()
}

// classify maps a response to an outcome; the table is in doc.go.
func (h *HTTP) classify(resp *http.Response, head []byte) error {
	code := resp.StatusCode
	if code >= 200 && code <= 299 {
		return nil
	}
	e := &HTTPError{Method: h.method, URL: h.safeURL, StatusCode: code, Status: resp.Status}
	if e.Status == "" {
		e.Status = fmt.Sprint(code)
	}
	e.Body = readSnippet(bytes.NewReader(head), h.snippet)
	switch {
	case code >= 300 && code <= 399:
		e.Reason = "redirect not followed (update the URL)"
		if loc, err := resp.Location(); err == nil {
			e.Reason = "redirect to " + redact.URL(loc.String()) + " not followed (update the URL)"
		}
		return permanent(e)
	case code == http.StatusGone:
		e.Reason = "gone: the receiver no longer wants this webhook; not retried"
		return permanent(e)
	case code == http.StatusRequestTimeout:
		e.Reason = "request timeout"
	case code == http.StatusTooManyRequests:
		e.Reason = "rate limited"
	case code >= 400 && code <= 499:
		e.Reason = "client error; retrying cannot fix it, not retried"
		return permanent(e)
	case code >= 500 && code <= 599:
		e.Reason = "server error"
	default:
		e.Reason = "unexpected status"
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), h.clock.Now()); ok && d > 0 {
			return &retryAfterError{err: e, delay: d}
		}
	}
	return e
}

// readSnippet returns up to n bytes of body as valid UTF-8, marked when cut.
func readSnippet(body io.Reader, n int) string {
	b, _ := io.ReadAll(io.LimitReader(body, int64(n)+1))
	cut := len(b) > n
	if cut {
		b = b[:n]
		// Do not end inside a UTF-8 sequence that the cut split.
		i := len(b) - 1
		for i > 0 && len(b)-i < utf8.UTFMax && !utf8.RuneStart(b[i]) {
			i--
		}
		if i >= 0 && !utf8.FullRune(b[i:]) {
			b = b[:i]
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if cut {
		s += "…"
	}
	return s
}

// isToken reports whether s is an RFC 9110 token (method and header names).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func configErr(field, format string, args ...any) error {
	return &onetick.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// secretsErr names the secret a webhook.ParseSecrets error is about.
func secretsErr(field string, err error) error {
	var se *webhook.SecretsError
	if errors.As(err, &se) && se.Index >= 0 {
		field = fmt.Sprintf("%s[%d]", field, se.Index)
	}
	return configErr(field, "%v", err)
}
