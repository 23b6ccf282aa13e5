package webhook_test

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onetick/onetick/executor/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The vector published with the specification's reference libraries: an
// implementation that reproduces it agrees with every other one.
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = 1614265330
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSecret(t testing.TB, s string) webhook.Secret {
	t.Helper()
	sec, err := webhook.ParseSecret(s)
	if err != nil {
		t.Fatalf("ParseSecret(%q): %v", s, err)
	}
	return sec
}

func TestSignMatchesSpecVector(t *testing.T) {
	got := mustSecret(t, vecSecret).Sign(vecID, time.Unix(vecTS, 0), []byte(vecBody))
	if got != vecSig {
		t.Fatalf("Sign = %s, want %s", got, vecSig)
	}
}

func newSecret(fill byte, n int) string {
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(fill)), n)))
}

func TestParseSecret(t *testing.T) {
	ok := []string{
		vecSecret,
		newSecret('a', 24),
		newSecret('b', 25), // padded
		strings.TrimRight(newSecret('b', 25), "="), // unpadded
		newSecret('c', 64),
	}
	for _, s := range ok {
		if _, err := webhook.ParseSecret(s); err != nil {
			t.Errorf("ParseSecret(%q) = %v, want ok", s, err)
		}
	}
	bad := map[string]string{
		"":                                 "must start with",
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw": "must start with", // raw, no prefix
		"whsec_":                           "0 bytes",
		"whsec_not*base64!":                "not standard base64",
		newSecret('a', 23):                 "23 bytes",
		newSecret('a', 65):                 "65 bytes",
		"whsec_MfKQ9r8GKYqrTwjU\nPD8ILPZIo2LaLaSw": "line breaks",
	}
	for s, want := range bad {
		_, err := webhook.ParseSecret(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSecret(%q) = %v, want an error containing %q", s, err, want)
		}
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	s := mustSecret(t, vecSecret)
	key := strings.TrimPrefix(vecSecret, webhook.SecretPrefix)
	raw, _ := base64.StdEncoding.DecodeString(key)
	keyHex := hex.EncodeToString(raw[:8])
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secret", s, "list", []webhook.Secret{s})
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %x %q", s, s, s, s, s, s),
		fmt.Sprintf("%v", []webhook.Secret{s}), logged.String(),
	} {
		if strings.Contains(out, key) || strings.Contains(out, keyHex) {
			t.Errorf("secret leaked in %q", out)
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%q does not say the secret is redacted", out)
		}
	}
}

func headers(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(webhook.HeaderSignature, sig)
	return h
}

func TestVerify(t *testing.T) {
	now := time.Unix(vecTS, 0)
	body := []byte(vecBody)
	other := newSecret('z', 32)
	otherSig := mustSecret(t, other).Sign(vecID, now, body)
	cases := []struct {
		name    string
		secret  string
		h       http.Header
		body    []byte
		now     time.Time
		wantErr error // nil = accepted
	}{
		{"valid", vecSecret, headers(vecID, vecTS, vecSig), body, now, nil},
		{"rotation: matching signature second", vecSecret, headers(vecID, vecTS, otherSig+" "+vecSig), body, now, nil},
		{"rotation: unknown versions skipped", vecSecret, headers(vecID, vecTS, "v1a,AAAA v2,"+strings.TrimPrefix(vecSig, "v1,")+" "+vecSig), body, now, nil},
		{"wrong secret", other, headers(vecID, vecTS, vecSig), body, now, webhook.ErrNoMatch},
		{"signature under another version", vecSecret, headers(vecID, vecTS, "v2,"+strings.TrimPrefix(vecSig, "v1,")), body, now, webhook.ErrNoMatch},
		{"body changed", vecSecret, headers(vecID, vecTS, vecSig), []byte(`{"test":2432232314}`), now, webhook.ErrNoMatch},
		{"id changed", vecSecret, headers(vecID+"x", vecTS, vecSig), body, now, webhook.ErrNoMatch},
		{"stale", vecSecret, headers(vecID, vecTS, vecSig), body, now.Add(webhook.DefaultTolerance + time.Second), webhook.ErrTimestamp},
		{"future", vecSecret, headers(vecID, vecTS, vecSig), body, now.Add(-webhook.DefaultTolerance - time.Second), webhook.ErrTimestamp},
		{"at the tolerance", vecSecret, headers(vecID, vecTS, vecSig), body, now.Add(webhook.DefaultTolerance), nil},
		{"missing id", vecSecret, headers("", vecTS, vecSig), body, now, webhook.ErrMissingHeader},
		{"missing signature", vecSecret, headers(vecID, vecTS, ""), body, now, webhook.ErrMissingHeader},
		{"signed timestamp", vecSecret, func() http.Header {
			h := headers(vecID, vecTS, vecSig)
			h.Set(webhook.HeaderTimestamp, "+1614265330")
			return h
		}(), body, now, webhook.ErrInvalidTimestamp},
		{"lower-case keys built by hand", vecSecret, http.Header{"webhook-id": {vecID}, "webhook-timestamp": {"1614265330"}, "webhook-signature": {vecSig}}, body, now, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := webhook.Verify(c.secret, c.h, c.body, 0, c.now)
			if c.wantErr == nil && err != nil {
				t.Fatalf("Verify = %v, want accepted", err)
			}
			if c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("Verify = %v, want %v", err, c.wantErr)
			}
		})
	}
	if err := webhook.Verify("raw-secret", headers(vecID, vecTS, vecSig), body, 0, now); err == nil || !strings.Contains(err.Error(), "secret") {
		t.Errorf("Verify with a malformed secret = %v, want an error naming the secret", err)
	}
	if err := webhook.Verify(vecSecret, headers(vecID, vecTS, vecSig), body, time.Second, now.Add(2*time.Second)); !errors.Is(err, webhook.ErrTimestamp) {
		t.Errorf("Verify with a 1s tolerance 2s late = %v, want ErrTimestamp", err)
	}
}

