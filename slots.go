package onetick

import "time"

// noSlot marks "no further slot".
const noSlot Slot = -1

// maxCount caps slot counting for metrics and logs: a gap of more than a
// million slots is reported as "at least" that many.
const maxCount = 1_000_000

func nextSlot(s Schedule, after Slot) Slot {
	t := s.Next(after.Time())
	if t.IsZero() {
		return noSlot
	}
	return SlotOf(t)
}

// countSlots counts slots in (a, b], at most limit.
func countSlots(s Schedule, a, b Slot, limit int64) int64 {
	if b <= a {
		return 0
	}
	if c, ok := s.(counter); ok {
		return c.Count(a.Time(), b.Time(), limit)
	}
	var n int64
	for x := nextSlot(s, a); x != noSlot && x <= b && n < limit; x = nextSlot(s, x) {
		n++
	}
	return n
}

// lastSlots returns the newest m slots in (a, b], oldest first, without
// walking the whole interval when it is long.
func lastSlots(s Schedule, a, b Slot, m int) []Slot {
	if b <= a || m <= 0 {
		return nil
	}
	// Widen a window ending at b until it holds m slots or reaches a.
	lo := a
	for w := Slot(time.Second.Milliseconds()); ; w *= 2 {
		if b-w <= a {
			break
		}
		if countSlots(s, b-w, b, int64(m)) >= int64(m) {
			lo = b - w
			break
		}
	}
	var out []Slot
	for x := nextSlot(s, lo); x != noSlot && x <= b; x = nextSlot(s, x) {
		out = append(out, x)
	}
	if len(out) > m {
		out = out[len(out)-m:]
	}
	return out
}

// prevSlotBefore returns the newest slot in (a, b), or a when there is
// none.
func prevSlotBefore(s Schedule, a, b Slot) Slot {
	got := lastSlots(s, a, b-1, 1)
	if len(got) == 0 {
		return a
	}
	return got[0]
}
