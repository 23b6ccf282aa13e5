package cron

import (
	"errors"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// This file is the tests' independent reading of the syntax in doc.go: a
// second parser built on regular expressions, the H hash computed with
// hash/fnv, and day rules computed with the time package's calendar rather
// than the package's civil-date arithmetic. It is slow and simple on
// purpose; the differential tests check Next, Slots and Count against it.

// refHash is the documented H hash: FNV-1a 64 (hash/fnv) of
// name 0x00 field 0x00 k, then MurmurHash3's fmix64.
func refHash(name, field string, k int) uint64 {
	f := fnv.New64a()
	f.Write([]byte(name))
	f.Write([]byte{0})
	f.Write([]byte(field))
	f.Write([]byte{0})
	f.Write([]byte(strconv.Itoa(k)))
	h := f.Sum64()
	h = (h ^ h>>33) * 0xff51afd7ed558ccd
	h = (h ^ h>>33) * 0xc4ceb9fe1a85ec53
	return h ^ h>>33
}

type refField struct {
	name           string
	lo, hi, starHi int // accepted values, end of "*"
	hashLo, hashHi int // range of plain H
	names          []string
}

var refFields = []refField{
	{name: "second", lo: 0, hi: 59, starHi: 59, hashLo: 0, hashHi: 59},
	{name: "minute", lo: 0, hi: 59, starHi: 59, hashLo: 0, hashHi: 59},
	{name: "hour", lo: 0, hi: 23, starHi: 23, hashLo: 0, hashHi: 23},
	{name: "day-of-month", lo: 1, hi: 31, starHi: 31, hashLo: 1, hashHi: 28},
	{name: "month", lo: 1, hi: 12, starHi: 12, hashLo: 1, hashHi: 12,
		names: []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	{name: "day-of-week", lo: 0, hi: 7, starHi: 6, hashLo: 0, hashHi: 6,
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
}

// refSched matches naive wall times (time.Time in UTC whose fields are the
// wall clock).
type refSched struct {
	sets             [6][64]bool // second..day-of-week; Sunday is 0
	domFns, dowFns   []func(time.Time) bool
	domStar, dowStar bool
	seconds          bool // six fields

	// One-day cache of dayMatch: the walk asks about the same day often.
	cachedDay time.Time
	cachedOK  bool
}

var (
	reHash    = regexp.MustCompile(`^H(?:\(([0-9A-Z]+)-([0-9A-Z]+)\))?(?:/([0-9]+))?$`)
	rePlain   = regexp.MustCompile(`^(?:(\*)|([0-9A-Z]+)(?:-([0-9A-Z]+))?)(?:/([0-9]+))?$`)
	reLast    = regexp.MustCompile(`^L(?:-([0-9]+))?$`)
	reNearest = regexp.MustCompile(`^([0-9]+)W$`)
	reLastDow = regexp.MustCompile(`^([0-9A-Z]+)L$`)
	reNth     = regexp.MustCompile(`^([0-9A-Z]+)#([0-9]+)$`)
)

var errRef = errors.New("rejected")

func refValue(f refField, text string) (int, error) {
	for i, n := range f.names {
		if n != "" && n == text {
			return i, nil
		}
	}
	if len(text) > 6 || strings.Trim(text, "0123456789") != "" {
		return 0, errRef
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < f.lo || v > f.hi {
		return 0, errRef
	}
	return v, nil
}

func refStep(text string) (int, error) {
	if len(text) > 6 {
		return 0, errRef
	}
	s, err := strconv.Atoi(text)
	if err != nil || s < 1 {
		return 0, errRef
	}
	return s, nil
}

// refLastDay is the last day of the month of t.
func refLastDay(t time.Time) int {
	return time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func refParse(expr, name string) (*refSched, error) {
	text := strings.TrimSpace(expr)
	switch strings.ToLower(text) {
	case "@yearly", "@annually":
		text = "0 0 1 1 *"
	case "@monthly":
		text = "0 0 1 * *"
	case "@weekly":
		text = "0 0 * * 0"
	case "@daily", "@midnight":
		text = "0 0 * * *"
	case "@hourly":
		text = "0 * * * *"
	}
	fields := strings.Fields(text)
	r := &refSched{}
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
		r.seconds = true
	default:
		return nil, errRef
	}
	for i, f := range refFields {
		ft := asciiUpperRef(fields[i])
		hashes := 0
		for _, e := range strings.Split(ft, ",") {
			if err := r.element(i, f, e, name, &hashes); err != nil {
				return nil, err
			}
		}
	}
	r.sets[5][0] = r.sets[5][0] || r.sets[5][7]
	r.domStar = strings.HasPrefix(fields[3], "*")
	r.dowStar = strings.HasPrefix(fields[5], "*")
	return r, nil
}

func asciiUpperRef(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' {
			c -= 32
		}
		b.WriteByte(c)
	}
	return b.String()
}

func (r *refSched) element(i int, f refField, e, name string, hashes *int) error {
	set := &r.sets[i]
	if m := reHash.FindStringSubmatch(e); m != nil {
		if name == "" {
			return errRef
		}
		lo, hi := f.hashLo, f.hashHi
		if m[1] != "" {
			var err1, err2 error
			lo, err1 = refValue(f, m[1])
			hi, err2 = refValue(f, m[2])
			if f.name == "day-of-week" && m[2] == "SUN" && lo > 0 {
				hi = 7
			}
			if err1 != nil || err2 != nil || lo > hi {
				return errRef
			}
		}
		h := refHash(name, f.name, *hashes)
		*hashes++
		if m[3] == "" {
			set[lo+int(h%uint64(hi-lo+1))] = true
			return nil
		}
		s, err := refStep(m[3])
		if err != nil || s > hi-lo+1 {
			return errRef
		}
		for v := lo + int(h%uint64(s)); v <= hi; v += s {
			set[v] = true
		}
		return nil
	}
	if f.name == "day-of-month" {
		if m := reLast.FindStringSubmatch(e); m != nil {
			n := 0
			if m[1] != "" {
				var err error
				if n, err = strconv.Atoi(m[1]); err != nil || len(m[1]) > 6 || n > 30 {
					return errRef
				}
			}
			r.domFns = append(r.domFns, func(t time.Time) bool { return t.Day() == refLastDay(t)-n })
			return nil
		}
		if e == "LW" {
			r.domFns = append(r.domFns, func(t time.Time) bool {
				d := time.Date(t.Year(), t.Month(), refLastDay(t), 0, 0, 0, 0, time.UTC)
				for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
					d = d.AddDate(0, 0, -1)
				}
				return t.Day() == d.Day()
			})
			return nil
		}
		if m := reNearest.FindStringSubmatch(e); m != nil {
			n, err := refValue(f, m[1])
			if err != nil {
				return errRef
			}
			r.domFns = append(r.domFns, func(t time.Time) bool {
				// The Monday-Friday day of the month closest to n.
				if n > refLastDay(t) {
					return false
				}
				best, bestDist := 0, 99
				for d := 1; d <= refLastDay(t); d++ {
					wd := time.Date(t.Year(), t.Month(), d, 0, 0, 0, 0, time.UTC).Weekday()
					dist := max(d-n, n-d)
					if wd != time.Saturday && wd != time.Sunday && dist < bestDist {
						best, bestDist = d, dist
					}
				}
				return t.Day() == best
			})
			return nil
		}
	}
	if f.name == "day-of-week" {
		if m := reLastDow.FindStringSubmatch(e); m != nil {
			n, err := refValue(f, m[1])
			if err != nil {
				return errRef
			}
			r.dowFns = append(r.dowFns, func(t time.Time) bool {
				return int(t.Weekday()) == n%7 && t.AddDate(0, 0, 7).Month() != t.Month()
			})
			return nil
		}
		if m := reNth.FindStringSubmatch(e); m != nil {
			n, err1 := refValue(f, m[1])
			k, err2 := refStep(m[2])
			if err1 != nil || err2 != nil || k > 5 {
				return errRef
			}
			r.dowFns = append(r.dowFns, func(t time.Time) bool {
				if int(t.Weekday()) != n%7 {
					return false
				}
				count := 0 // this weekday's occurrences up to t in its month
				for d := t; d.Month() == t.Month(); d = d.AddDate(0, 0, -7) {
					count++
				}
				return count == k
			})
			return nil
		}
	}
	m := rePlain.FindStringSubmatch(e)
	if m == nil {
		return errRef
	}
	lo, hi, step := f.lo, f.starHi, 1
	if m[4] != "" {
		var err error
		if step, err = refStep(m[4]); err != nil {
			return errRef
		}
	}
	if m[1] == "" {
		var err error
		if lo, err = refValue(f, m[2]); err != nil {
			return errRef
		}
		switch {
		case m[3] != "":
			if hi, err = refValue(f, m[3]); err != nil {
				return errRef
			}
			if f.name == "day-of-week" && m[3] == "SUN" && lo > 0 {
				hi = 7
			}
			if lo > hi {
				return errRef
			}
		case m[4] != "":
			hi = max(f.starHi, lo)
		default:
			hi = lo
		}
	}
	for v := lo; v <= hi; v += step {
		set[v] = true
	}
	return nil
}

// values lists the values of field (0 second .. 5 day-of-week, where 7 is
// folded into 0).
func (r *refSched) values(field int) []int {
	var out []int
	for v, ok := range r.sets[field] {
		if ok && !(field == 5 && v == 7) {
			out = append(out, v)
		}
	}
	return out
}

func (r *refSched) dayMatch(t time.Time) bool {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	if !day.Equal(r.cachedDay) {
		r.cachedDay, r.cachedOK = day, r.dayMatchUncached(day)
	}
	return r.cachedOK
}

func (r *refSched) dayMatchUncached(t time.Time) bool {
	dom, dow := r.sets[3][t.Day()], r.sets[5][t.Weekday()]
	for _, f := range r.domFns {
		dom = dom || f(t)
	}
	for _, f := range r.dowFns {
		dow = dow || f(t)
	}
	if r.domStar || r.dowStar {
		return dom && dow
	}
	return dom || dow
}

func (r *refSched) match(t time.Time) bool {
	return r.sets[0][t.Second()] && r.sets[1][t.Minute()] && r.sets[2][t.Hour()] &&
		r.sets[4][t.Month()] && r.dayMatch(t)
}

// refWall is the wall clock of loc at x as a naive UTC time.
func refWall(x time.Time, loc *time.Location) time.Time {
	l := x.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// refSlots walks the instants of (a, b] in steps of a minute (a second for
// six fields; a and b must be whole steps) and applies doc.go's rule
// literally: an instant fires when the wall clock reaches, for the first
// time, a matching wall time, whether it shows it exactly or skips it in a
// gap. m is the latest wall time shown so far. It stops after limit slots
// if limit > 0.
//
// So that years can be walked, the rest of a wall day that does not match
// is skipped: straight to its last step when the zone's offset is the same
// there (the wall clock then advances with real time), else to two hours
// before its end (no zone used here moves its clock by more than that).
func refSlots(r *refSched, loc *time.Location, a, b time.Time, limit int) []time.Time {
	step := time.Minute
	if r.seconds {
		step = time.Second
	}
	offset := func(x time.Time) int {
		_, off := x.In(loc).Zone()
		return off
	}
	var out []time.Time
	x := a.Add(-90 * time.Minute) // the walk up to a establishes m; overlaps last an hour at most
	m := refWall(x, loc)
	for x.Before(b) && (limit <= 0 || len(out) < limit) {
		x = x.Add(step)
		w := refWall(x, loc)
		if !w.After(m) {
			continue
		}
		from := m.Add(step)
		m = w
		if sameDay(from, w) && !r.dayMatch(w) {
			midnight := time.Date(w.Year(), w.Month(), w.Day()+1, 0, 0, 0, 0, time.UTC)
			skip := midnight.Sub(w) - step
			if offset(x) != offset(x.Add(skip)) {
				skip -= 2 * time.Hour
			}
			if skip > 0 {
				// Land one step early: the loop adds it.
				x = x.Add(skip - step)
				m = refWall(x, loc)
			}
			continue
		}
		if !x.After(a) {
			continue
		}
		for v := from; !v.After(w); v = v.Add(step) {
			if r.match(v) {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

func sameDay(a, b time.Time) bool {
	return a.Year() == b.Year() && a.YearDay() == b.YearDay()
}
