package storekit_test

import (
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// apply runs action on c at now.
func apply(c onetick.JobControl, action string, now time.Time, a onetick.Actor) (onetick.JobControl, string) {
	if action == storekit.ActionPause {
		return storekit.Pause(c, now, a)
	}
	return storekit.Resume(c, now, a)
}

func TestPauseCases(t *testing.T) {
	alice := onetick.Actor{Who: "alice", Reason: "why"}
	for _, pc := range storekit.PauseCases() {
		t.Run(pc.Name, func(t *testing.T) {
			now := time.UnixMilli(1_000_000)
			var c onetick.JobControl
			for _, a := range pc.Before {
				c, _ = apply(c, a, now, onetick.Actor{Who: "bob"})
				now = now.Add(time.Second)
			}
			prev := append([]onetick.PauseInterval(nil), c.Intervals...)
			next, detail := apply(c, pc.Action, now, alice)
			if detail != pc.Detail || next.Changed != pc.Changed || next.Paused != pc.Paused || len(next.Intervals) != pc.Intervals {
				t.Fatalf("detail %q, changed %v, paused %v, %d intervals; want %q, %v, %v, %d",
					detail, next.Changed, next.Paused, len(next.Intervals), pc.Detail, pc.Changed, pc.Paused, pc.Intervals)
			}
			if next.Paused != storekit.Open(next.Intervals) {
				t.Errorf("paused %v with intervals %v", next.Paused, next.Intervals)
			}
			if pc.Detail != storekit.WasNotPaused && (next.Actor != alice || !next.At.Equal(now)) {
				t.Errorf("actor %v at %v, want alice at %v", next.Actor, next.At, now)
			}
			if len(c.Intervals) != len(prev) || (len(prev) > 0 && c.Intervals[len(prev)-1] != prev[len(prev)-1]) {
				t.Errorf("the previous state was modified: %v, was %v", c.Intervals, prev)
			}
		})
	}
}

func TestPauseIntervals(t *testing.T) {
	a := onetick.Actor{Who: "a"}
	t0 := time.UnixMilli(5000).UTC()
	c, _ := storekit.Pause(onetick.JobControl{}, t0, a)
	if len(c.Intervals) != 1 || !c.Intervals[0].Since.Equal(t0) || !c.Intervals[0].Until.IsZero() {
		t.Fatalf("intervals %v", c.Intervals)
	}
	// A resume by a clock that went back ends the interval at its start.
	r, _ := storekit.Resume(c, t0.Add(-time.Second), a)
	if got := r.Intervals[0].Until; !got.Equal(t0) {
		t.Errorf("resumed before the start: until %v, want %v", got, t0)
	}
	r, _ = storekit.Resume(c, t0.Add(time.Second), a)
	if got := r.Intervals[0].Until; !got.Equal(t0.Add(time.Second)) {
		t.Errorf("until %v", got)
	}
	// The oldest interval goes beyond MaxIntervals.
	now := t0
	for range storekit.MaxIntervals + 3 {
		c, _ = storekit.Pause(c, now, a)
		now = now.Add(time.Second)
		c, _ = storekit.Resume(c, now, a)
		now = now.Add(time.Second)
	}
	if len(c.Intervals) != storekit.MaxIntervals || !c.Intervals[len(c.Intervals)-1].Until.Equal(now.Add(-time.Second)) {
		t.Errorf("%d intervals, last %v", len(c.Intervals), c.Intervals[len(c.Intervals)-1])
	}
}

func TestDropPassed(t *testing.T) {
	ms := func(n int64) time.Time { return time.UnixMilli(n).UTC() }
	iv := []onetick.PauseInterval{{Since: ms(100), Until: ms(200)}, {Since: ms(300), Until: ms(400)}, {Since: ms(500)}}
	for _, c := range []struct {
		last onetick.Slot
		keep int
	}{{0, 3}, {198, 3}, {199, 2}, {200, 2}, {398, 2}, {399, 1}, {1 << 40, 1}} {
		got := storekit.DropPassed(iv, c.last)
		if len(got) != c.keep || !got[len(got)-1].Until.IsZero() {
			t.Errorf("last %d: kept %v, want %d", c.last, got, c.keep)
		}
	}
	if got := storekit.DropPassed(iv[:2], 1000); len(got) != 0 {
		t.Errorf("kept %v of passed intervals", got)
	}
}
