package cron

import (
	"strconv"
	"strings"
	"time"
)

// ParseError reports why an expression was rejected. Field names the part of
// the expression at fault: "second", "minute", "hour", "day-of-month",
// "month", "day-of-week", "descriptor", "every", "offset" or "expression".
type ParseError struct {
	Expr  string
	Field string
	Msg   string

	err error // cause for errors.Is, such as ErrNoJobName
}

// Error implements error. The message always names the field, for example
// `cron: "0 0 30 2 *": day-of-month: no fire time within 5 years`.
func (e *ParseError) Error() string {
	return "cron: " + strconv.Quote(e.Expr) + ": " + e.Field + ": " + e.Msg
}

// Unwrap returns the cause, if the error has one (ErrNoJobName).
func (e *ParseError) Unwrap() error { return e.err }

// Field names used in ParseError.Field.
const (
	fieldSecond     = "second"
	fieldMinute     = "minute"
	fieldHour       = "hour"
	fieldDom        = "day-of-month"
	fieldMonth      = "month"
	fieldDow        = "day-of-week"
	fieldDescriptor = "descriptor"
	fieldEvery      = "every"
	fieldOffset     = "offset"
	fieldExpression = "expression"
)

// maxEvery is the longest accepted @every period: 5×365 days, so that every
// @every schedule fires within 5 years of any instant.
const maxEvery = 5 * 365 * 24 * time.Hour

// bounds describes one cron field.
type bounds struct {
	name string
	min  int // smallest accepted value
	max  int // largest accepted value
	// starMax is the upper end used for "*" and "a/s"; it differs from max
	// only for day-of-week, where 7 is an alias of 0 (Sunday).
	starMax int
	// hashMax is the upper end for H and H/s: 28 for day-of-month, as in
	// Jenkins, so that a hashed day exists in every month; 6 for
	// day-of-week, so that Sunday is not weighted twice.
	hashMax int
	names   map[string]int
}

