package web

import (
	"fmt"
	"strings"
	"time"

	"github.com/onetick/onetick"
)

// SlotState is what became of one scheduled slot, as the job page's strip
// shows it. It is derived from the slot's ledger record (or its absence),
// the job's position and its deadline.
type SlotState string

// The states of a slot, worst first: a cell standing for several slots
// shows the worst of them.
const (
	// SlotFailed: an attempt failed (the tick is dead, or waits for a retry).
	SlotFailed SlotState = "failed"
	// SlotMissed: never run: skipped (older than grace, beyond
	// max_catchup, overlap), or due and not fired (a gap).
	SlotMissed SlotState = "missed"
	// SlotLate: fired, but it missed the job's deadline (onetick.Deadline.Judge).
	SlotLate SlotState = "late"
	// SlotRunning: a worker runs it now.
	SlotRunning SlotState = "running"
	// SlotPaused: the job was paused at the slot.
	SlotPaused SlotState = "paused"
	// SlotFired: enqueued or succeeded, within its deadline.
	SlotFired SlotState = "fired"
	// SlotDue: due, and the leader has not fired it yet (within
	// onetick.GapTolerance).
	SlotDue SlotState = "due"
	// SlotNone: no ledger record, and not in the job's gap: fired before
	// the store kept a ledger, or trimmed by its retention.
	SlotNone SlotState = "none"
)

// SlotStates lists the states worst first (the legend's order).
var SlotStates = []SlotState{SlotFailed, SlotMissed, SlotLate, SlotRunning, SlotPaused, SlotFired, SlotDue, SlotNone}

func (s SlotState) rank() int {
	for i, x := range SlotStates {
		if x == s {
			return i
		}
	}
	return len(SlotStates)
}

// Strip bounds.
const (
	// StripWindow is how far back the strip reaches.
	StripWindow = 24 * time.Hour
	// stripCells: a window of more slots than this is shown in stripCells
	// buckets of equal time; fewer slots get a cell each.
	stripCells = 96
	// maxSlotCells: up to this many slots get a cell each.
	maxSlotCells = 144
	// maxStripSlots bounds the slots the strip walks; a schedule with more
	// in the window is shown over a shorter window (Strip.Partial).
	maxStripSlots = 100_000
)

// Strip is the slots of a job over a window, as cells.
type Strip struct {
	// From and To bound the window: slots in (From, To].
	From, To time.Time
	// Cells are oldest first.
	Cells []Cell
	// Slots counts the slots in the window; Counts them by state.
	Slots  int
	Counts map[SlotState]int
	// Partial is set when the schedule has so many slots that the strip
	// covers less than StripWindow.
	Partial bool
}

// Cell is one slot, or the slots of a stretch of time.
type Cell struct {
	// From and To: the slot's time (equal), or the bucket's bounds.
	From, To time.Time
	// State is the worst state of its slots; SlotNone for an empty bucket.
	State SlotState
	// Slots counts its slots; Counts them by state.
	Slots  int
	Counts map[SlotState]int
	// Tick is the tick of a cell's single slot, when it has a record.
	Tick string
	// Detail is the record's fate and reason, for a single slot.
	Detail string
}

