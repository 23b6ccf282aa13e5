package executor

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps the delay a Retry-After header can ask for. A receiver
// asking for more gets its next attempt after MaxRetryAfter, and another
// 429 or 503 then costs one attempt; without a cap, a typo on the receiver
// ("86400000") would park a tick for years.
const MaxRetryAfter = time.Hour

// parseRetryAfter reads a Retry-After value (RFC 9110 10.2.3): either
// delay-seconds or an HTTP-date, which is taken relative to now. A date in
// the past means no delay. ok is false for anything else.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.TrimLeft(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true // all digits: only too large can fail
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}