var (
	secondBounds = bounds{name: fieldSecond, min: 0, max: 59, starMax: 59, hashMax: 59}
	minuteBounds = bounds{name: fieldMinute, min: 0, max: 59, starMax: 59, hashMax: 59}
	hourBounds   = bounds{name: fieldHour, min: 0, max: 23, starMax: 23, hashMax: 23}
	domBounds    = bounds{name: fieldDom, min: 1, max: 31, starMax: 31, hashMax: 28}
	monthBounds  = bounds{name: fieldMonth, min: 1, max: 12, starMax: 12, hashMax: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	dowBounds = bounds{name: fieldDow, min: 0, max: 7, starMax: 6, hashMax: 6, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
)

// descriptors maps the @-shorthands to their 5-field equivalents.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// validationRef is the fixed wall-clock reference (2001-01-01T00:00:00 in the
// schedule's zone) from which Parse checks that a cron expression fires at
// least once within 5 years. Using a fixed reference keeps Parse deterministic.
var validationRef = daysFromCivil(2001, 1, 1) * secondsPerDay

// Parse parses expr; loc nil means UTC. Errors are *ParseError and name the
// field at fault. Parse is safe for concurrent use; the returned *Schedule is
// immutable. An expression using H needs a job name: see ParseFor.
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	return ParseFor(expr, loc, "")
}

// ParseFor parses expr for the job called name, from which the values of
// H fields are hashed (see the package documentation). Without H the name
// is irrelevant and ParseFor is Parse. H with an empty name is a
// *ParseError whose cause is ErrNoJobName.
//
// Equal schedules are shared: two calls whose expressions parse to the
// same schedule (the same text in the same zone, H hashing to the same
// values) return one *Schedule while either result is in use, so a
// fleet of a million jobs written "H H * * * *" holds at most 3,600
// schedules, not a million (see share).
func ParseFor(expr string, loc *time.Location, name string) (*Schedule, error) {
	s, err := parseFor(expr, loc, name)
	if err != nil {
		return nil, err
	}
	return share(s), nil
}

func parseFor(expr string, loc *time.Location, name string) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s := &Schedule{expr: expr, loc: loc}
	text := strings.TrimSpace(expr)
	fail := func(field, msg string) (*Schedule, error) {
		return nil, &ParseError{Expr: expr, Field: field, Msg: msg}
	}
	if text == "" {
		return fail(fieldExpression, "empty expression")
	}
	if text[0] == '@' {
		fields := strings.Fields(text)
		name := strings.ToLower(fields[0])
		if name == "@every" {
			return parseEvery(s, fields[1:])
		}
		std, ok := descriptors[name]
		if !ok {
			return fail(fieldDescriptor, "unknown descriptor "+strconv.Quote(fields[0]))
		}
		if len(fields) != 1 {
			return fail(fieldDescriptor, "unexpected text after "+fields[0])
		}
		text = std
	}

	fields := strings.Fields(text)
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return fail(fieldExpression, "expected 5 or 6 fields, got "+strconv.Itoa(len(fields)))
	}
	all := []struct {
		b   bounds
		dst *uint64
	}{
		{secondBounds, &s.second},
		{minuteBounds, &s.minute},
		{hourBounds, &s.hour},
		{domBounds, &s.dom},
		{monthBounds, &s.month},
		{dowBounds, &s.dow},
	}
	p := fieldParser{name: name}
	for i, f := range all {
		bits, err := p.parse(fields[i], f.b)
		if p.noName {
			return nil, &ParseError{Expr: expr, Field: f.b.name, Msg: err, err: ErrNoJobName}
		}
		if err != "" {
			return fail(f.b.name, err)
		}
		*f.dst = bits
	}
	if p.days != (monthDays{}) {
		days := p.days
		s.days = &days
	}
	// Day-of-week 7 is Sunday.
	if s.dow&(1<<7) != 0 {
		s.dow = s.dow&^(1<<7) | 1
	}
	s.domStar = strings.HasPrefix(fields[3], "*")
	s.dowStar = strings.HasPrefix(fields[5], "*")

	// Reject expressions that never fire (e.g. "0 0 30 2 *").
	ref := s.image(validationRef) - 1
	if _, ok := s.nextCron(ref, ref+fiveYears(ref)); !ok {
		field := fieldExpression
		switch {
		case !s.domStar:
			field = fieldDom
		case !s.dowStar:
			field = fieldDow
		}
		return fail(field, "no fire time within 5 years")
	}
	return s, nil
}

// fieldParser parses the fields of one expression. It collects the day
// forms that depend on the month and counts the H elements of each field.
type fieldParser struct {
	name   string // job name for H
	days   monthDays
	noName bool // H was met without a job name
}

// parse parses one cron field into a bit set (the L, W and # forms go to
// p.days). It returns a non-empty message on error.
func (p *fieldParser) parse(field string, b bounds) (uint64, string) {
	var bits uint64
	hashes := 0
	for _, elem := range strings.Split(field, ",") {
		if elem == "" {
			return 0, "empty list element in " + strconv.Quote(field)
		}
		if elem[0] == 'H' || elem[0] == 'h' {
			if p.name == "" {
				p.noName = true
				return 0, "H needs a job name, from which its value is hashed (cron.ParseFor)"
			}
			v, msg := parseHash(elem, b, p.name, hashes)
			if msg != "" {
				return 0, msg
			}
			bits |= v
			hashes++
			continue
		}
		if ok, msg := dayForm(elem, b, &p.days); ok {
			if msg != "" {
				return 0, msg
			}
			continue
		}
		lo, hi, step := 0, 0, 1
		rng, stepText, hasStep := strings.Cut(elem, "/")
		if hasStep {
			n, ok := parseNumber(stepText)
			if !ok {
				return 0, "invalid step " + strconv.Quote(stepText) + " in " + strconv.Quote(elem)
			}
			if n == 0 {
				return 0, "step must be positive in " + strconv.Quote(elem)
			}
			step = n
		}
		switch {
		case rng == "*":
			lo, hi = b.min, b.starMax
		case strings.Contains(rng, "-"):
			a, z, _ := strings.Cut(rng, "-")
			var msg string
			if lo, hi, msg = parseRange(a, z, b); msg != "" {
				return 0, msg
			}
			if lo > hi {
				return 0, "reversed range " + strconv.Quote(rng)
			}
		default:
			var msg string
			if lo, msg = parseValue(rng, b); msg != "" {
				return 0, msg
			}
			hi = lo
			if hasStep {
				hi = b.starMax
				if lo > hi {
					hi = lo
				}
			}
		}
		for v := lo; v <= hi; v += step {
			bits |= 1 << uint(v)
		}
	}
	return bits, ""
}