// Title describes the cell in a line (its tooltip).
func (c Cell) Title() string {
	var b strings.Builder
	if c.From.Equal(c.To) {
		b.WriteString(c.From.UTC().Format("2006-01-02 15:04:05 UTC"))
		b.WriteString(": ")
		b.WriteString(string(c.State))
		if c.Detail != "" && c.Detail != string(c.State) {
			b.WriteString(" (" + c.Detail + ")")
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%s–%s UTC: ", c.From.UTC().Format("15:04"), c.To.UTC().Format("15:04"))
	if c.Slots == 0 {
		b.WriteString("no slot")
		return b.String()
	}
	var parts []string
	for _, s := range SlotStates {
		if n := c.Counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	b.WriteString(strings.Join(parts, ", "))
	return b.String()
}

// Legend is the states present in the strip, worst first, with their counts.
func (s Strip) Legend() []LegendItem {
	var out []LegendItem
	for _, st := range SlotStates {
		if n := s.Counts[st]; n > 0 {
			out = append(out, LegendItem{State: st, Count: n})
		}
	}
	return out
}

// Late counts the slots that missed the deadline.
func (s Strip) Late() int { return s.Counts[SlotLate] }

// LegendItem is one state of the legend.
type LegendItem struct {
	State SlotState
	Count int
}

// StripInput is what BuildStrip derives a strip from.
type StripInput struct {
	Schedule onetick.Schedule
	// Status is the job's position (its last fired slot and its gap).
	Status onetick.JobStatus
	// Runs are the job's ledger records that may speak of the window, in
	// any order (triggers are ignored: they are no slot).
	Runs []onetick.Run
	// Deadline is the job's deadline (zero: none).
	Deadline onetick.Deadline
	// Now is the store's clock; the window ends at it.
	Now time.Time
	// Window is how far back (default StripWindow).
	Window time.Duration
}

// BuildStrip derives the strip of the slots in (Now-Window, Now]: each
// slot's state from its record (its own, a backfill of it, or a skipped
// range around it), judged against the deadline at Now; a slot without a
// record is paused when the job is paused since before it, missed when it
// is after the job's last fired slot by more than onetick.GapTolerance (the
// gap `onetick status` reports), due when it is after it by less, and none
// otherwise (no record: before the job first fired, before the store kept
// a ledger, or trimmed by the ledger's retention).
func BuildStrip(in StripInput) Strip {
	window := in.Window
	if window <= 0 {
		window = StripWindow
	}
	to := in.Now
	st := Strip{From: to.Add(-window), To: to, Counts: map[SlotState]int{}}
	if in.Schedule == nil || to.IsZero() {
		return st
	}
	var slots []onetick.Slot
	for {
		slots = slotsIn(in.Schedule, st.From, to)
		if len(slots) <= maxStripSlots || window < time.Second {
			break
		}
		window /= 2
		st.From, st.Partial = to.Add(-window), true
	}
	if len(slots) > maxStripSlots {
		slots = slots[len(slots)-maxStripSlots:]
	}
	own := map[onetick.Slot]onetick.Run{}
	var ranges []onetick.Run
	for _, r := range in.Runs {
		switch {
		case r.Kind == onetick.KindTrigger:
		case r.Count > 0:
			ranges = append(ranges, r)
		default:
			// A scheduled slot's record, or a backfill of it (same identity).
			if old, ok := own[r.Slot]; !ok || old.Kind != "" {
				own[r.Slot] = r
			}
		}
	}
	states := make([]SlotState, len(slots))
	details := make([]string, len(slots))
	ticks := make([]string, len(slots))
	for i, s := range slots {
		r, has := own[s]
		if !has {
			for _, rg := range ranges {
				if rg.Slot <= s && s <= rg.Through {
					r, has = rg, true
					break
				}
			}
		}
		states[i] = slotState(s, r, has, in)
		if has {
			details[i], ticks[i] = string(r.Fate), r.Tick
			if r.Reason != "" {
				details[i] += ": " + onetick.Excerpt(r.Reason)
			}
		}
		st.Counts[states[i]]++
	}
	st.Slots = len(slots)
	if len(slots) <= maxSlotCells {
		for i, s := range slots {
			t := s.Time()
			st.Cells = append(st.Cells, Cell{From: t, To: t, State: states[i], Slots: 1,
				Counts: map[SlotState]int{states[i]: 1}, Tick: ticks[i], Detail: details[i]})
		}
		return st
	}
	step := (to.Sub(st.From) + stripCells - 1) / stripCells
	st.Cells = make([]Cell, stripCells)
	for i := range st.Cells {
		st.Cells[i] = Cell{From: st.From.Add(time.Duration(i) * step), To: st.From.Add(time.Duration(i+1) * step),
			State: SlotNone, Counts: map[SlotState]int{}}
	}
	for i, s := range slots {
		k := min(int(s.Time().Sub(st.From)/step), stripCells-1)
		c := &st.Cells[k]
		if c.Slots == 0 || states[i].rank() < c.State.rank() {
			c.State = states[i]
		}
		c.Slots++
		c.Counts[states[i]]++
	}
	return st
}

// slotState is one slot's state (see BuildStrip).
func slotState(s onetick.Slot, r onetick.Run, has bool, in StripInput) SlotState {
	if !has {
		js := in.Status
		switch {
		case js.Paused != nil && !s.Time().Before(js.Paused.Since):
			return SlotPaused
		case js.LastFired == nil || s <= *js.LastFired:
			// Before the job's first fired slot, or fired before the
			// store kept a ledger (or trimmed by its retention).
			return SlotNone
		case in.Now.Sub(s.Time()) > onetick.GapTolerance:
			return SlotMissed // in the job's gap: due and not fired
		}
		return SlotDue
	}
	switch r.Fate {
	case onetick.FateSkipped:
		return SlotMissed
	case onetick.FatePaused:
		return SlotPaused
	case onetick.FateDead, onetick.FateRetrying:
		return SlotFailed
	}
	late := in.Deadline.Set() && in.Deadline.Judge(s, r, true, in.Now).Missed()
	switch {
	case late:
		return SlotLate
	case r.Fate == onetick.FateRunning:
		return SlotRunning
	}
	return SlotFired
}

// slotsIn lists the schedule's slots in (from, to], at most
// maxStripSlots+1 of them.
func slotsIn(s onetick.Schedule, from, to time.Time) []onetick.Slot {
	var out []onetick.Slot
	for t := s.Next(from); !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, onetick.SlotOf(t))
		if len(out) > maxStripSlots {
			break
		}
	}
	return out
}
