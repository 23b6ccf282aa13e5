package worker

import "github.com/onetick/onetick"

// The overlap rule, written once: a job's preference is the promise, its
// overlap policy follows it. policyOf turns the two into what Begin is
// asked; DecideOverlap is what every store decides with it, in Begin's
// atomic step. The Redis store applies the same table in Lua, and the
// conformance suite holds every store to it.

// policyOf returns the overlap policy, waiter places and ordering Begin is
// asked for a job:
//
//	prefer \ overlap  skip                       queue                      allow
//	missed            skip (a missed slot)       1 waits, others skipped    runs overlap
//	duplicate         wait, in slot order,       the same as skip           runs overlap
//	                  up to maxWaiting
func policyOf(p onetick.Prefer, o Overlap, maxWaiting int) (Overlap, int, bool) {
	switch {
	case o == OverlapAllow:
		return OverlapAllow, 0, false
	case p == onetick.PreferDuplicate:
		return OverlapQueue, maxWaiting, true
	case o == OverlapQueue:
		return OverlapQueue, 1, false
	}
	return OverlapSkip, 0, false
}

// OverlapState is what a store knows about a job's run marker and waiter
// places when it admits one start, read in the same atomic step.
type OverlapState struct {
	// MarkerFree: the job has no run marker, or the marker names this
	// start's entry, or it expired (its hold passed without a heartbeat),
	// or the entry it names is no longer pending or is owned by no live
	// consumer (a dead worker's marker is taken over at once; its entry
	// is taken over by Reclaim).
	MarkerFree bool
	// HasPlace: this start's entry holds a waiter place of the job.
	HasPlace bool
	// Waiting counts the waiter places of the job held by other entries.
	Waiting int
	// LowerWaiting: another entry holds a waiter place of the job with a
	// lower slot (same slot: a lower entry id). Read for ordered starts.
	LowerWaiting bool
}

// DecideOverlap is Begin's overlap decision for a start whose entry is
// owned by the caller, has no done record and is within its delivery
// limit: Run, Wait or SkipOverlap.
//
// A start runs when the marker is free, and, when it is ordered, no tick
// of the job with a lower slot waits and lowerPending reports none pending
// without a waiter place (delivered to some consumer that has not begun
// it yet, or taken over from a dead one). Otherwise, with OverlapQueue it
// waits if it holds a waiter place already or fewer than MaxWaiting (at
// least 1) are held; else it is skipped. lowerPending is called only for
// an ordered start that could otherwise run; it reports whether another
// entry of the job with a lower entry id and a slot no higher is pending
// in the group without a waiter place.
func DecideOverlap(st Start, s OverlapState, lowerPending func() (bool, error)) (Admission, error) {
	if st.Overlap == OverlapAllow {
		return Run, nil
	}
	if s.MarkerFree && !(st.Ordered && s.LowerWaiting) {
		if !st.Ordered {
			return Run, nil
		}
		lower, err := lowerPending()
		if err != nil {
			return 0, err
		}
		if !lower {
			return Run, nil
		}
	}
	if st.Overlap == OverlapQueue && (s.HasPlace || s.Waiting < max(st.MaxWaiting, 1)) {
		return Wait, nil
	}
	return SkipOverlap, nil
}