// parseRange parses the ends of the range a-z. It does not check their
// order.
func parseRange(a, z string, b bounds) (lo, hi int, msg string) {
	if lo, msg = parseValue(a, b); msg != "" {
		return 0, 0, msg
	}
	if hi, msg = parseValue(z, b); msg != "" {
		return 0, 0, msg
	}
	// "FRI-SUN": SUN as the end of a range means 7.
	if b.name == fieldDow && hi == 0 && lo > 0 && strings.EqualFold(z, "sun") {
		hi = 7
	}
	return lo, hi, ""
}

// parseValue parses a number or (for month and day-of-week) a name and checks
// it against the field's range.
func parseValue(text string, b bounds) (int, string) {
	if text == "" {
		return 0, "missing value"
	}
	if v, ok := b.names[strings.ToLower(text)]; ok {
		return v, ""
	}
	v, ok := parseNumber(text)
	if !ok {
		return 0, "invalid value " + strconv.Quote(text)
	}
	if v < b.min || v > b.max {
		return 0, "value " + text + " out of range " + strconv.Itoa(b.min) + "-" + strconv.Itoa(b.max)
	}
	return v, ""
}

// parseNumber parses a short unsigned decimal number.
func parseNumber(text string) (int, bool) {
	if text == "" || len(text) > 6 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// parseEvery parses the arguments of "@every <duration> [+<offset>]".
func parseEvery(s *Schedule, args []string) (*Schedule, error) {
	fail := func(field, msg string) (*Schedule, error) {
		return nil, &ParseError{Expr: s.expr, Field: field, Msg: msg}
	}
	if len(args) == 0 {
		return fail(fieldEvery, "missing duration")
	}
	if len(args) > 2 {
		return fail(fieldExpression, "unexpected text after @every offset")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return fail(fieldEvery, "invalid duration "+strconv.Quote(args[0]))
	}
	switch {
	case d < time.Millisecond:
		return fail(fieldEvery, "duration must be at least 1ms")
	case d%time.Millisecond != 0:
		return fail(fieldEvery, "duration must be a whole number of milliseconds")
	case d > maxEvery:
		return fail(fieldEvery, "duration must be at most "+maxEvery.String()+" (5×365 days)")
	}
	var off time.Duration
	if len(args) == 2 {
		text := args[1]
		if len(text) < 2 || text[0] != '+' || !(text[1] == '.' || text[1] >= '0' && text[1] <= '9') {
			return fail(fieldOffset, "offset must look like +<duration>, got "+strconv.Quote(text))
		}
		off, err = time.ParseDuration(text[1:])
		if err != nil {
			return fail(fieldOffset, "invalid offset "+strconv.Quote(text))
		}
		switch {
		case off%time.Millisecond != 0:
			return fail(fieldOffset, "offset must be a whole number of milliseconds")
		case off < 0 || off >= d:
			return fail(fieldOffset, "offset must be in [0, "+d.String()+")")
		}
	}
	s.everyMs = d.Milliseconds()
	s.offsetMs = off.Milliseconds()
	return s, nil
}
