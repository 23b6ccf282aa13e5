package cron

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestTransitionsInTZData checks, against the tz database on this machine,
// the transition instants the DST tests below rely on.
func TestTransitionsInTZData(t *testing.T) {
	cases := []struct {
		zone, at           string // transition instant (UTC)
		beforeOff, afterOf int    // offsets in seconds
	}{
		{"Europe/Berlin", "2026-03-29T01:00:00Z", 3600, 7200},
		{"Europe/Berlin", "2026-10-25T01:00:00Z", 7200, 3600},
		{"America/New_York", "2026-03-08T07:00:00Z", -5 * 3600, -4 * 3600},
		{"America/New_York", "2026-11-01T06:00:00Z", -4 * 3600, -5 * 3600},
		// Lord Howe: 2026-10-04 02:00 → 02:30 and 2026-04-05 02:00 → 01:30.
		{"Australia/Lord_Howe", "2026-10-03T15:30:00Z", 37800, 39600},
		{"Australia/Lord_Howe", "2026-04-04T15:00:00Z", 39600, 37800},
	}
	for _, c := range cases {
		loc := mustLoc(t, c.zone)
		at := mustTime(t, c.at)
		_, before := at.Add(-time.Second).In(loc).Zone()
		_, after := at.In(loc).Zone()
		if before != c.beforeOff || after != c.afterOf {
			t.Fatalf("%s at %s: offsets %d→%d, want %d→%d (tz data differs)", c.zone, c.at, before, after, c.beforeOff, c.afterOf)
		}
	}
}

