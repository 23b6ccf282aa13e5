package cron

import (
	"math"
	"time"
)

// zoneWindow bounds how far (in seconds) wall-clock time may differ from UTC,
// and so how far around an instant zone periods are inspected. Real zones
// stay within ±16h; 48h leaves ample margin.
const zoneWindow = 48 * 3600

// zoneAt returns the UTC offset (seconds) in effect at instant x and the
// bounds [start, end) of the zone period containing x, with math.MinInt64 /
// math.MaxInt64 standing for unbounded ends.
func (s *Schedule) zoneAt(x int64) (off, start, end int64) {
	t := time.Unix(x, 0).In(s.loc)
	_, o := t.Zone()
	st, en := t.ZoneBounds()
	start, end = math.MinInt64, math.MaxInt64
	if !st.IsZero() {
		start = st.Unix()
	}
	if !en.IsZero() {
		end = en.Unix()
	}
	if start > x || end <= x { // defensive: never trust bounds that exclude x
		start, end = x, x+1
	}
	return int64(o), start, end
}

// image returns min{x : F(x) >= w}: the first instant at which the wall clock
// of the schedule's zone shows the naive wall time w or later. It is the
// normal instant for an unambiguous wall time, the first instant after the gap
// for a wall time skipped by a spring-forward transition, and the first
// occurrence for a wall time repeated by a fall-back transition. It does not
// use time.Date, whose choice of offset inside a gap is unspecified.
func (s *Schedule) image(w int64) int64 {
	x := w - zoneWindow
	for i := 0; i < 64; i++ {
		off, start, end := s.zoneAt(x)
		// Within a period F(y) = y + off is increasing.
		c := max(w-off, start, x)
		if c < end {
			return c
		}
		x = end
	}
	off, _, _ := s.zoneAt(w)
	return w - off
}

// maxWall returns max{F(y) : y <= t}: the latest wall time (naive seconds)
// the zone's clock has shown up to and including instant t. It differs from
// F(t) only during the second pass of a fall-back overlap.
func (s *Schedule) maxWall(t int64) int64 {
	x := t - zoneWindow
	m := int64(math.MinInt64)
	for i := 0; i < 64; i++ {
		off, _, end := s.zoneAt(x)
		if end > t {
			return max(m, t+off)
		}
		m = max(m, end-1+off)
		x = end
	}
	off, _, _ := s.zoneAt(t)
	return max(m, t+off)
}
