package onetick_test

import (
	"testing"
	"time"

	"github.com/onetick/onetick"
)

func TestDeadlineJudge(t *testing.T) {
	slot := onetick.SlotOf(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	at := func(d time.Duration) time.Time { return slot.Time().Add(d) }
	d := onetick.Deadline{Start: time.Minute, Finish: 10 * time.Minute}
	run := func(fate onetick.Fate, evs ...onetick.RunEvent) onetick.Run {
		return onetick.Run{Job: "a", Slot: slot, Tick: onetick.TickID("a", slot), Fate: fate, Events: evs}
	}
	started := func(d time.Duration) onetick.RunEvent { return onetick.RunEvent{What: onetick.EventStarted, At: at(d)} }
	done := func(d time.Duration) onetick.RunEvent {
		return onetick.RunEvent{What: onetick.EventSucceeded, At: at(d)}
	}
	for _, c := range []struct {
		name string
		r    onetick.Run
		has  bool
		now  time.Duration
		want onetick.Verdict
	}{
		{"no record, before the start deadline", onetick.Run{}, false, 30 * time.Second, onetick.Verdict{Pending: true}},
		{"no record, start deadline passed", onetick.Run{}, false, 2 * time.Minute, onetick.Verdict{StartMissed: true, Pending: true}},
		{"no record, both passed", onetick.Run{}, false, time.Hour, onetick.Verdict{StartMissed: true, FinishMissed: true}},
		{"started in time, running", run(onetick.FateRunning, started(time.Second)), true, 2 * time.Minute, onetick.Verdict{Pending: true}},
		{"met both", run(onetick.FateSucceeded, started(time.Second), done(time.Minute)), true, time.Hour, onetick.Verdict{}},
		{"started late stays late", run(onetick.FateSucceeded, started(2*time.Minute), done(3*time.Minute)), true, time.Hour, onetick.Verdict{StartMissed: true}},
		{"finished late", run(onetick.FateSucceeded, started(time.Second), done(11*time.Minute)), true, time.Hour, onetick.Verdict{FinishMissed: true}},
		{"dead", run(onetick.FateDead, started(time.Second)), true, time.Hour, onetick.Verdict{FinishMissed: true}},
		{"skipped", run(onetick.FateSkipped), true, time.Hour, onetick.Verdict{StartMissed: true, FinishMissed: true}},
		{"paused", run(onetick.FatePaused), true, time.Hour, onetick.Verdict{}},
		{"a trigger has no deadline", onetick.Run{Kind: "trigger"}, true, time.Hour, onetick.Verdict{}},
	} {
		if got := d.Judge(slot, c.r, c.has, at(c.now)); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if (onetick.Deadline{}).Set() || !d.Set() {
		t.Error("Set")
	}
	if v := (onetick.Deadline{}).Judge(slot, onetick.Run{}, false, at(time.Hour)); v != (onetick.Verdict{}) {
		t.Errorf("no deadline: %+v", v)
	}
}
