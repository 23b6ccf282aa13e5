package cron

import (
	"testing"
	"time"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "*/5 * * * *", "0 0 29 2 *", "0 0 13 * 5", "0 0 */10 * 1", "5,10-20/3 */2 1-15 JAN-mar sun-sat",
		"*/15 * * * * *", "0 0 * * 7", "@daily", "@weekly", "@yearly", "@every 1m", "@every 7s", "@every 1h +15m",
		"@every 1500ms +1ms", "30 2 * * *", "0,15,30,45 2 * * *",
		// invalid
		"", "@", "@foo", "@every", "@every 0s", "@every 1h +2h", "0 0 30 2 *", "60 * * * *", "*/0 * * * *",
		"1,,2 * * * *", "5-1 * * * *", "* * * *", "a b c d e", "-", "*/", "٣ * * * *", "1-2-3/4/5 * * * *",
	} {
		f.Add(seed, "Europe/Berlin")
		f.Add(seed, "Australia/Lord_Howe")
	}
	zones := map[string]*time.Location{}
	for _, name := range []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			f.Fatal(err)
		}
		zones[name] = loc
	}
	starts := []time.Time{
		time.Date(2026, 3, 29, 0, 40, 0, 0, time.UTC),
		time.Date(2026, 10, 25, 0, 40, 0, 123456789, time.UTC),
		time.Date(2026, 10, 3, 15, 10, 0, 0, time.UTC),
		time.Date(2026, 4, 4, 14, 50, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
	}
	f.Fuzz(func(t *testing.T, expr, zone string) {
		loc := zones[zone] // nil (UTC) for unknown names
		s, err := Parse(expr, loc)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("Parse(%q) error %T is not *ParseError", expr, err)
			}
			return
		}
		for _, start := range starts {
			prev := start
			for i := 0; i < 8; i++ {
				n := s.Next(prev)
				if n.IsZero() {
					break
				}
				if !n.After(prev) {
					t.Fatalf("%q: Next(%v) = %v not after", expr, prev, n)
				}
				if n.Nanosecond()%int(time.Millisecond) != 0 || n.Location() != time.UTC {
					t.Fatalf("%q: Next(%v) = %v not UTC ms", expr, prev, n)
				}
				if back := s.Next(n.Add(-time.Millisecond)); !back.Equal(n) {
					t.Fatalf("%q: Next(%v - 1ms) = %v, want %v", expr, n, back, n)
				}
				// Monotone: a later input never gives an earlier result.
				mid := prev.Add(n.Sub(prev) / 2)
				if m := s.Next(mid); m.Before(n) && !m.IsZero() {
					t.Fatalf("%q: Next(%v) = %v before Next(%v) = %v", expr, mid, m, prev, n)
				}
				prev = n
			}
			if c := s.Count(start, prev, 100); c != int64(min(100, countSlots(s, start, prev))) {
				t.Fatalf("%q: Count(%v, %v) = %d disagrees with Slots", expr, start, prev, c)
			}
		}
	})
}

func countSlots(s *Schedule, a, b time.Time) int {
	n := 0
	for range s.Slots(a, b) {
		n++
	}
	return n
}
