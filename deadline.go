package onetick

import "time"

// Deadline is a job's promise about each of its scheduled slots, relative
// to the slot's time: a worker must have started it within Start and it
// must have succeeded within Finish (zero: no such deadline). Manual ticks
// (triggers, backfills) have no deadline; a paused slot is not late.
type Deadline struct {
	Start  time.Duration
	Finish time.Duration
}

// Set reports whether d holds any deadline.
func (d Deadline) Set() bool { return d.Start > 0 || d.Finish > 0 }

// Verdict is how one slot stands against its job's deadline at a moment.
type Verdict struct {
	// StartMissed: no attempt began within Start of the slot.
	StartMissed bool `json:"start_missed,omitempty"`
	// FinishMissed: no attempt succeeded within Finish of the slot.
	FinishMissed bool `json:"finish_missed,omitempty"`
	// Pending: a deadline of the slot has not passed yet and is not met.
	Pending bool `json:"pending,omitempty"`
}

// Missed reports whether v misses a deadline.
func (v Verdict) Missed() bool { return v.StartMissed || v.FinishMissed }

// Judge is how slot stands against d at now, given its ledger record
// (has false: the store keeps no record of the slot, such as a slot no
// leader fired, or one inside a skipped range). Judged only by events at
// or before each deadline, so a verdict never changes once the deadline
// has passed: a slot started late stays StartMissed.
func (d Deadline) Judge(slot Slot, r Run, has bool, now time.Time) Verdict {
	var v Verdict
	if has && (r.Fate == FatePaused || r.Kind != "") {
		return v
	}
	judge := func(limit time.Duration, what string) (missed bool) {
		if limit <= 0 {
			return false
		}
		due := slot.Time().Add(limit)
		if has && r.Fate != FateSkipped {
			for _, ev := range r.Events {
				if ev.What == what && !ev.At.After(due) {
					return false
				}
			}
		}
		if now.Before(due) {
			v.Pending = true
			return false
		}
		return true
	}
	v.StartMissed = judge(d.Start, EventStarted)
	v.FinishMissed = judge(d.Finish, EventSucceeded)
	return v
}
