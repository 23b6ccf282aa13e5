package executor

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 5, 1, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"3600", time.Hour, true},
		{"3601", MaxRetryAfter, true},
		{"18446744073709551616", MaxRetryAfter, true}, // past uint64
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"Wednesday, 01-May-24 06:00:30 GMT", 30 * time.Second, true}, // RFC 850
		{"Wed May  1 06:00:10 2024", 10 * time.Second, true},          // ANSI C
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},        // past: no delay
		{now.Add(48 * time.Hour).Format(http.TimeFormat), MaxRetryAfter, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, c := range cases {
		got, ok := parseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "99999999999999999999999", "Wed, 01 May 2024 06:01:30 GMT", "Wed May  1 06:00:10 2024", "-1", "", "\x00"} {
		f.Add(s)
	}
	now := time.Date(2024, 5, 1, 6, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseRetryAfter(s, now)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("parseRetryAfter(%q) = %v, outside [0, %v]", s, d, MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q) = %v with ok=false", s, d)
		}
	})
}