func TestSignSeveralSecrets(t *testing.T) {
	a, b := mustSecret(t, newSecret('a', 32)), mustSecret(t, newSecret('b', 32))
	ts := time.Unix(1700000000, 999_000_000) // sub-second part must not matter
	body := []byte(`{}`)
	h := http.Header{}
	webhook.SetHeaders(h, []webhook.Secret{a, b}, "j:1", ts, body)
	sigs := strings.Split(h.Get(webhook.HeaderSignature), " ")
	if len(sigs) != 2 || sigs[0] != a.Sign("j:1", ts, body) || sigs[1] != b.Sign("j:1", ts, body) {
		t.Fatalf("signature header %q, want one v1 signature per secret in order", h.Get(webhook.HeaderSignature))
	}
	if h.Get(webhook.HeaderTimestamp) != "1700000000" || h.Get(webhook.HeaderID) != "j:1" {
		t.Fatalf("headers %v", h)
	}
	for _, s := range []string{newSecret('a', 32), newSecret('b', 32)} {
		if err := webhook.Verify(s, h, body, 0, ts); err != nil {
			t.Errorf("Verify with either rotated secret: %v", err)
		}
	}
}

func TestMessageID(t *testing.T) {
	cases := map[string]string{
		"backup:1700000000000": "backup:1700000000000",
		"db.backup:1":          "db%2Ebackup:1",
		"a/b%c:1":              "a%2Fb%25c:1",
		"übung:1":              "%C3%BCbung:1",
		"Mixed-Case_9:17":      "Mixed-Case_9:17",
	}
	for tick, want := range cases {
		got := webhook.MessageID(tick)
		if got != want {
			t.Errorf("MessageID(%q) = %q, want %q", tick, got, want)
		}
		if back, err := url.PathUnescape(got); err != nil || back != tick {
			t.Errorf("PathUnescape(%q) = %q, %v; want %q", got, back, err, tick)
		}
	}
}

func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{vecSecret, "whsec_", "whsec_====", "whsec_\r\n", newSecret('x', 64), "raw"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sec, err := webhook.ParseSecret(s)
		if err != nil {
			return
		}
		// An accepted secret signs like its canonical re-encoding: the
		// decoding is a function of the key alone.
		body := []byte("b")
		ts := time.Unix(1, 0)
		if err := webhook.Verify(s, headers("i", 1, sec.Sign("i", ts, body)), body, time.Minute, ts); err != nil {
			t.Fatalf("own signature rejected: %v", err)
		}
	})
}

func FuzzVerify(f *testing.F) {
	f.Add(vecID, "1614265330", vecSig, vecBody)
	f.Add("", "x", "v1,", "")
	f.Add("i", "99999999999999999999", "v1,==== v1a,x ,", "{")
	f.Add(vecID, "01614265330", vecSig, vecBody)
	f.Fuzz(func(t *testing.T, id, ts, sig, body string) {
		h := http.Header{}
		h.Set(webhook.HeaderID, id)
		h.Set(webhook.HeaderTimestamp, ts)
		h.Set(webhook.HeaderSignature, sig)
		err := webhook.Verify(vecSecret, h, []byte(body), 0, time.Unix(vecTS, 0))
		if err == nil && (id != vecID || ts != "1614265330" || body != vecBody) {
			// Only the vector itself may verify: anything else would be a
			// forgery without the key.
			t.Fatalf("accepted id=%q ts=%q body=%q", id, ts, body)
		}
	})
}
