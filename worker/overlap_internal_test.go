package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// The table of preference × overlap policy, through policyOf and
// DecideOverlap: what a tick of a job whose run is in flight does, and
// when a tick whose marker is free may run.
func TestOverlapTable(t *testing.T) {
	busy := OverlapState{}                  // another run holds the marker
	busyWaiting := OverlapState{Waiting: 1} // and another tick waits
	free := OverlapState{MarkerFree: true}  // nothing in flight
	freeLowerWaits := OverlapState{MarkerFree: true, Waiting: 1, LowerWaiting: true}
	noLower := func() (bool, error) { return false, nil }
	lower := func() (bool, error) { return true, nil }
	for _, c := range []struct {
		prefer  onetick.Prefer
		overlap Overlap
		state   OverlapState
		lower   func() (bool, error)
		want    Admission
	}{
		{onetick.PreferMissed, OverlapSkip, busy, noLower, SkipOverlap},
		{onetick.PreferMissed, OverlapSkip, free, lower, Run}, // unordered: pending ticks do not matter
		{onetick.PreferMissed, OverlapQueue, busy, noLower, Wait},
		{onetick.PreferMissed, OverlapQueue, busyWaiting, noLower, SkipOverlap},
		{onetick.PreferMissed, OverlapQueue, freeLowerWaits, noLower, Run},
		{onetick.PreferMissed, OverlapAllow, busyWaiting, lower, Run},
		{onetick.PreferDuplicate, OverlapSkip, busy, noLower, Wait},
		{onetick.PreferDuplicate, OverlapSkip, OverlapState{Waiting: 99}, noLower, Wait},
		{onetick.PreferDuplicate, OverlapSkip, OverlapState{Waiting: 100}, noLower, SkipOverlap},
		{onetick.PreferDuplicate, OverlapSkip, OverlapState{Waiting: 100, HasPlace: true}, noLower, Wait},
		{onetick.PreferDuplicate, OverlapQueue, busyWaiting, noLower, Wait},
		{onetick.PreferDuplicate, OverlapSkip, free, noLower, Run},
		{onetick.PreferDuplicate, OverlapSkip, free, lower, Wait},
		{onetick.PreferDuplicate, OverlapQueue, freeLowerWaits, noLower, Wait},
		{onetick.PreferDuplicate, OverlapAllow, busyWaiting, lower, Run},
	} {
		o, waiting, ordered := policyOf(c.prefer, c.overlap, DefaultMaxWaiting)
		st := Start{Overlap: o, MaxWaiting: waiting, Ordered: ordered}
		got, err := DecideOverlap(st, c.state, c.lower)
		if err != nil || got != c.want {
			t.Errorf("prefer %s, overlap %s, %+v: %v, %v; want %v", c.prefer, c.overlap, c.state, got, err, c.want)
		}
	}
	// lowerPending is asked only when it decides, and its error is Begin's.
	boom := errors.New("boom")
	if _, err := DecideOverlap(Start{Overlap: OverlapQueue, Ordered: true}, free, func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("error of lowerPending: %v", err)
	}
	asked := false
	_, _ = DecideOverlap(Start{Overlap: OverlapQueue, Ordered: true}, busy, func() (bool, error) { asked = true; return false, nil })
	if asked {
		t.Fatal("lowerPending asked while the marker is held")
	}
}

func TestTimingDefaults(t *testing.T) {
	for _, c := range []struct {
		in             Config
		hb, live, idle time.Duration
	}{
		{Config{}, time.Second, 3 * time.Second, 30 * time.Second},
		{Config{TakeoverIdle: 3 * time.Second}, time.Second, 3 * time.Second, 3 * time.Second},
		{Config{TakeoverIdle: 900 * time.Millisecond}, 300 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond},
		{Config{HeartbeatInterval: 200 * time.Millisecond}, 200 * time.Millisecond, 600 * time.Millisecond, 30 * time.Second},
		{Config{LivenessTTL: 5 * time.Second}, time.Second, 5 * time.Second, 30 * time.Second},
	} {
		d := c.in.withDefaults()
		if d.HeartbeatInterval != c.hb || d.LivenessTTL != c.live || d.TakeoverIdle != c.idle {
			t.Errorf("%+v: heartbeat %s, liveness %s, takeover idle %s; want %s, %s, %s", c.in,
				d.HeartbeatInterval, d.LivenessTTL, d.TakeoverIdle, c.hb, c.live, c.idle)
		}
	}
}
