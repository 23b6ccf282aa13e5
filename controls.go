package onetick

import (
	"context"
	"time"
)

// Operators act on jobs through controls kept in the store, so that every
// replica and every future leader sees them, and a control made during a
// leader change is not lost: the store itself refuses to enqueue a paused
// job's slots, in the same atomic step as every other check of a claim.

// Actor says who made a control and why; both are recorded.
type Actor struct {
	Who    string `json:"who"`
	Reason string `json:"reason,omitempty"`
}

// PauseInterval is a span of store time during which a job's slots are
// paused: slots at or after Since and before Until (zero while the job is
// still paused) are recorded as paused instead of being enqueued.
type PauseInterval struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until,omitzero"`
}

// Contains reports whether slot s falls in the interval.
func (p PauseInterval) Contains(s Slot) bool {
	return s >= SlotOf(p.Since) && (p.Until.IsZero() || s < SlotOf(p.Until))
}

// JobControl is the control state of one job.
type JobControl struct {
	// Paused is true from a pause until the resume.
	Paused bool `json:"paused"`
	// Actor and At describe the latest pause or resume.
	Actor Actor     `json:"actor"`
	At    time.Time `json:"at"`
	// Intervals are the pause intervals whose slots may still come up for
	// a claim (older than the job's last-fired slot: dropped), oldest
	// first; the last one is open while Paused.
	Intervals []PauseInterval `json:"intervals,omitempty"`
	// Changed, in the answer to Pause or Resume, is false when the job
	// was already paused (resp. not paused): nothing changed.
	Changed bool `json:"changed"`
}

// PausedAt reports whether slot s of the job is paused.
func (c JobControl) PausedAt(s Slot) bool {
	for _, p := range c.Intervals {
		if p.Contains(s) {
			return true
		}
	}
	return false
}

// ControlRecord is one entry of the store's control log.
type ControlRecord struct {
	Action string    `json:"action"` // pause, resume, trigger, backfill
	Job    string    `json:"job"`
	Who    string    `json:"who"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	// Detail: for a trigger its tick id and whether it was enqueued, for
	// a backfill its range and counts.
	Detail string `json:"detail,omitempty"`
}

// ControlReader reads the controls: what a leading Scheduler calls to
// learn which jobs are paused.
type ControlReader interface {
	// Controls returns the control state of every job that has one, and
	// the controls' version: it increases with every pause and resume, so
	// a leader can tell that it must read the controls again.
	Controls(ctx context.Context) (map[string]JobControl, int64, error)
	// ControlsVersion returns the controls' version alone (cheap).
	ControlsVersion(ctx context.Context) (int64, error)
}

// Controller is the operator half of a backend.
type Controller interface {
	ControlReader
	// Pause pauses job from the store's now on: every claim of one of its
	// slots at or after that instant is answered Paused until Resume, and
	// records the slot as accounted for (it is never caught up). Pausing
	// a paused job changes nothing but the record of who and why.
	Pause(ctx context.Context, job string, a Actor) (JobControl, error)
	// Resume ends job's pause at the store's now; its next slot fires.
	// Resuming a job that is not paused changes nothing.
	Resume(ctx context.Context, job string, a Actor) (JobControl, error)
	// Enqueue appends manual ticks outside the election: triggers (Tick.Key
	// set, identity "job:trigger:key", the slot is the store's now) and
	// backfills (scheduled slots, identity "job:slot"). It is not fenced
	// and never moves a last-fired slot: each tick is deduplicated by its
	// record alone, which lives for Tick.Retention, so a retried request
	// enqueues nothing twice. Outcomes as for Claim (Early for a backfilled
	// slot ahead of the store's clock). Every call is logged as one
	// ControlRecord.
	Enqueue(ctx context.Context, ticks []Tick, a Actor) (ClaimResult, error)
	// ControlLog returns up to n control records, newest first.
	ControlLog(ctx context.Context, n int) ([]ControlRecord, error)
}
