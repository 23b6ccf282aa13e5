package cron

import (
	"iter"
	"math/bits"
	"time"
)

// Schedule is a parsed expression. It is immutable after Parse and safe for
// concurrent use.
type Schedule struct {
	expr string
	loc  *time.Location

	// @every schedules: everyMs > 0.
	everyMs  int64
	offsetMs int64

	// Cron schedules: one bit per allowed value.
	second, minute, hour, dom, month, dow uint64
	domStar, dowStar                      bool
	// days holds the L, W and # forms; nil when there are none, which keeps
	// plain expressions on the bit-set path.
	days *monthDays
}

// Supported instant range, in Unix seconds (about ±317,000 years). Next and
// friends return nothing outside it, which keeps all arithmetic overflow-free.
const (
	minUnix = -1e13
	maxUnix = 1e13
)

const secondsPerDay = 86400

// String returns the original expression.
func (s *Schedule) String() string { return s.expr }

// Location returns the schedule's time zone (UTC if Parse got nil).
func (s *Schedule) Location() *time.Location { return s.loc }

// Interval returns the fixed period for @every schedules and 0 for cron
// expressions.
func (s *Schedule) Interval() time.Duration {
	return time.Duration(s.everyMs) * time.Millisecond
}

// Next returns the first fire instant strictly after t, in UTC, truncated to
// millisecond precision. It returns the zero time.Time if there is none within
// 5 years after t (or t lies outside the supported range of about ±317,000
// years).
func (s *Schedule) Next(t time.Time) time.Time {
	sec := t.Unix()
	if sec < minUnix || sec > maxUnix {
		return time.Time{}
	}
	limit := sec + fiveYears(sec)
	if s.everyMs > 0 {
		n := s.nextEvery(t.UnixMilli())
		if n > limit*1000+999 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	n, ok := s.nextCron(sec, limit)
	if !ok {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// Slots yields every fire instant in the half-open interval (a, b], ascending,
// in UTC with millisecond precision.
func (s *Schedule) Slots(a, b time.Time) iter.Seq[time.Time] {
	return func(yield func(time.Time) bool) {
		as, bs := a.Unix(), b.Unix()
		if !b.After(a) || bs < minUnix || as > maxUnix {
			return
		}
		as, bs = max(as, minUnix), min(bs, maxUnix)
		if s.everyMs > 0 {
			am, bm := a.UnixMilli(), b.UnixMilli()
			if a.Unix() < minUnix {
				am = minUnix * 1000
			}
			if b.Unix() > maxUnix {
				bm = maxUnix * 1000
			}
			for n := s.nextEvery(am); n <= bm; n += s.everyMs {
				if !yield(time.UnixMilli(n).UTC()) {
					return
				}
			}
			return
		}
		for cur := as; ; {
			n, ok := s.nextCron(cur, bs)
			if !ok {
				return
			}
			if !yield(time.Unix(n, 0).UTC()) {
				return
			}
			cur = n
		}
	}
}

// Count returns how many fire instants lie in (a, b], but stops counting at
// max and returns max then. A max ≤ 0 yields 0. For @every schedules Count is
// O(1) arithmetic; for cron expressions it iterates.
func (s *Schedule) Count(a, b time.Time, max int64) int64 {
	if max <= 0 || !b.After(a) {
		return 0
	}
	if s.everyMs > 0 {
		as, bs := a.Unix(), b.Unix()
		if bs < minUnix || as > maxUnix {
			return 0
		}
		am, bm := a.UnixMilli(), b.UnixMilli()
		if as < minUnix {
			am = minUnix * 1000
		}
		if bs > maxUnix {
			bm = maxUnix * 1000
		}
		n := floorDiv(bm-s.offsetMs, s.everyMs) - floorDiv(am-s.offsetMs, s.everyMs)
		return min(n, max)
	}
	var n int64
	for range s.Slots(a, b) {
		n++
		if n >= max {
			break
		}
	}
	return n
}

// nextEvery returns the first @every slot strictly after the millisecond
// instant ms: slot = t - ((t - offset) mod d) + d.
func (s *Schedule) nextEvery(ms int64) int64 {
	return ms - floorMod(ms-s.offsetMs, s.everyMs) + s.everyMs
}

// fiveYears returns the number of seconds from the instant sec to the same
// UTC calendar date 5 years later.
func fiveYears(sec int64) int64 {
	t := time.Unix(sec, 0).UTC()
	return t.AddDate(5, 0, 0).Unix() - sec
}

// nextCron returns the first fire instant (Unix seconds) strictly after the
// instant t and not after limit.
//
// Model: let F(x) be the wall clock (as naive seconds) shown at instant x.
// A matching wall time w fires at image(w) = min{x : F(x) >= w}, the first
// instant at which the wall clock shows w or later. That is exactly one
// instant per wall time: the normal instant, the end of a spring-forward gap,
// or the first occurrence in a fall-back overlap. image is non-decreasing in
// w, so the first fire after t is image of the first matching wall time
// greater than M(t) = max{F(x) : x <= t}, the latest wall time shown so far.
func (s *Schedule) nextCron(t, limit int64) (int64, bool) {
	if t >= limit {
		return 0, false
	}
	w, ok := s.nextWall(s.maxWall(t)+1, limit+2*zoneWindow)
	if !ok {
		return 0, false
	}
	x := s.image(w)
	if x > limit {
		return 0, false
	}
	return x, true
}

// nextWall returns the first matching naive wall time >= w and <= wlimit.
func (s *Schedule) nextWall(w, wlimit int64) (int64, bool) {
	days := floorDiv(w, secondsPerDay)
	y, mo, d := civilFromDays(days)
	rem := int(w - days*secondsPerDay)
	h, mi, sec := rem/3600, rem/60%60, rem%60

	for iter := 0; iter < 100000; iter++ {
		// Normalise carries.
		if sec > 59 {
			sec = 0
			mi++
		}
		if mi > 59 {
			mi = 0
			h++
		}
		if h > 23 {
			h = 0
			d++
		}
		if d > daysIn(y, mo) {
			d = 1
			mo++
		}
		if mo > 12 {
			mo = 1
			y++
		}
		if daysFromCivil(y, mo, 1)*secondsPerDay > wlimit {
			return 0, false
		}

		if nm, ok := nextBit(s.month, mo); !ok {
			y, mo, d, h, mi, sec = y+1, 1, 1, 0, 0, 0
			continue
		} else if nm != mo {
			mo, d, h, mi, sec = nm, 1, 0, 0, 0
		}
		if !s.dayMatches(y, mo, d) {
			d, h, mi, sec = d+1, 0, 0, 0
			continue
		}
		if nh, ok := nextBit(s.hour, h); !ok {
			d, h, mi, sec = d+1, 0, 0, 0
			continue
		} else if nh != h {
			h, mi, sec = nh, 0, 0
		}
		if nmi, ok := nextBit(s.minute, mi); !ok {
			h, mi, sec = h+1, 0, 0
			continue
		} else if nmi != mi {
			mi, sec = nmi, 0
		}
		if ns, ok := nextBit(s.second, sec); !ok {
			mi, sec = mi+1, 0
			continue
		} else {
			sec = ns
		}
		r := daysFromCivil(y, mo, d)*secondsPerDay + int64(h*3600+mi*60+sec)
		if r > wlimit {
			return 0, false
		}
		return r, true
	}
	return 0, false
}

// dayMatches applies the Vixie cron day rule: if either day field starts with
// '*', a day must satisfy both fields (so the '*' one does not restrict);
// otherwise it must satisfy at least one of them. A field matches a day when
// its bit set or one of its month-dependent forms (s.days) does.
func (s *Schedule) dayMatches(y, mo, d int) bool {
	wd := weekday(daysFromCivil(y, mo, d))
	domOK := s.dom&(1<<uint(d)) != 0
	dowOK := s.dow&(1<<uint(wd)) != 0
	if s.days != nil {
		last := daysIn(y, mo)
		domOK = domOK || s.days.dom(d, wd, last)
		dowOK = dowOK || s.days.dow(d, wd, last)
	}
	if s.domStar || s.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// nextBit returns the smallest set bit of set that is >= from.
func nextBit(set uint64, from int) (int, bool) {
	m := set >> uint(from) << uint(from)
	if m == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(m), true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	return a - floorDiv(a, b)*b
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	yy := int64(y)
	if m <= 2 {
		yy--
	}
	era := floorDiv(yy, 400)
	yoe := yy - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	yy := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		yy++
	}
	return int(yy), m, d
}

// weekday returns 0 (Sunday) .. 6 for days since 1970-01-01 (a Thursday).
func weekday(days int64) int {
	return int(floorMod(days+4, 7))
}

func isLeap(y int) bool {
	return y%4 == 0 && (y%100 != 0 || y%400 == 0)
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
