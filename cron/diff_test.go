package cron

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestDifferential checks Slots, Next and Count against the reference walk
// of ref_test.go, in UTC and in the DST zones of dst_test.go. Expressions
// that fire on few days are walked over three years in UTC and over the
// months of the 2026 transitions in the zones; frequent ones over the days
// or hours around the transitions.
func TestDifferential(t *testing.T) {
	years := [][2]string{{"2025-12-31T00:00:00Z", "2029-01-02T00:00:00Z"}}
	zoneMonths := [][2]string{{"2026-02-27T00:00:00Z", "2026-04-10T00:00:00Z"}, {"2026-09-29T00:00:00Z", "2026-11-10T00:00:00Z"}}
	daily := []string{
		"0 0 L * *", "30 2 L * *", "15 3 L-2 * *", "0 12 L-30 * *", "0 1 LW * *", "0 9 15W * *", "0 9 1W * *",
		"0 9 31W * *", "30 2 30W * *", "0 2 * * 5L", "30 2 * * 0L", "0 0 * * 1#1", "0 3 * * 0#5", "30 1 * * FRI#3",
		"0 0 L * 5L", "0 0 1,L,15W * MON#2,6L", "0 0 L * */2", "0 0 */2 * 5L", "0 6 LW,L-3 JAN,JUL *",
		"45 1 * * 0#1,0#2", "0,30 2 L-6,L-2 3,10 *", "0 0 13 * 5",
		"H H H * *", "H H * * H", "H H H/3 * *", "H H H(1-5) * 0L", "H(0-29)/10 H(8-10) 1W * *",
	}
	frequent := []string{"H/15 * * * *", "H H(2-3) * * *", "*/20 H * * *", "H H/2 * * *", "*/7 2 L-6,L-2 * *", "0 * * * 0#1,0#2,0L"}
	seconds := []string{"H H 2 * * *", "*/30 30 2 L-2,L-6 * *", "H/20 * 2 * * 0L", "0 H * * * 0#2,0#1"}
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"}
	names := []string{"billing", "job-7", "nightly-report"}

	run := func(t *testing.T, expr, name, zone string, ranges [][2]string) {
		loc := mustLoc(t, zone)
		s, err := ParseFor(expr, loc, name)
		if err != nil {
			t.Fatalf("ParseFor(%q, %s, %q): %v", expr, zone, name, err)
		}
		r, err := refParse(expr, name)
		if err != nil {
			t.Fatalf("reference rejects %q", expr)
		}
		for _, rg := range ranges {
			a, b := mustTime(t, rg[0]), mustTime(t, rg[1])
			want := refSlots(r, loc, a, b, 0)
			var got []time.Time
			for x := range s.Slots(a, b) {
				got = append(got, x)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				for i := range min(len(got), len(want)) {
					if !got[i].Equal(want[i]) {
						t.Fatalf("%q %s %q in (%s, %s]: slot %d = %v, reference %v", expr, zone, name, rg[0], rg[1], i, got[i], want[i])
					}
				}
				t.Fatalf("%q %s %q in (%s, %s]: %d slots, reference %d", expr, zone, name, rg[0], rg[1], len(got), len(want))
			}
			if n := s.Count(a, b, math.MaxInt64); n != int64(len(want)) {
				t.Fatalf("%q %s: Count = %d, reference %d", expr, zone, n, len(want))
			}
			// Next from just before each slot and from the slot itself.
			prev := a
			for i, w := range want {
				if i%7 != 0 { // a sample keeps the test fast
					prev = w
					continue
				}
				if n := s.Next(prev); !n.Equal(w) {
					t.Fatalf("%q %s: Next(%v) = %v, reference %v", expr, zone, prev, n, w)
				}
				if n := s.Next(w.Add(-time.Millisecond)); !n.Equal(w) {
					t.Fatalf("%q %s: Next(%v - 1ms) = %v", expr, zone, w, n)
				}
				prev = w
			}
		}
	}
	for _, zone := range zones {
		for i, expr := range daily {
			name := names[i%len(names)]
			rng := zoneMonths
			if zone == "UTC" {
				rng = years
			}
			t.Run(zone+"/"+expr, func(t *testing.T) { t.Parallel(); run(t, expr, name, zone, rng) })
		}
		for i, expr := range frequent {
			name := names[i%len(names)]
			t.Run(zone+"/"+expr, func(t *testing.T) { t.Parallel(); run(t, expr, name, zone, dayWindows[zone]) })
		}
		for i, expr := range seconds {
			name := names[i%len(names)]
			t.Run(zone+"/"+expr, func(t *testing.T) { t.Parallel(); run(t, expr, name, zone, secondWindows[zone]) })
		}
	}
}

// dayWindows are the days around each zone's 2026 transitions (for UTC,
// around month ends).
var dayWindows = map[string][][2]string{
	"UTC":                 {{"2026-02-26T00:00:00Z", "2026-03-03T00:00:00Z"}, {"2026-05-30T00:00:00Z", "2026-06-02T00:00:00Z"}},
	"Europe/Berlin":       {{"2026-03-28T00:00:00Z", "2026-04-01T00:00:00Z"}, {"2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z"}},
	"America/New_York":    {{"2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z"}, {"2026-10-30T00:00:00Z", "2026-11-03T00:00:00Z"}},
	"Australia/Lord_Howe": {{"2026-10-02T00:00:00Z", "2026-10-05T00:00:00Z"}, {"2026-04-03T00:00:00Z", "2026-04-06T00:00:00Z"}},
}

// secondWindows are the hours around each zone's 2026 transitions.
var secondWindows = map[string][][2]string{
	"UTC":                 {{"2026-02-28T22:00:00Z", "2026-03-01T04:00:00Z"}},
	"Europe/Berlin":       {{"2026-03-28T22:00:00Z", "2026-03-29T04:00:00Z"}, {"2026-10-24T22:00:00Z", "2026-10-25T04:00:00Z"}},
	"America/New_York":    {{"2026-03-08T04:00:00Z", "2026-03-08T10:00:00Z"}, {"2026-11-01T03:00:00Z", "2026-11-01T09:00:00Z"}},
	"Australia/Lord_Howe": {{"2026-10-03T13:00:00Z", "2026-10-03T18:00:00Z"}, {"2026-04-04T12:00:00Z", "2026-04-04T18:00:00Z"}},
}
