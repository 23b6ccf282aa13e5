package cron

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// 2026-01-01 is a Thursday.
const jan1 = "2026-01-01T00:00:00Z"

func TestNextFieldForms(t *testing.T) {
	runNextCases(t, []nextCase{
		{"star", "* * * * *", "", jan1, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"}},
		{"number", "5 * * * *", "", jan1, []string{"2026-01-01T00:05:00Z", "2026-01-01T01:05:00Z"}},
		{"range", "10-12 * * * *", "", jan1, []string{"2026-01-01T00:10:00Z", "2026-01-01T00:11:00Z", "2026-01-01T00:12:00Z", "2026-01-01T01:10:00Z"}},
		{"star step", "*/20 * * * *", "", jan1, []string{"2026-01-01T00:20:00Z", "2026-01-01T00:40:00Z", "2026-01-01T01:00:00Z"}},
		{"range step", "10-30/10 * * * *", "", jan1, []string{"2026-01-01T00:10:00Z", "2026-01-01T00:20:00Z", "2026-01-01T00:30:00Z", "2026-01-01T01:10:00Z"}},
		{"start step", "50/5 * * * *", "", jan1, []string{"2026-01-01T00:50:00Z", "2026-01-01T00:55:00Z", "2026-01-01T01:50:00Z"}},
		{"list", "1,2,5-6,58/30 * * * *", "", jan1, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:05:00Z", "2026-01-01T00:06:00Z", "2026-01-01T00:58:00Z", "2026-01-01T01:01:00Z"}},
		{"hour step", "0 */6 * * *", "", jan1, []string{"2026-01-01T06:00:00Z", "2026-01-01T12:00:00Z", "2026-01-01T18:00:00Z", "2026-01-02T00:00:00Z"}},
		{"hour list", "0 9,17 * * *", "", jan1, []string{"2026-01-01T09:00:00Z", "2026-01-01T17:00:00Z", "2026-01-02T09:00:00Z"}},
		{"dom", "0 0 15 * *", "", jan1, []string{"2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z"}},
		{"dom 31 skips short months", "0 0 31 * *", "", jan1, []string{"2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"month", "0 0 1 6 *", "", jan1, []string{"2026-06-01T00:00:00Z", "2027-06-01T00:00:00Z"}},
		{"month names", "0 0 1 JAN,jul *", "", jan1, []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"month name range", "0 0 1 feb-Apr *", "", jan1, []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "2027-02-01T00:00:00Z"}},
		{"month name step", "0 0 1 Mar/4 *", "", jan1, []string{"2026-03-01T00:00:00Z", "2026-07-01T00:00:00Z", "2026-11-01T00:00:00Z", "2027-03-01T00:00:00Z"}},
		{"dow", "0 0 * * 1", "", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"}},
		{"dow name", "0 0 * * MON", "", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"}},
		{"dow name range to SUN", "0 0 * * sat-Sun", "", jan1, []string{"2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-10T00:00:00Z"}},
		{"dow name range FRI-SUN", "0 0 * * FRI-SUN", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{"dow name range SUN-TUE", "0 0 * * SUN-TUE", "", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow name list", "0 0 * * tue,THU", "", jan1, []string{"2026-01-06T00:00:00Z", "2026-01-08T00:00:00Z", "2026-01-13T00:00:00Z"}},
		{"dow 0 sunday", "0 0 * * 0", "", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow 7 sunday", "0 0 * * 7", "", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"dow range to 7", "0 0 * * 5-7", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{"dow 0-7 every day", "0 0 * * 0-7", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z"}},
		{"dow start step", "0 0 * * 1/2", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-12T00:00:00Z"}},
		{"whitespace", " \t0  12\t* *  * \n", "", jan1, []string{"2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z"}},
		{"leap day", "0 0 29 2 *", "", jan1, []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"combined", "30 8-10/2 1,15 * *", "", jan1, []string{"2026-01-01T08:30:00Z", "2026-01-01T10:30:00Z", "2026-01-15T08:30:00Z"}},
		{"year wrap", "59 23 31 12 *", "", "2026-12-31T23:59:00Z", []string{"2027-12-31T23:59:00Z"}},
	})
}

func TestNextSeconds(t *testing.T) {
	runNextCases(t, []nextCase{
		{"every 15s", "*/15 * * * * *", "", jan1, []string{"2026-01-01T00:00:15Z", "2026-01-01T00:00:30Z", "2026-01-01T00:00:45Z", "2026-01-01T00:01:00Z"}},
		{"fixed second", "30 0 12 * * *", "", jan1, []string{"2026-01-01T12:00:30Z", "2026-01-02T12:00:30Z"}},
		{"second list", "5,10 * * * * *", "", jan1, []string{"2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z", "2026-01-01T00:01:05Z"}},
		{"every second", "* * * * * *", "", "2026-01-01T00:00:00.5Z", []string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},
		{"second range step", "10-20/5 30 * * * *", "", jan1, []string{"2026-01-01T00:30:10Z", "2026-01-01T00:30:15Z", "2026-01-01T00:30:20Z", "2026-01-01T01:30:10Z"}},
	})
}

// Vixie cron: when both day fields are restricted a day matches if either
// does; when either starts with '*', a day must match both (so a plain '*'
// does not restrict).
func TestNextVixieDays(t *testing.T) {
	runNextCases(t, []nextCase{
		{"dom or dow", "0 0 13 * 5", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z"}},
		{"dom list or dow name", "0 0 1,20 * SUN", "", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-18T00:00:00Z", "2026-01-20T00:00:00Z", "2026-01-25T00:00:00Z", "2026-02-01T00:00:00Z"}},
		{"dom only", "0 0 13 * *", "", jan1, []string{"2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z"}},
		{"dow only", "0 0 * * 5", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z"}},
		// '*/10' starts with '*': days 1,11,21,31 that are also Mondays.
		{"star step dom ands", "0 0 */10 * 1", "", jan1, []string{"2026-05-11T00:00:00Z", "2026-06-01T00:00:00Z"}},
		// '*/2' dow starts with '*': day 13 that is also Sun/Tue/Thu/Sat.
		{"star step dow ands", "0 0 13 * */2", "", jan1, []string{"2026-01-13T00:00:00Z", "2026-06-13T00:00:00Z"}},
		// Month 2 restricts both: Feb 30 never exists, so Mondays in February.
		{"feb 30 or monday", "0 0 30 2 MON", "", jan1, []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"}},
	})
}

func TestNextDescriptors(t *testing.T) {
	runNextCases(t, []nextCase{
		{"yearly", "@yearly", "", jan1, []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"annually", "@annually", "", jan1, []string{"2027-01-01T00:00:00Z"}},
		{"monthly", "@monthly", "", jan1, []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"weekly", "@weekly", "", jan1, []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"daily", "@daily", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"midnight", "@midnight", "", jan1, []string{"2026-01-02T00:00:00Z"}},
		{"hourly", "@hourly", "", jan1, []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{"case and space", "  @Daily\t", "", jan1, []string{"2026-01-02T00:00:00Z"}},
		{"daily in zone", "@daily", "Asia/Tokyo", jan1, []string{"2026-01-01T15:00:00Z", "2026-01-02T15:00:00Z"}},
	})
}

func TestNextEvery(t *testing.T) {
	runNextCases(t, []nextCase{
		{"1m mid-minute", "@every 1m", "", "2026-01-01T12:00:30Z", []string{"2026-01-01T12:01:00Z", "2026-01-01T12:02:00Z"}},
		{"1m on slot", "@every 1m", "", "2026-01-01T12:00:00Z", []string{"2026-01-01T12:01:00Z"}},
		// 2026-01-01 is 1767225600000 ms = 7000 × 252460800, itself a slot.
		{"7s epoch aligned", "@every 7s", "", jan1, []string{"2026-01-01T00:00:07Z", "2026-01-01T00:00:14Z", "2026-01-01T00:00:21Z"}},
		// 2026-01-01T00:00:01Z: 1767225601000 mod 7000 = 1000 → next is 00:00:07.
		{"7s off slot", "@every 7s", "", "2026-01-01T00:00:01Z", []string{"2026-01-01T00:00:07Z"}},
		{"7s before", "@every 7s", "", "2025-12-31T23:59:59.999Z", []string{"2026-01-01T00:00:00Z"}},
		{"offset", "@every 1h +15m", "", "2026-01-01T12:20:00Z", []string{"2026-01-01T13:15:00Z", "2026-01-01T14:15:00Z"}},
		{"offset just before", "@every 1h +15m", "", "2026-01-01T12:14:59.999Z", []string{"2026-01-01T12:15:00Z"}},
		{"ms offset", "@every 1s +250ms", "", jan1, []string{"2026-01-01T00:00:00.25Z", "2026-01-01T00:00:01.25Z"}},
		{"1500ms", "@every 1500ms", "", "1970-01-01T00:00:01Z", []string{"1970-01-01T00:00:01.5Z", "1970-01-01T00:00:03Z"}},
		{"before epoch", "@every 90m", "", "1969-12-31T22:00:00Z", []string{"1969-12-31T22:30:00Z", "1970-01-01T00:00:00Z", "1970-01-01T01:30:00Z"}},
		{"1ms sub-ms input", "@every 1ms", "", "2026-01-01T00:00:00.0005Z", []string{"2026-01-01T00:00:00.001Z", "2026-01-01T00:00:00.002Z"}},
		{"zone irrelevant", "@every 24h +2h", "Europe/Berlin", jan1, []string{"2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z"}},
		{"tabs", "@every\t10m   +1m ", "", jan1, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:11:00Z"}},
		// 1825 days; 2026-01-01 is day 20454, next multiple is day 21900.
		{"max period", "@every 43800h", "", jan1, []string{"2029-12-17T00:00:00Z"}},
	})
	// Every @every 7s slot is an epoch multiple of 7000 ms.
	s := mustParse(t, "@every 7s", nil)
	for ts := range s.Slots(mustTime(t, jan1), mustTime(t, "2026-01-01T01:00:00Z")) {
		if ts.UnixMilli()%7000 != 0 {
			t.Fatalf("slot %v not a multiple of 7000ms", ts)
		}
	}
}

func TestNextStrictlyAfter(t *testing.T) {
	cases := []struct {
		expr, from, want string
	}{
		{"0 12 * * *", "2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z"},
		{"0 12 * * *", "2026-01-01T11:59:59.999999999Z", "2026-01-01T12:00:00Z"},
		{"0 12 * * *", "2026-01-01T12:00:00.000000001Z", "2026-01-02T12:00:00Z"},
		{"@every 1s", "2026-01-01T00:00:05Z", "2026-01-01T00:00:06Z"},
		{"@every 1s", "2026-01-01T00:00:05.0000001Z", "2026-01-01T00:00:06Z"},
		{"@every 1ms", "2026-01-01T00:00:05.001Z", "2026-01-01T00:00:05.002Z"},
		{"@every 1ms", "2026-01-01T00:00:05.0019999Z", "2026-01-01T00:00:05.002Z"},
		{"* * * * * *", "1969-12-31T23:59:59.5Z", "1970-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		s := mustParse(t, c.expr, nil)
		from := mustTime(t, c.from)
		got := s.Next(from)
		if want := mustTime(t, c.want); !got.Equal(want) {
			t.Errorf("%q.Next(%s) = %v, want %v", c.expr, c.from, got, want)
		}
		if got.Location() != time.UTC {
			t.Errorf("%q.Next(%s) location %v, want UTC", c.expr, c.from, got.Location())
		}
		if got.Nanosecond()%int(time.Millisecond) != 0 {
			t.Errorf("%q.Next(%s) = %v not ms-truncated", c.expr, c.from, got)
		}
	}
}

func TestNextNoneWithin5Years(t *testing.T) {
	s := mustParse(t, "0 0 29 2 *", nil)
	// 2100 is not a leap year: 2096-02-29 is followed by 2104-02-29.
	if got := s.Next(mustTime(t, "2096-03-01T00:00:00Z")); !got.IsZero() {
		t.Errorf("Next = %v, want zero (next leap day is 8 years away)", got)
	}
	// Slots is not limited to 5 years.
	var got []time.Time
	for ts := range s.Slots(mustTime(t, "2096-01-01T00:00:00Z"), mustTime(t, "2105-01-01T00:00:00Z")) {
		got = append(got, ts)
	}
	if len(got) != 2 || !got[1].Equal(mustTime(t, "2104-02-29T00:00:00Z")) {
		t.Errorf("Slots = %v", got)
	}
	// Out-of-range instants yield nothing and do not panic.
	far := time.Unix(math.MaxInt64/2, 0)
	for _, expr := range []string{"* * * * *", "@every 1ms"} {
		s := mustParse(t, expr, nil)
		if got := s.Next(far); !got.IsZero() {
			t.Errorf("%q.Next(far future) = %v, want zero", expr, got)
		}
		if got := s.Next(time.Unix(math.MinInt64/2, 0)); !got.IsZero() {
			t.Errorf("%q.Next(far past) = %v, want zero", expr, got)
		}
		if n := s.Count(time.Unix(math.MinInt64/2, 0), time.Unix(math.MinInt64/2+100, 0), 10); n != 0 {
			t.Errorf("%q.Count(far past) = %d", expr, n)
		}
	}
	// The zero time works.
	if got := mustParse(t, "@yearly", nil).Next(time.Time{}); !got.Equal(mustTime(t, "0002-01-01T00:00:00Z")) {
		t.Errorf("Next(zero) = %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		expr, field string
	}{
		{"", "expression"},
		{"   ", "expression"},
		{"* * * *", "expression"},
		{"* * * * * * *", "expression"},
		{"60 * * * *", "minute"},
		{"* 24 * * *", "hour"},
		{"* * 0 * *", "day-of-month"},
		{"* * 32 * *", "day-of-month"},
		{"* * * 0 *", "month"},
		{"* * * 13 *", "month"},
		{"* * * * 8", "day-of-week"},
		{"60 * * * * *", "second"},
		{"5-1 * * * *", "minute"},
		{"* * * DEC-JAN *", "month"},
		{"* * * * FRI-MON", "day-of-week"},
		{"*/0 * * * *", "minute"},
		{"1-5/0 * * * *", "minute"},
		{"0 */0 * * *", "hour"},
		{"1,,2 * * * *", "minute"},
		{",1 * * * *", "minute"},
		{"1, * * * *", "minute"},
		{"x * * * *", "minute"},
		{"1x * * * *", "minute"},
		{"-1 * * * *", "minute"},
		{"1- * * * *", "minute"},
		{"1-2-3 * * * *", "minute"},
		{"*-5 * * * *", "minute"},
		{"*/ * * * *", "minute"},
		{"/5 * * * *", "minute"},
		{"*/2/3 * * * *", "minute"},
		{"*/-1 * * * *", "minute"},
		{"99999999 * * * *", "minute"},
		{"٣ * * * *", "minute"},
		{"* * * FOO *", "month"},
		{"* * * MON *", "month"},
		{"* * * January *", "month"},
		{"* * * * MONDAY", "day-of-week"},
		{"* * * * JAN", "day-of-week"},
		{"* * ? * *", "day-of-month"},
		{"0 0 30 2 *", "day-of-month"},
		{"0 0 31 4 *", "day-of-month"},
		{"0 0 31 2,4,6,9,11 *", "day-of-month"},
		{"0 0 30-31 feb *", "day-of-month"},
		{"@", "descriptor"},
		{"@foo", "descriptor"},
		{"@daily 5", "descriptor"},
		{"@every", "every"},
		{"@every 0s", "every"},
		{"@every -1m", "every"},
		{"@every 500us", "every"},
		{"@every 1.5ms", "every"},
		{"@every abc", "every"},
		{"@every 1", "every"},
		{"@every 43801h", "every"},
		{"@every 1h 15m", "offset"},
		{"@every 1h +1h", "offset"},
		{"@every 1h +2h", "offset"},
		{"@every 1h +-5m", "offset"},
		{"@every 1h ++5m", "offset"},
		{"@every 1h +1.5ms", "offset"},
		{"@every 1h +x", "offset"},
		{"@every 1h +", "offset"},
		{"@every 1h +5m extra", "expression"},
	}
	for _, c := range cases {
		s, err := Parse(c.expr, nil)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error in %s", c.expr, s, c.field)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error %T is not *ParseError", c.expr, err)
			continue
		}
		if pe.Field != c.field || pe.Expr != c.expr || pe.Msg == "" {
			t.Errorf("Parse(%q) = %+v, want field %q", c.expr, pe, c.field)
		}
		if msg := err.Error(); !strings.Contains(msg, ": "+c.field+": ") || !strings.HasPrefix(msg, "cron: ") {
			t.Errorf("Parse(%q) message %q does not name field %q", c.expr, msg, c.field)
		}
	}
}

func TestParseValid(t *testing.T) {
	for _, expr := range []string{
		"0 0 29 2 *", "0 0 31 * *", "0 0 30 2 MON", "0 0 29 feb SUN", "0-59 0-23 1-31 1-12 0-7",
		"0 0 * * 0,7", "59 23 31 DEC SAT", "@every 1ms", "@every 43800h", "@every 1h +59m59.999s",
		"@every 2h30m +0s", "*/60 * * * *", "7/2 * * * *", "0 0 * * 7/1",
	} {
		if _, err := Parse(expr, nil); err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
		}
	}
}

func TestAccessors(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	cases := []struct {
		expr     string
		loc      *time.Location
		wantLoc  *time.Location
		interval time.Duration
	}{
		{" */5 * * * * ", nil, time.UTC, 0},
		{"@daily", berlin, berlin, 0},
		{"@every 90s", berlin, berlin, 90 * time.Second},
		{"@every 1h +15m", nil, time.UTC, time.Hour},
		{"@every 1.5s", nil, time.UTC, 1500 * time.Millisecond},
	}
	for _, c := range cases {
		s := mustParse(t, c.expr, c.loc)
		if s.String() != c.expr {
			t.Errorf("String() = %q, want %q", s.String(), c.expr)
		}
		if s.Location() != c.wantLoc {
			t.Errorf("%q Location() = %v, want %v", c.expr, s.Location(), c.wantLoc)
		}
		if s.Interval() != c.interval {
			t.Errorf("%q Interval() = %v, want %v", c.expr, s.Interval(), c.interval)
		}
	}
}

func collect(s *Schedule, a, b time.Time) []string {
	var out []string
	for ts := range s.Slots(a, b) {
		out = append(out, ts.Format(time.RFC3339Nano))
	}
	return out
}

func TestSlotsAndCount(t *testing.T) {
	cases := []struct {
		name, expr, a, b string
		want             []string
	}{
		{"half-open cron", "0 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T03:00:00Z",
			[]string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z"}},
		{"sub-second bounds", "0 * * * *", "2026-01-01T00:00:00.1Z", "2026-01-01T02:59:59.999Z",
			[]string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{"empty a==b", "0 * * * *", "2026-01-01T01:00:00Z", "2026-01-01T01:00:00Z", nil},
		{"empty b<a", "0 * * * *", "2026-01-01T05:00:00Z", "2026-01-01T01:00:00Z", nil},
		{"single slot at b", "0 * * * *", "2026-01-01T00:59:59Z", "2026-01-01T01:00:00Z", []string{"2026-01-01T01:00:00Z"}},
		{"half-open every", "@every 1h +15m", "2026-01-01T00:15:00Z", "2026-01-01T03:15:00Z",
			[]string{"2026-01-01T01:15:00Z", "2026-01-01T02:15:00Z", "2026-01-01T03:15:00Z"}},
		{"every sub-ms", "@every 1ms", "2026-01-01T00:00:00.0005Z", "2026-01-01T00:00:00.0025Z",
			[]string{"2026-01-01T00:00:00.001Z", "2026-01-01T00:00:00.002Z"}},
		{"every none", "@every 1h", "2026-01-01T00:00:01Z", "2026-01-01T00:59:59Z", nil},
		{"seconds", "*/20 * * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z",
			[]string{"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustParse(t, c.expr, nil)
			a, b := mustTime(t, c.a), mustTime(t, c.b)
			got := collect(s, a, b)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("Slots = %v, want %v", got, c.want)
			}
			n := int64(len(c.want))
			if cnt := s.Count(a, b, math.MaxInt64); cnt != n {
				t.Errorf("Count = %d, want %d", cnt, n)
			}
			if n > 1 {
				if cnt := s.Count(a, b, n-1); cnt != n-1 {
					t.Errorf("Count(max=%d) = %d", n-1, cnt)
				}
			}
			if cnt := s.Count(a, b, 0); cnt != 0 {
				t.Errorf("Count(max=0) = %d", cnt)
			}
			if cnt := s.Count(a, b, -1); cnt != 0 {
				t.Errorf("Count(max=-1) = %d", cnt)
			}
			// Early break must be honoured.
			k := 0
			for range s.Slots(a, b) {
				k++
				break
			}
			if k > 1 {
				t.Errorf("Slots ignored break")
			}
		})
	}
}

func TestCountEveryArithmetic(t *testing.T) {
	s := mustParse(t, "@every 1s", nil)
	a, b := mustTime(t, "2025-01-01T00:00:00Z"), mustTime(t, "2026-01-01T00:00:00Z")
	start := time.Now()
	if n := s.Count(a, b, math.MaxInt64); n != 31536000 {
		t.Fatalf("Count = %d, want 31536000", n)
	}
	if n := s.Count(a, b, 10); n != 10 {
		t.Fatalf("Count(max=10) = %d, want 10", n)
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("Count for @every took %v, want O(1)", el)
	}
	// A century of milliseconds is still instant.
	ms := mustParse(t, "@every 1ms +0s", nil)
	if n := ms.Count(mustTime(t, "2000-01-01T00:00:00Z"), mustTime(t, "2100-01-01T00:00:00Z"), math.MaxInt64); n != 36525*86400*1000 {
		t.Errorf("Count = %d", n)
	}
	// Count agrees with Slots on assorted ranges, including negative instants.
	for _, expr := range []string{"@every 7s", "@every 1h +15m", "@every 1500ms +1ms", "@every 13m"} {
		s := mustParse(t, expr, nil)
		for _, r := range [][2]string{
			{"2026-01-01T00:00:00Z", "2026-01-01T05:00:00Z"},
			{"1969-12-31T22:00:00.123Z", "1970-01-01T01:00:00.5Z"},
			{"2026-01-01T00:15:00Z", "2026-01-01T00:15:00.001Z"},
		} {
			a, b := mustTime(t, r[0]), mustTime(t, r[1])
			if got, want := s.Count(a, b, math.MaxInt64), int64(len(collect(s, a, b))); got != want {
				t.Errorf("%q Count(%s, %s) = %d, Slots gave %d", expr, r[0], r[1], got, want)
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	s := mustParse(t, "*/5 * * * *", mustLoc(t, "Europe/Berlin"))
	e := mustParse(t, "@every 7s", nil)
	from := mustTime(t, "2026-03-29T00:00:00Z")
	want := s.Next(from)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if got := s.Next(from); !got.Equal(want) {
					t.Errorf("Next = %v, want %v", got, want)
					return
				}
				_ = e.Next(from)
				if _, err := Parse("0 0 * * MON-FRI", nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestAgainstBruteForce compares Next in UTC with the reference's
// minute-by-minute walk (ref_test.go).
func TestAgainstBruteForce(t *testing.T) {
	exprs := []string{"*/7 3-5 * * *", "0 0 13 * 5", "15 10 */10 * 1", "0 12 * 2,3 sun-tue", "0 0 L * *"}
	for _, expr := range exprs {
		s := mustParse(t, expr, nil)
		r, err := refParse(expr, "")
		if err != nil {
			t.Fatalf("reference rejects %q", expr)
		}
		from := mustTime(t, "2026-01-01T00:00:00Z")
		want := refSlots(r, time.UTC, from, from.AddDate(5, 0, 0), 20)
		if len(want) < 20 {
			t.Fatalf("%q: the reference found only %v", expr, want)
		}
		got := from
		for i := range want {
			if got = s.Next(got); !got.Equal(want[i]) {
				t.Fatalf("%q step %d: Next = %v, brute force %v", expr, i, got, want[i])
			}
		}
	}
}
