// Package webhook implements the symmetric signature scheme of the Standard
// Webhooks specification (version 1.0.0): the sender puts three headers on
// each request,
//
//	webhook-id:        the message id, the same on every attempt
//	webhook-timestamp: the attempt's send time, integer Unix seconds
//	webhook-signature: one or more space-separated "v1,<base64 signature>"
//
// where each signature is the standard-base64 HMAC-SHA256, keyed with one
// secret, of the bytes id + "." + timestamp + "." + body. Several signatures
// let a sender rotate its secret without downtime: it signs with the old and
// the new secret, and a receiver accepts the request when any "v1" entry
// matches a secret it trusts.
//
// Secrets are written as in the specification: "whsec_" followed by the
// standard base64 (padded or not) of 24 to 64 random bytes. A secret
// without the prefix is refused rather than taken as raw bytes, because the
// specification's libraries base64-decode an unprefixed secret, so a raw
// string would silently give sender and receiver different keys. Make one
// with
//
//	echo "whsec_$(head -c 32 /dev/urandom | base64)"
//
// Receivers call Verify with the raw request body, before decoding it.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names, exactly as the specification spells them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const (
	// SecretPrefix starts every serialized secret.
	SecretPrefix = "whsec_"
	// MinSecretBytes and MaxSecretBytes bound the decoded key as the
	// specification does (192 to 512 bits).
	MinSecretBytes = 24
	MaxSecretBytes = 64
	// DefaultTolerance is how far a request's timestamp may lie from the
	// receiver's clock when Verify is given no tolerance: the value the
	// specification's reference libraries use.
	DefaultTolerance = 5 * time.Minute
)

var (
	// ErrMissingHeader: a webhook-* header is absent or empty.
	ErrMissingHeader = errors.New("webhook: missing header")
	// ErrInvalidTimestamp: webhook-timestamp is not integer Unix seconds.
	ErrInvalidTimestamp = errors.New("webhook: invalid timestamp")
	// ErrTimestamp: the timestamp lies outside the tolerance, so the
	// request may be a replay.
	ErrTimestamp = errors.New("webhook: timestamp outside tolerance")
	// ErrNoMatch: no v1 signature in the header matches the secret.
	ErrNoMatch = errors.New("webhook: no matching signature")
)

// MaxSecrets is how many secrets a sender signs with at once (the new
// and the old while a receiver rotates, and a few more).
const MaxSecrets = 16

// SecretsError is ParseSecrets' error: Index is the secret at fault, -1
// when the list itself is (empty, too long). Its text never shows a
// secret.
type SecretsError struct {
	Index int
	Err   error
}

func (e *SecretsError) Error() string { return e.Err.Error() }

func (e *SecretsError) Unwrap() error { return e.Err }

// ParseSecrets decodes a sender's secrets: at least one, at most
// MaxSecrets, each as ParseSecret.
func ParseSecrets(ss []string) ([]Secret, error) {
	switch {
	case len(ss) == 0:
		return nil, &SecretsError{-1, fmt.Errorf("at least one secret is required (%s followed by the base64 of %d to %d random bytes)", SecretPrefix, MinSecretBytes, MaxSecretBytes)}
	case len(ss) > MaxSecrets:
		return nil, &SecretsError{-1, fmt.Errorf("at most %d secrets", MaxSecrets)}
	}
	out := make([]Secret, 0, len(ss))
	for i, s := range ss {
		sec, err := ParseSecret(s)
		if err != nil {
			// The message describes the format only, never the value.
			return nil, &SecretsError{i, err}
		}
		out = append(out, sec)
	}
	return out, nil
}