func TestNextDST(t *testing.T) {
	const (
		berlin = "Europe/Berlin"
		ny     = "America/New_York"
		lh     = "Australia/Lord_Howe"
	)
	runNextCases(t, []nextCase{
		// Europe/Berlin spring forward 2026-03-29: 02:00 CET → 03:00 CEST (01:00Z).
		{"berlin gap 02:30 fires at 03:00 CEST", "30 2 * * *", berlin, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"berlin gap 02:00", "0 2 * * *", berlin, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		{"berlin gap */15 fires once at 03:00", "*/15 * * * *", berlin, "2026-03-29T00:40:00Z",
			[]string{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z"}},
		{"berlin gap 02 and 03 collapse", "0 2,3 * * *", berlin, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T01:00:00Z"}},
		{"berlin gap seconds", "59 59 2 * * *", berlin, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:59:59Z"}},
		{"berlin gap from transition instant", "*/15 * * * *", berlin, "2026-03-29T01:00:00Z",
			[]string{"2026-03-29T01:15:00Z"}},
		// Europe/Berlin fall back 2026-10-25: 03:00 CEST → 02:00 CET (01:00Z).
		{"berlin overlap 02:30 first occurrence only", "30 2 * * *", berlin, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"berlin overlap */15 skips second pass", "*/15 * * * *", berlin, "2026-10-25T00:40:00Z",
			[]string{"2026-10-25T00:45:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:15:00Z"}},
		{"berlin overlap from inside second pass", "*/15 * * * *", berlin, "2026-10-25T01:10:00Z",
			[]string{"2026-10-25T02:00:00Z"}},
		{"berlin overlap 02:30 from second pass", "30 2 * * *", berlin, "2026-10-25T01:10:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		{"berlin 03:00 after overlap", "0 3 * * *", berlin, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T02:00:00Z", "2026-10-26T02:00:00Z"}},
		{"berlin 6-field in overlap", "*/20 30 2 * * *", berlin, "2026-10-25T00:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T00:30:20Z", "2026-10-25T00:30:40Z", "2026-10-26T01:30:00Z"}},
		// America/New_York spring forward 2026-03-08: 02:00 EST → 03:00 EDT (07:00Z).
		{"new york gap", "30 2 * * *", ny, "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"new york gap hourly", "0 * * * *", ny, "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		// America/New_York fall back 2026-11-01: 02:00 EDT → 01:00 EST (06:00Z).
		{"new york overlap", "30 1 * * *", ny, "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york overlap hourly", "0 * * * *", ny, "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},
		// Australia/Lord_Howe spring forward 2026-10-04: 02:00 → 02:30 (+11, 15:30Z on 10-03).
		{"lord howe gap", "15 2 * * *", lh, "2026-10-03T00:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}},
		{"lord howe gap quarter hours", "0,15,30,45 2 * * *", lh, "2026-10-03T00:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-03T15:45:00Z", "2026-10-04T15:00:00Z"}},
		// Australia/Lord_Howe fall back 2026-04-05: 02:00 → 01:30 (+10:30, 15:00Z on 04-04).
		{"lord howe overlap", "45 1 * * *", lh, "2026-04-04T00:00:00Z",
			[]string{"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}},
		{"lord howe overlap */15", "*/15 * * * *", lh, "2026-04-04T14:40:00Z",
			[]string{"2026-04-04T14:45:00Z", "2026-04-04T15:30:00Z", "2026-04-04T15:45:00Z"}},
		{"lord howe 01:15 just before overlap", "15 1 * * *", lh, "2026-04-04T00:00:00Z",
			[]string{"2026-04-04T14:15:00Z", "2026-04-05T14:45:00Z"}},
		// No DST.
		{"tokyo", "0 9 * * *", "Asia/Tokyo", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-30T00:00:00Z"}},
		{"kolkata half hour", "0 0 * * *", "Asia/Kolkata", "2026-03-28T12:00:00Z",
			[]string{"2026-03-28T18:30:00Z", "2026-03-29T18:30:00Z"}},
		{"utc 02:30 on berlin dst day", "30 2 * * *", "UTC", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T02:30:00Z", "2026-03-30T02:30:00Z"}},
		{"utc nil", "30 2 * * *", "", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T02:30:00Z", "2026-10-26T02:30:00Z"}},
		// @every is absolute time: DST is irrelevant.
		{"every across berlin fall back", "@every 30m", berlin, "2026-10-25T00:10:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"}},
		{"every across berlin spring forward", "@every 30m", berlin, "2026-03-29T00:10:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"}},
	})
}

func TestSlotsDSTDays(t *testing.T) {
	cases := []struct {
		zone, expr, day string // day: local date
		want            int64
	}{
		// 96 quarter hours; the 4 in the gap collapse onto 03:00.
		{"Europe/Berlin", "*/15 * * * *", "2026-03-29", 92},
		// The repeated hour fires only once.
		{"Europe/Berlin", "*/15 * * * *", "2026-10-25", 96},
		{"Europe/Berlin", "0 * * * *", "2026-03-29", 23},
		{"Europe/Berlin", "0 * * * *", "2026-10-25", 24},
		{"America/New_York", "*/30 * * * *", "2026-03-08", 46},
		{"America/New_York", "*/30 * * * *", "2026-11-01", 48},
		// Lord Howe: 02:00 and 02:15 collapse onto 02:30.
		{"Australia/Lord_Howe", "*/15 * * * *", "2026-10-04", 94},
		{"Australia/Lord_Howe", "*/15 * * * *", "2026-04-05", 96},
		{"Asia/Tokyo", "*/15 * * * *", "2026-03-29", 96},
		{"UTC", "*/15 * * * *", "2026-03-29", 96},
		// @every counts real elapsed time: 23h, 25h, 23.5h.
		{"Europe/Berlin", "@every 15m", "2026-03-29", 92},
		{"Europe/Berlin", "@every 15m", "2026-10-25", 100},
		{"Australia/Lord_Howe", "@every 15m", "2026-10-04", 94},
	}
	for _, c := range cases {
		loc := mustLoc(t, c.zone)
		s := mustParse(t, c.expr, loc)
		d, _ := time.ParseInLocation("2006-01-02", c.day, loc)
		a := d.Add(-time.Nanosecond) // include local midnight
		b := d.AddDate(0, 0, 1).Add(-time.Nanosecond)
		var prev time.Time
		var n int64
		for ts := range s.Slots(a, b) {
			if !ts.After(prev) {
				t.Fatalf("%s %q: slots not strictly ascending: %v after %v", c.zone, c.expr, ts, prev)
			}
			prev = ts
			n++
		}
		if n != c.want {
			t.Errorf("%s %q on %s: %d slots, want %d", c.zone, c.expr, c.day, n, c.want)
		}
		if got := s.Count(a, b, math.MaxInt64); got != n {
			t.Errorf("%s %q: Count %d != Slots %d", c.zone, c.expr, got, n)
		}
	}
}

// The L, W and # forms choose days; within a day the DST rules are those of
// every cron expression. The 2026 transitions fall on such days: Berlin's
// are the last Sundays of March and October, New York's the second Sunday
// of March and the first of November, Lord Howe's the first Sundays of
// October and April.
func TestNextDSTDayForms(t *testing.T) {
	const (
		berlin = "Europe/Berlin"
		ny     = "America/New_York"
		lh     = "Australia/Lord_Howe"
	)
	runNextCases(t, []nextCase{
		{"berlin gap last sunday", "0 30 2 * * 0L", berlin, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-04-26T00:30:00Z"}},
		{"berlin gap L-2", "30 2 L-2 3 *", berlin, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2027-03-29T00:30:00Z"}},
		{"berlin gap fifth sunday collapses", "*/15 2 * * 0#5", berlin, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-05-31T00:00:00Z"}},
		{"berlin overlap L-6 first occurrence", "30 2 L-6 10 *", berlin, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2027-10-25T00:30:00Z"}},
		{"berlin overlap last sunday no second pass", "*/20 2 * * 0L", berlin, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:20:00Z", "2026-10-25T00:40:00Z", "2026-11-29T01:00:00Z"}},
		{"new york gap second sunday", "30 2 * * 0#2", ny, "2026-03-01T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-04-12T06:30:00Z"}},
		{"new york overlap first sunday", "30 1 * 11 0#1", ny, "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2027-11-07T05:30:00Z"}},
		{"new york overlap hourly L-29", "0 * L-29 11 *", ny, "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},
		{"lord howe gap first sunday", "15 2 * * 0#1", lh, "2026-10-03T00:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-31T15:15:00Z"}},
		{"lord howe gap quarter hours L-27", "0,15,30,45 2 L-27 10 *", lh, "2026-10-03T00:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-03T15:45:00Z", "2027-10-03T15:00:00Z"}},
		{"lord howe overlap first sunday", "45 1 * 4 0#1", lh, "2026-04-04T00:00:00Z",
			[]string{"2026-04-04T14:45:00Z", "2027-04-03T14:45:00Z"}},
		{"lord howe 4W moves off the gap sunday", "45 1 4W 10 *", lh, "2026-10-01T00:00:00Z",
			[]string{"2026-10-04T14:45:00Z"}},
	})
}

// H chooses the minute; the hour is in the gap or the overlap.
func TestNextDSTHash(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	for i := range 20 {
		name := "job-" + string(rune('a'+i))
		m := refSet(t, "H * * * *", name, 1)[0]
		// The gap: whatever the minute, 03:00 CEST.
		s := must(ParseFor("H 2 * * *", berlin, name))
		if got := s.Next(mustTime(t, "2026-03-28T12:00:00Z")); !got.Equal(mustTime(t, "2026-03-29T01:00:00Z")) {
			t.Errorf("%s: H 2 * * * on the spring-forward day: %v", name, got)
		}
		// The overlap: once, at the first 02:mm (CEST).
		o := must(ParseFor("H 2 25 10 *", berlin, name))
		want := []string{
			time.Date(2026, 10, 25, 0, m, 0, 0, time.UTC).Format(time.RFC3339),
			time.Date(2027, 10, 25, 0, m, 0, 0, time.UTC).Format(time.RFC3339),
		}
		if got := nextN(o, mustTime(t, "2026-10-24T12:00:00Z"), 2); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: H 2 25 10 * on the fall-back day: %v, want %v", name, got, want)
		}
	}
}
