package onetick

import (
	"reflect"
	"time"
)

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

// slotMemo remembers the last result of each slot computation of the
// firing loop, for the next job with the same schedule: jobs written alike
// share one schedule value (package config shares them), and a burst of a
// million of them asks the same questions a million times. Only schedules
// held by pointer are remembered (comparing them is cheap and cannot
// panic); the zero value is ready to use.
type slotMemo struct {
	nextSch   Schedule
	nextAfter Slot
	nextSlot  Slot

	retSch Schedule
	retNow Slot
	ret    time.Duration

	planSch Schedule
	planKey [3]Slot // cursor, lo, now
	planMax int
	planned plannedSlots
}

// plannedSlots is what plan computes from a job's schedule and cursor.
type plannedSlots struct {
	slots       []Slot // to fire, oldest first (shared: read only)
	skipped     int64  // slots after the cursor and before slots[0] (or now)
	lastSkipped Slot   // the newest of them
}

func memoizable(s Schedule) bool {
	return s != nil && reflect.TypeOf(s).Kind() == reflect.Pointer
}

func (m *slotMemo) next(s Schedule, after Slot) Slot {
	if memoizable(s) && m.nextSch == s && m.nextAfter == after {
		return m.nextSlot
	}
	n := nextSlot(s, after)
	if memoizable(s) {
		m.nextSch, m.nextAfter, m.nextSlot = s, after, n
	}
	return n
}

func (m *slotMemo) retention(s Schedule, now Slot) time.Duration {
	if memoizable(s) && m.retSch == s && m.retNow == now {
		return m.ret
	}
	r := retentionFor(s, now)
	if memoizable(s) {
		m.retSch, m.retNow, m.ret = s, now, r
	}
	return r
}

// plan returns the newest m slots in (lo, now] and the slots skipped
// between cursor c and them.
func (m *slotMemo) plan(s Schedule, c, lo, now Slot, max int) plannedSlots {
	key := [3]Slot{c, lo, now}
	if memoizable(s) && m.planSch == s && m.planKey == key && m.planMax == max {
		return m.planned
	}
	var p plannedSlots
	p.slots = lastSlots(s, lo, now, max)
	end := now
	if len(p.slots) > 0 {
		end = p.slots[0] - 1
	}
	if p.skipped = countSlots(s, c, end, maxCount); p.skipped > 0 {
		p.lastSkipped = prevSlotBefore(s, c, end+1)
	}
	if memoizable(s) {
		m.planSch, m.planKey, m.planMax, m.planned = s, key, max, p
	}
	return p
}