// NoRedirects returns a copy of c (a new client when nil) that does not
// follow redirects: a redirect would send the signed body, and any
// credentials in the request's headers, wherever the receiver points.
// The 3xx answer comes back as the response.
func NoRedirects(c *http.Client) *http.Client {
	client := http.Client{}
	if c != nil {
		client = *c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client
}

// Secret is a decoded signing key. Its formatting methods never print the
// key, so a Secret that ends up in a log line or an error leaks nothing.
type Secret struct{ key []byte }

// ParseSecret decodes a "whsec_<base64>" secret.
func ParseSecret(s string) (Secret, error) {
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("must start with %q followed by base64 (a raw string is not accepted)", SecretPrefix)
	}
	// Go's decoder skips CR and LF; a secret pasted with a line break would
	// then decode to a key other tools derive differently.
	if strings.ContainsAny(b64, "\r\n") {
		return Secret{}, errors.New("must not contain line breaks")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("the part after %q is not standard base64", SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("decodes to %d bytes; the key must have %d to %d", len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: key}, nil
}

const redacted = SecretPrefix + "[redacted]"

// String hides the key.
func (Secret) String() string { return redacted }

// GoString hides the key from %#v.
func (Secret) GoString() string { return redacted }

// Format hides the key from every verb, %x included.
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue hides the key from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// mac signs the timestamp as the header carries it, so a receiver checks
// exactly the bytes it was sent (a leading zero would otherwise verify).
func (s Secret) mac(id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns the "v1,<base64>" signature of body sent with message id at
// ts (truncated to whole seconds, as the timestamp header carries them).
func (s Secret) Sign(id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(s.mac(id, strconv.FormatInt(ts.Unix(), 10), body))
}

// Sign returns the webhook-signature header value: one signature per
// secret, space-separated, in the order given.
func Sign(secrets []Secret, id string, ts time.Time, body []byte) string {
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = s.Sign(id, ts, body)
	}
	return strings.Join(sigs, " ")
}

// SetHeaders sets the three webhook-* headers on h. HTTP header names are
// case-insensitive, so h holds them in Go's canonical form (Webhook-Id) and
// h.Get finds them; receivers must compare names without regard to case,
// as HTTP requires and HTTP/2 makes visible by lower-casing everything.
func SetHeaders(h http.Header, secrets []Secret, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(secrets, id, ts, body))
}

// MessageID derives the webhook-id of a tick from its tick id
// ("job:unixmillis"): the tick id itself, with every byte other than an
// ASCII letter, digit, '-', '_' or ':' written as %XX. The id is therefore
// stable across attempts (receivers deduplicate on it), readable (for
// common job names it is the tick id unchanged), reversible with
// url.PathUnescape, plain ASCII, and free of '.', which the specification
// forbids in the id because '.' delimits the signed content.
func MessageID(tick string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(tick); i++ {
		c := tick[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == ':' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// Verify checks a received webhook: the three headers are present, the
// timestamp lies within tolerance of now (DefaultTolerance when tolerance
// is not positive), and one of the v1 signatures is the HMAC of
// id.timestamp.body under secret. body must be the raw request body, not a
// re-encoding of its decoded JSON. Signatures are compared in constant
// time. Verify does not deduplicate: keep the webhook-id of requests you
// processed and drop repeats.
func Verify(secret string, headers http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	s, err := ParseSecret(secret)
	if err != nil {
		return fmt.Errorf("webhook: secret %w", err)
	}
	id, tsText, sigs := header(headers, HeaderID), header(headers, HeaderTimestamp), header(headers, HeaderSignature)
	for i, v := range []string{id, tsText, sigs} {
		if v == "" {
			return fmt.Errorf("%w %s", ErrMissingHeader, []string{HeaderID, HeaderTimestamp, HeaderSignature}[i])
		}
	}
	ts, err := parseUnix(tsText)
	if err != nil {
		return err
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance {
		return fmt.Errorf("%w: %s old (tolerance %s)", ErrTimestamp, d.Truncate(time.Second), tolerance)
	} else if -d > tolerance {
		return fmt.Errorf("%w: %s in the future (tolerance %s)", ErrTimestamp, (-d).Truncate(time.Second), tolerance)
	}
	want := s.mac(id, tsText, body)
	for _, entry := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue // another scheme (v1a) or an empty entry
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrNoMatch
}

// header reads a header whether h was filled by net/http (canonical keys)
// or built by hand with the specification's lower-case names.
func header(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// parseUnix accepts only decimal digits: strconv would also take a sign.
func parseUnix(s string) (int64, error) {
	if s == "" || len(s) > 18 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w %q", ErrInvalidTimestamp, truncate(s, 32))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q", ErrInvalidTimestamp, truncate(s, 32))
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
