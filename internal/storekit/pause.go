package storekit

import (
	"time"

	"github.com/onetick/onetick"
)

// MaxIntervals bounds the pause intervals kept per job; a claim drops
// those the job's last-fired slot has passed (DropPassed), so more only
// pile up for a job paused and resumed often while no leader claims its
// slots. A pause beyond it forgets the oldest.
const MaxIntervals = 16

// The control log's actions for pauses, and its details of a pause or
// resume that changed nothing.
const (
	ActionPause   = "pause"
	ActionResume  = "resume"
	AlreadyPaused = "already paused"
	WasNotPaused  = "was not paused"
)

// Open reports whether the last of a job's intervals is open: the job
// is paused.
func Open(iv []onetick.PauseInterval) bool { return len(iv) > 0 && iv[len(iv)-1].Until.IsZero() }

// Pause pauses a job whose control state is prev at the store's time now
// on behalf of a, and returns its next state and the control log's
// detail: AlreadyPaused (nothing changes but who and when) or "". A new
// interval opens at now, the oldest beyond MaxIntervals dropped. prev is
// not modified.
func Pause(prev onetick.JobControl, now time.Time, a onetick.Actor) (onetick.JobControl, string) {
	next := prev
	detail := ""
	if Open(prev.Intervals) {
		detail = AlreadyPaused
	} else {
		iv := append(append([]onetick.PauseInterval(nil), prev.Intervals...), onetick.PauseInterval{Since: now.UTC()})
		next.Intervals = iv[max(len(iv)-MaxIntervals, 0):]
	}
	next.Paused, next.Actor, next.At, next.Changed = true, a, now.UTC(), detail == ""
	return next, detail
}

// Resume ends the pause of a job whose control state is prev at the
// store's time now (never before the interval began) on behalf of a, and
// returns its next state and the control log's detail: WasNotPaused
// (prev unchanged, Changed false) or "". prev is not modified.
func Resume(prev onetick.JobControl, now time.Time, a onetick.Actor) (onetick.JobControl, string) {
	if !Open(prev.Intervals) {
		prev.Changed = false
		return prev, WasNotPaused
	}
	iv := append([]onetick.PauseInterval(nil), prev.Intervals...)
	last := &iv[len(iv)-1]
	last.Until = ResumeAt(*last, now)
	return onetick.JobControl{Paused: false, Actor: a, At: now.UTC(), Intervals: iv, Changed: true}, ""
}

// ResumeAt is the end a resume at now gives open interval p: now, or its
// start when the store's clock went back.
func ResumeAt(p onetick.PauseInterval, now time.Time) time.Time {
	if now.Before(p.Since) {
		return p.Since
	}
	return now.UTC()
}

// Passed reports whether no in-order slot after a job's last-fired slot
// last can fall in interval p: it ended at or before last + 1.
func Passed(p onetick.PauseInterval, last onetick.Slot) bool {
	return !p.Until.IsZero() && last >= onetick.SlotOf(p.Until)-1
}

// DropPassed returns the intervals a claim keeps once the job's
// last-fired slot is last: those not Passed, in order. It returns iv
// itself when it keeps them all.
func DropPassed(iv []onetick.PauseInterval, last onetick.Slot) []onetick.PauseInterval {
	n := 0
	for _, p := range iv {
		if !Passed(p, last) {
			n++
		}
	}
	if n == len(iv) {
		return iv
	}
	kept := make([]onetick.PauseInterval, 0, n)
	for _, p := range iv {
		if !Passed(p, last) {
			kept = append(kept, p)
		}
	}
	return kept
}
