package tracing_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// testSecret signs the HTTP executor's calls (the target does not check).
var testSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("tracing-test-secret-tracing-test"))

func sha256Prefix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }
