package config

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// decodeDef reads a stored definition written by Job.JobDef without
// reflection: encoding/json took most of a start-up from a million stored
// jobs. It accepts only the exact form json.Marshal gives a Job without a
// run block and with strings free of escapes, and reports false for
// anything else, which the caller then reads with encoding/json (the
// differential tests hold the two to the same result).
func decodeDef(def []byte, j *Job) bool {
	r := defReader{b: def}
	if !r.lit(`{"Name":`) || !r.str(&j.Name) ||
		!r.lit(`,"Schedule":`) || !r.str(&j.Schedule) ||
		!r.lit(`,"Timezone":`) || !r.str(&j.Timezone) ||
		!r.lit(`,"Prefer":`) || !r.str(&j.Prefer) {
		return false
	}
	var grace, catchup, maxLen, line int64
	if !r.lit(`,"Grace":`) || !r.int(&grace) ||
		!r.lit(`,"MaxCatchup":`) || !r.int(&catchup) ||
		!r.lit(`,"Stream":`) || !r.str(&j.Stream) ||
		!r.lit(`,"MaxLen":`) || !r.int(&maxLen) ||
		!r.lit(`,"Payload":`) || !r.str(&j.Payload) ||
		!r.lit(`,"Run":null,"Line":`) || !r.int(&line) || !r.lit(`}`) || len(r.b) != 0 {
		return false
	}
	if int64(int(catchup)) != catchup || int64(int(line)) != line {
		return false
	}
	j.Grace, j.MaxCatchup, j.MaxLen, j.Line = Duration(grace), int(catchup), maxLen, int(line)
	return true
}

type defReader struct{ b []byte }

func (r *defReader) lit(s string) bool {
	if !bytes.HasPrefix(r.b, []byte(s)) {
		return false
	}
	r.b = r.b[len(s):]
	return true
}

// str reads a JSON string without escapes or control characters.
func (r *defReader) str(dst *string) bool {
	if len(r.b) == 0 || r.b[0] != '"' {
		return false
	}
	end := bytes.IndexByte(r.b[1:], '"')
	if end < 0 {
		return false
	}
	s := r.b[1 : end+1]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	if !utf8.Valid(s) {
		return false
	}
	*dst = string(s)
	r.b = r.b[end+2:]
	return true
}

// int reads a JSON integer: an optional minus and digits, no leading zero.
func (r *defReader) int(dst *int64) bool {
	n := 0
	if n < len(r.b) && r.b[n] == '-' {
		n++
	}
	start := n
	for n < len(r.b) && '0' <= r.b[n] && r.b[n] <= '9' {
		n++
	}
	if n == start || (r.b[start] == '0' && n-start > 1) {
		return false
	}
	if n < len(r.b) && (r.b[n] == '.' || r.b[n] == 'e' || r.b[n] == 'E') {
		return false
	}
	v, err := strconv.ParseInt(string(r.b[:n]), 10, 64)
	if err != nil {
		return false
	}
	*dst = v
	r.b = r.b[n:]
	return true
}
