package cron

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// seeds for both targets: the plain syntax, H and the day forms, valid and
// invalid.
var fuzzSeeds = []string{
	"* * * * *", "*/5 * * * *", "0 0 29 2 *", "0 0 13 * 5", "0 0 */10 * 1", "5,10-20/3 */2 1-15 JAN-mar sun-sat",
	"*/15 * * * * *", "0 0 * * 7", "@daily", "@weekly", "@yearly", "@every 1m", "@every 7s", "@every 1h +15m",
	"@every 1500ms +1ms", "30 2 * * *", "0,15,30,45 2 * * *",
	// invalid
	"", "@", "@foo", "@every", "@every 0s", "@every 1h +2h", "0 0 30 2 *", "60 * * * *", "*/0 * * * *",
	"1,,2 * * * *", "5-1 * * * *", "* * * *", "a b c d e", "-", "*/", "٣ * * * *", "1-2-3/4/5 * * * *",
	// H
	"H * * * *", "H H * * *", "H/15 * * * *", "H(0-29)/10 H(8-10) * * 1-5", "H H H H H", "H,H(40-59) 0 * * *",
	"0 0 H/10 * *", "0 0 * * H(mon-FRI)", "0 0 * * H(FRI-SUN)", "H H * * * *", "h(0-9) h * * *",
	"H(30-20) * * * *", "H/90 * * * *", "H(1-5 * * * *", "H5 * * * *", "0 0 H(0-5) * *", "HW * * * *",
	// L, W, #
	"0 0 L * *", "30 2 L-2 * *", "0 0 L-30 * *", "0 0 LW * *", "0 9 15W * *", "0 9 1W,31W * *", "0 0 * * 5L",
	"0 0 * * friL", "0 0 * * 5#3", "0 0 * * SUN#5", "0 0 L * 5L", "0 0 1,L,15W * MON#2,6L", "0 0 L * */2",
	"0 30 2 * * 0L", "*/15 2 * * 0#5", "0 0 lw * *", "0 0 * JUL *",
	"0 0 * * 5#6", "0 0 * * 15W", "0 L * * *", "0 0 * * L", "0 0 5L * *", "0 0 L-31 * *", "0 0 L/2 * *",
	"0 0 1-5W * *", "0 0 31W 2 *", "0 0 * 2 1#5", "0 0 * * 1-5#1", "0 0 ſun * *", "0 0 * * ſunL",
}

func FuzzParse(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed, "Europe/Berlin", "billing")
		f.Add(seed, "Australia/Lord_Howe", "")
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
	f.Fuzz(func(t *testing.T, expr, zone, name string) {
		loc := zones[zone] // nil (UTC) for unknown names
		s, err := ParseFor(expr, loc, name)
		if err != nil {
			pe, ok := err.(*ParseError)
			if !ok {
				t.Fatalf("ParseFor(%q) error %T is not *ParseError", expr, err)
			}
			if pe.Msg == "" || pe.Field == "" || pe.Expr != expr {
				t.Fatalf("ParseFor(%q): %#v", expr, pe)
			}
			if errors.Is(err, ErrNoJobName) && name != "" {
				t.Fatalf("ParseFor(%q, %q): %v", expr, name, err)
			}
			return
		}
		if name != "" {
			// Deterministic: the same job gets the same schedule.
			again, err := ParseFor(expr, loc, name)
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("ParseFor(%q, %q) twice: %v", expr, name, err)
			}
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

// FuzzReference checks the parser and Slots against the reference of
// ref_test.go: both accept the same expressions (except those the package
// rejects because they never fire) and give the same slots from Berlin's
// spring-forward night to the month's end, in Berlin and in UTC.
func FuzzReference(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed, "billing", true)
		f.Add(seed, "job-7", false)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr, name string, inBerlin bool) {
		if len(expr) > 200 {
			return
		}
		loc := time.UTC
		if inBerlin {
			loc = berlin
		}
		s, err := ParseFor(expr, loc, name)
		r, refErr := refParse(expr, name)
		if err != nil {
			if refErr == nil && !strings.Contains(err.Error(), "no fire time within 5 years") {
				t.Fatalf("ParseFor(%q, %q) = %v; the reference accepts it", expr, name, err)
			}
			return
		}
		if s.Interval() > 0 {
			return // the reference knows no @every
		}
		if refErr != nil {
			t.Fatalf("ParseFor(%q, %q) accepts what the reference rejects", expr, name)
		}
		// From Berlin's spring-forward night to April 1st.
		a := time.Date(2026, 3, 28, 20, 0, 0, 0, time.UTC)
		b := time.Date(2026, 4, 1, 2, 0, 0, 0, time.UTC)
		if r.seconds {
			a = time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
			b = time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
		}
		var got []time.Time
		for x := range s.Slots(a, b) {
			got = append(got, x)
		}
		if want := refSlots(r, loc, a, b, 0); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q (%q) in %v: slots %v, reference %v", expr, name, loc, got, want)
		}
	})
}
