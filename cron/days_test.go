package cron

import (
	"errors"
	"strings"
	"testing"
)

// 2026: Jan 31 Sat, Feb 28 Sat, Mar 31 Tue, Apr 30 Thu, May 31 Sun,
// Aug 1 Sat, Oct 31 Sat; Jan 1 Thu, Feb 1 Sun, Feb 15 Sun, Aug 15 Sat.
func TestNextDayForms(t *testing.T) {
	runNextCases(t, []nextCase{
		{"L", "0 0 L * *", "", jan1, []string{"2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"}},
		{"L leap year", "0 0 L 2 *", "", "2027-06-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		{"L-1", "0 0 L-1 * *", "", jan1, []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-30T00:00:00Z"}},
		{"L-0 is L", "0 0 L-0 * *", "", jan1, []string{"2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z"}},
		// Day 1 of the 31-day months only.
		{"L-30", "0 0 L-30 * *", "", jan1, []string{"2026-03-01T00:00:00Z", "2026-05-01T00:00:00Z", "2026-07-01T00:00:00Z"}},
		{"LW", "0 0 LW * *", "", jan1, []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z", "2026-05-29T00:00:00Z"}},
		{"15W", "0 0 15W * *", "", jan1, []string{"2026-01-15T00:00:00Z", "2026-02-16T00:00:00Z", "2026-03-16T00:00:00Z", "2026-04-15T00:00:00Z"}},
		{"15W saturday", "0 0 15W 8 *", "", jan1, []string{"2026-08-14T00:00:00Z"}},
		// Saturday the 1st moves forward to Monday the 3rd, not into July.
		{"1W", "0 12 1W * *", "", jan1, []string{"2026-01-01T12:00:00Z", "2026-02-02T12:00:00Z", "2026-03-02T12:00:00Z", "2026-04-01T12:00:00Z"}},
		{"1W saturday", "0 12 1W 8 *", "", jan1, []string{"2026-08-03T12:00:00Z"}},
		// A day the month lacks does not fire; Sunday the 31st moves back.
		{"31W", "0 0 31W * *", "", jan1, []string{"2026-01-30T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-29T00:00:00Z", "2026-07-31T00:00:00Z"}},
		// 2024-06-30 is the last day and a Sunday: Friday the 28th.
		{"30W sunday last day", "0 0 30W 6 *", "", "2024-01-01T00:00:00Z", []string{"2024-06-28T00:00:00Z", "2025-06-30T00:00:00Z"}},
		{"5L last friday", "0 0 * * 5L", "", jan1, []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z", "2026-04-24T00:00:00Z"}},
		{"7L is 0L", "0 0 * * 7L", "", jan1, []string{"2026-01-25T00:00:00Z", "2026-02-22T00:00:00Z", "2026-03-29T00:00:00Z"}},
		{"FRIL", "0 0 * * friL", "", jan1, []string{"2026-01-30T00:00:00Z"}},
		{"5#3", "0 0 * * 5#3", "", jan1, []string{"2026-01-16T00:00:00Z", "2026-02-20T00:00:00Z", "2026-03-20T00:00:00Z"}},
		{"FRI#1", "0 0 * * FRI#1", "", jan1, []string{"2026-01-02T00:00:00Z", "2026-02-06T00:00:00Z"}},
		// Months without a fifth Thursday are skipped.
		{"4#5", "0 0 * * 4#5", "", jan1, []string{"2026-01-29T00:00:00Z", "2026-04-30T00:00:00Z", "2026-07-30T00:00:00Z", "2026-10-29T00:00:00Z", "2026-12-31T00:00:00Z"}},
		{"list of forms", "0 0 1,L-1,L * 1#1,6L", "", jan1, []string{"2026-01-05T00:00:00Z", "2026-01-30T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-27T00:00:00Z", "2026-02-28T00:00:00Z"}},
		{"lower case", "0 0 lw * *", "", jan1, []string{"2026-01-30T00:00:00Z"}},
		{"seconds field", "30 0 0 L * *", "", jan1, []string{"2026-01-31T00:00:30Z", "2026-02-28T00:00:30Z"}},
	})
}

// The Vixie rule is unchanged: the new forms restrict their field, so with
// both fields restricted a day matches either; a field starting with '*'
// makes the other one decide alone.
func TestNextDayFormsVixie(t *testing.T) {
	runNextCases(t, []nextCase{
		{"L or 5L", "0 0 L * 5L", "", jan1, []string{"2026-01-30T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-27T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-27T00:00:00Z", "2026-03-31T00:00:00Z"}},
		{"13 or 5#3", "0 0 13 * 5#3", "", jan1, []string{"2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z"}},
		{"LW or monday", "0 0 LW * MON", "", "2026-01-20T00:00:00Z", []string{"2026-01-26T00:00:00Z", "2026-01-30T00:00:00Z", "2026-02-02T00:00:00Z"}},
		// '*/2' starts with '*': the last day when it is Sun, Tue, Thu or Sat.
		{"L and star step", "0 0 L * */2", "", jan1, []string{"2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z", "2026-05-31T00:00:00Z", "2026-06-30T00:00:00Z", "2026-10-31T00:00:00Z"}},
		// '*/2' day-of-month: last Fridays on odd days.
		{"star step and 5L", "0 0 */2 * 5L", "", jan1, []string{"2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z", "2026-05-29T00:00:00Z", "2026-07-31T00:00:00Z"}},
		{"star and #", "0 0 * JUN 0#1", "", jan1, []string{"2026-06-07T00:00:00Z", "2027-06-06T00:00:00Z"}},
	})
}

func TestDayFormErrors(t *testing.T) {
	cases := []struct {
		expr, field, msg string
	}{
		{"0 0 * * 5#6", "day-of-week", "5#6: week 6 does not exist (1-5)"},
		{"0 0 * * 5#0", "day-of-week", "5#0: week 0 does not exist (1-5)"},
		{"0 0 * * 5#x", "day-of-week", "invalid week"},
		{"0 0 * * 8#1", "day-of-week", "value 8 out of range 0-7"},
		{"0 0 * * #1", "day-of-week", "needs a single weekday before #, for example 5#3"},
		{"0 0 * * 1-5#1", "day-of-week", "needs a single weekday"},
		{"0 0 * * 5#2/2", "day-of-week", "a step is not allowed with L, W or #"},
		{"0 0 5#2 * *", "day-of-month", "# is only allowed in day-of-week"},
		{"5#2 0 * * *", "minute", "# is only allowed in day-of-week"},
		{"0 0 * * 15W", "day-of-week", "W is only allowed in day-of-month"},
		{"0 0 * 3W *", "month", "W is only allowed in day-of-month"},
		{"0 0 * * LW", "day-of-week", "W is only allowed in day-of-month"},
		{"0 L * * *", "hour", "L is only allowed in day-of-month and day-of-week"},
		{"0 0 * 5L *", "month", "L is only allowed in day-of-month and day-of-week"},
		{"0 0 * * L", "day-of-week", "L alone is not allowed in day-of-week"},
		{"0 0 * * L-2", "day-of-week", "L-n is only allowed in day-of-month"},
		{"0 0 5L * *", "day-of-month", "nL (the last weekday n) is only allowed in day-of-week"},
		{"0 0 L-31 * *", "day-of-month", "L-31: offset 31 out of range 0-30"},
		{"0 0 L- * *", "day-of-month", "invalid offset"},
		{"0 0 L-x * *", "day-of-month", "invalid offset"},
		{"0 0 L/2 * *", "day-of-month", "a step is not allowed"},
		{"0 0 15W/2 * *", "day-of-month", "a step is not allowed"},
		{"0 0 32W * *", "day-of-month", "value 32 out of range 1-31"},
		{"0 0 0W * *", "day-of-month", "value 0 out of range 1-31"},
		{"0 0 1-5W * *", "day-of-month", "W takes a single day"},
		{"0 0 W * *", "day-of-month", "W takes a single day"},
		{"0 0 * * 9L", "day-of-week", "out of range 0-7"},
		{"0 0 * * FRIDAYL", "day-of-week", "invalid value"},
		// Never fires: 31W needs a 31-day month, February has none.
		{"0 0 31W 2 *", "day-of-month", "no fire time within 5 years"},
		{"0 0 L-29 2 *", "day-of-month", "no fire time within 5 years"},
		// A February with five Mondays comes in 2016 and 2044: not within
		// 5 years of the 2001 reference.
		{"0 0 * 2 1#5", "day-of-week", "no fire time within 5 years"},
	}
	for _, c := range cases {
		_, err := Parse(c.expr, nil)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want a *ParseError", c.expr, err)
			continue
		}
		if pe.Field != c.field || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("Parse(%q): field %q msg %q, want %q containing %q", c.expr, pe.Field, pe.Msg, c.field, c.msg)
		}
	}
	for _, expr := range []string{
		"0 0 L * *", "0 0 l-30 * *", "0 0 LW,1W * *", "0 0 * * 0L,7L", "0 0 * * sun#5", "0 0 L-28 2 *",
		"0 0 * JUL *", "0 0 * JUN-JUL *", "0 0 * jul/2 *", "0 0 * 2 0#5", "0 0 29 2 1#5",
	} {
		if _, err := Parse(expr, nil); err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
		}
	}
}
