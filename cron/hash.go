package cron

import (
	"errors"
	"strconv"
	"strings"
)

// ErrNoJobName is the cause (errors.Is) of the *ParseError returned when an
// expression uses H but no job name was given to hash.
var ErrNoJobName = errors.New("H needs a job name")

// hashKey is the byte string whose hash chooses the value of the k-th
// (0-based) H element of a field: the job name, a zero byte, the field's
// name as ParseError spells it, a zero byte, k in decimal. The field name
// rather than its position keeps "H * * * *" and "0 H * * * *" on the same
// minute; k keeps "H,H" from repeating one value.
func hashKey(name, field string, k int) string {
	return name + "\x00" + field + "\x00" + strconv.Itoa(k)
}

// hash64 is FNV-1a 64 followed by MurmurHash3's 64-bit finaliser. FNV-1a
// alone is not enough: its low bits depend only on the low bits of the input
// bytes (the last step multiplies by an odd prime), so "h mod 2" would be the
// parity of the key's byte sum and the minute and hour of one job would be
// correlated. The finaliser mixes every input bit into every output bit.
func hash64(key string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// parseHash parses one H element — H, H(a-b), H/s or H(a-b)/s — of field b
// for the job name, k being the number of H elements before it in the
// field (name must not be empty). It returns the chosen values as a bit
// set, or a message.
func parseHash(elem string, b bounds, name string, k int) (uint64, string) {
	rest := elem[1:]
	// Plain H and H/s range over the field's hash range (day-of-month 1-28,
	// day-of-week 0-6); H(a-b) over a-b.
	lo, hi := b.min, b.hashMax
	if strings.HasPrefix(rest, "(") {
		inner, after, ok := strings.Cut(rest[1:], ")")
		if !ok {
			return 0, elem + ": missing \")\" (write H(a-b))"
		}
		a, z, ok := strings.Cut(inner, "-")
		if !ok {
			return 0, elem + ": expected a range a-b inside H(...)"
		}
		var msg string
		if lo, hi, msg = parseRange(a, z, b); msg != "" {
			return 0, elem + ": " + msg
		}
		if lo > hi {
			return 0, "H(" + inner + "): range reversed"
		}
		rest = after
	}
	step := 0
	if rest != "" {
		if rest[0] != '/' {
			return 0, elem + ": expected H, H(a-b), H/s or H(a-b)/s"
		}
		n, ok := parseNumber(rest[1:])
		switch {
		case !ok:
			return 0, elem + ": invalid step " + strconv.Quote(rest[1:])
		case n == 0:
			return 0, elem + ": step must be positive"
		case n > hi-lo+1:
			return 0, elem + ": step " + rest[1:] + " is larger than the " + strconv.Itoa(hi-lo+1) +
				" values of " + strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
		}
		step = n
	}
	h := hash64(hashKey(name, b.name, k))
	if step == 0 {
		return 1 << uint(lo+int(h%uint64(hi-lo+1))), ""
	}
	var bits uint64
	for v := lo + int(h%uint64(step)); v <= hi; v += step {
		bits |= 1 << uint(v)
	}
	return bits, ""
}
