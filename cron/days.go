package cron

import (
	"strconv"
	"strings"
)

// monthDays holds the day forms whose days depend on the month and year —
// L, L-n, nW and LW in day-of-month, nL and n#k in day-of-week. They cannot
// live in the static bit sets, so dayMatches consults them for each day.
type monthDays struct {
	lastMinus   uint32 // L-n: bit n (L is L-0), n in 0..30
	nearest     uint32 // nW: bit n, n in 1..31
	lastWeekday bool   // LW
	lastDow     uint8  // nL: bit n, n in 0 (Sunday)..6
	nthDow      uint64 // n#k: bit 7*(k-1)+n
}

// dom reports whether day d (weekday wd) of a month with last days matches
// one of the day-of-month forms.
func (m *monthDays) dom(d, wd, last int) bool {
	if m.lastMinus&(1<<uint(last-d)) != 0 {
		return true
	}
	if !isWorkday(wd) {
		return false // LW and nW only ever choose Monday..Friday
	}
	if m.lastWeekday && d == nearestWorkday(last, (wd+last-d)%7, last) {
		return true
	}
	if m.nearest != 0 {
		// nW lands at most two days from n.
		for n := max(1, d-2); n <= min(last, d+2); n++ {
			if m.nearest&(1<<uint(n)) != 0 && nearestWorkday(n, (wd+n-d+7)%7, last) == d {
				return true
			}
		}
	}
	return false
}

// dow reports whether day d (weekday wd) of a month with last days matches
// one of the day-of-week forms.
func (m *monthDays) dow(d, wd, last int) bool {
	if m.lastDow&(1<<uint(wd)) != 0 && d+7 > last {
		return true
	}
	return m.nthDow&(1<<uint(7*((d-1)/7)+wd)) != 0
}

func isWorkday(wd int) bool { return wd >= 1 && wd <= 5 }

// nearestWorkday is Quartz's W rule for day n (weekday wd) of a month with
// last days: a Saturday moves to Friday and a Sunday to Monday, except
// that the move never leaves the month (Saturday the 1st moves to Monday
// the 3rd, Sunday the last to Friday two days before).
func nearestWorkday(n, wd, last int) int {
	switch {
	case wd == 6 && n == 1:
		return 3
	case wd == 6:
		return n - 1
	case wd == 0 && n == last:
		return n - 2
	case wd == 0:
		return n + 1
	}
	return n
}

// Kinds of day forms, recognised by dayForm.
const (
	notDayForm      = iota
	formNth         // n#k
	formLast        // L, L-n
	formLastWeekday // LW
	formNearest     // nW
	formLastDow     // nL
)

func classifyDayForm(u string, b bounds) int {
	switch {
	case strings.Contains(u, "#"):
		return formNth
	case u == "LW":
		return formLastWeekday
	case u == "L" || strings.HasPrefix(u, "L-"):
		return formLast
	case strings.HasSuffix(u, "W"): // no month or weekday name ends in W
		return formNearest
	case strings.HasSuffix(u, "L"):
		// In day-of-week nothing else ends in L; elsewhere only digits
		// followed by L are this form (JUL is a month).
		if b.name == fieldDow || isDigits(u[:len(u)-1]) {
			return formLastDow
		}
	}
	return notDayForm
}

// hasDayLetter is a quick test for the elements that may be day forms
// (strings.ContainsAny builds a set on each call).
func hasDayLetter(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 'L', 'l', 'W', 'w', '#':
			return true
		}
	}
	return false
}

// asciiUpper upper-cases ASCII letters only: strings.ToUpper would turn
// "ſun" into "SUN", which the month and weekday names must not match.
func asciiUpper(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' }) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// dayForm parses elem if it is one of the L, W or # forms, recording it in
// m. ok reports whether it was; msg is then "" or why elem is invalid here.
func dayForm(elem string, b bounds, m *monthDays) (ok bool, msg string) {
	if !hasDayLetter(elem) {
		return false, ""
	}
	u := asciiUpper(elem)
	base, _, hasStep := strings.Cut(u, "/")
	kind := classifyDayForm(base, b)
	if kind == notDayForm {
		return false, ""
	}
	fail := func(msg string) (bool, string) { return true, elem + ": " + msg }
	const (
		onlyDom  = "W is only allowed in day-of-month"
		onlyDays = "L is only allowed in day-of-month and day-of-week"
	)
	switch {
	case kind == formNth && b.name != fieldDow:
		return fail("# is only allowed in day-of-week")
	case (kind == formNearest || kind == formLastWeekday) && b.name != fieldDom:
		return fail(onlyDom)
	case (kind == formLast || kind == formLastDow) && b.name != fieldDom && b.name != fieldDow:
		return fail(onlyDays)
	case kind == formLast && b.name == fieldDow:
		if base == "L" {
			return fail("L alone is not allowed in day-of-week: write nL, for example 5L for the last Friday")
		}
		return fail("L-n is only allowed in day-of-month")
	case kind == formLastDow && b.name == fieldDom:
		return fail("nL (the last weekday n) is only allowed in day-of-week; in day-of-month write L or L-n")
	case hasStep:
		return fail("a step is not allowed with L, W or #")
	}

	switch kind {
	case formLast:
		n := 0
		if base != "L" {
			text := base[2:]
			v, ok := parseNumber(text)
			if !ok {
				return fail("invalid offset " + strconv.Quote(text) + " (write L-n, n days before the last day)")
			}
			if v > 30 {
				return fail("offset " + text + " out of range 0-30")
			}
			n = v
		}
		m.lastMinus |= 1 << uint(n)
	case formLastWeekday:
		m.lastWeekday = true
	case formNearest:
		text := base[:len(base)-1]
		if !isDigits(text) {
			return fail("W takes a single day, for example 15W")
		}
		v, msg := parseValue(text, b)
		if msg != "" {
			return fail(msg)
		}
		m.nearest |= 1 << uint(v)
	case formLastDow:
		v, msg := weekdayValue(base[:len(base)-1], "L", "5L", b)
		if msg != "" {
			return fail(msg)
		}
		m.lastDow |= 1 << uint(v)
	case formNth:
		day, week, _ := strings.Cut(base, "#")
		v, msg := weekdayValue(day, "#", "5#3", b)
		if msg != "" {
			return fail(msg)
		}
		k, ok := parseNumber(week)
		if !ok {
			return fail("invalid week " + strconv.Quote(week) + " (write n#k with k 1-5)")
		}
		if k < 1 || k > 5 {
			return fail("week " + week + " does not exist (1-5)")
		}
		m.nthDow |= 1 << uint(7*(k-1)+v)
	}
	return true, ""
}

// weekdayValue parses the single weekday before L or #k (0-7 or a name;
// 7 is Sunday).
func weekdayValue(text, suffix, example string, b bounds) (int, string) {
	if text == "" || strings.ContainsAny(text, "-*,") {
		return 0, "needs a single weekday before " + suffix + ", for example " + example
	}
	v, msg := parseValue(text, b)
	if msg != "" {
		return 0, msg
	}
	return v % 7, ""
}
