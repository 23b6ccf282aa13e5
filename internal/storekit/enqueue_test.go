package storekit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

func TestManual(t *testing.T) {
	a := onetick.Actor{Who: "alice", Reason: "catch up"}
	back := []onetick.Tick{{Job: "j", Slot: 60_000}, {Job: "j", Slot: 120_000}}
	m, err := storekit.Manual(back, a)
	if err != nil || m.Job != "j" || m.Kind != onetick.KindBackfill || m.Token != "manual|alice" || m.Trigger() {
		t.Fatalf("Manual = %+v, %v", m, err)
	}
	at := time.UnixMilli(200_000)
	r := m.Record(back, a, at, 1)
	want := back[0].Slot.String() + " .. " + back[1].Slot.String() + " (1 of 2 enqueued)"
	if r.Action != onetick.KindBackfill || r.Job != "j" || r.Who != "alice" || r.Reason != "catch up" || !r.At.Equal(at) || r.Detail != want {
		t.Errorf("record %+v, want detail %q", r, want)
	}
	if s := m.Slot(back[1], 5); s != 120_000 {
		t.Errorf("a backfilled tick is enqueued at %d", s)
	}

	trig := []onetick.Tick{{Job: "j", Key: "k1"}}
	m, err = storekit.Manual(trig, a)
	if err != nil || m.Kind != onetick.KindTrigger || !m.Trigger() {
		t.Fatalf("Manual = %+v, %v", m, err)
	}
	if s := m.Slot(trig[0], 5); s != 5 {
		t.Errorf("a trigger is enqueued at %d, want the store's now", s)
	}
	if d := m.Record(trig, a, at, 0).Detail; d != "j:trigger:k1 (0 of 1 enqueued)" {
		t.Errorf("detail %q", d)
	}

	for _, bad := range [][]onetick.Tick{
		{{Job: "j", Slot: 1}, {Job: "k", Slot: 2}},
		{{Job: "j", Slot: 1}, {Job: "j", Key: "x"}},
	} {
		if _, err := storekit.Manual(bad, a); !errors.Is(err, storekit.ErrMixedEnqueue) {
			t.Errorf("Manual(%v) = %v", bad, err)
		}
	}
}

func TestManualDecide(t *testing.T) {
	back := storekit.ManualBatch{Job: "j", Kind: onetick.KindBackfill, Token: "manual|a"}
	trig := storekit.ManualBatch{Job: "j", Kind: onetick.KindTrigger, Token: "manual|a"}
	dmg := &onetick.DamageError{Key: "s"}
	for _, c := range []struct {
		name  string
		m     storekit.ManualBatch
		slot  onetick.Slot
		seen  bool
		dmg   *onetick.DamageError
		want  onetick.Outcome
		write bool
	}{
		{"backfill", back, 10, false, nil, onetick.Claimed, true},
		{"backfill early", back, 200, true, dmg, onetick.Early, false},
		{"trigger never early", trig, 200, false, nil, onetick.Claimed, true},
		{"recorded", back, 10, true, dmg, onetick.Duplicate, false},
		{"stream damaged", trig, 10, false, dmg, onetick.Broken, false},
	} {
		d := c.m.Decide(c.slot, 100, c.seen, c.dmg)
		if d.Outcome != c.want || (d.Record == "manual|a") != c.write || d.Append != c.write || d.Move {
			t.Errorf("%s: %+v", c.name, d)
		}
		if c.want == onetick.Broken && (d.Damage == nil || d.Damage.Job != "j" || d.Damage == dmg) {
			t.Errorf("%s: damage %v, want a copy naming the job", c.name, d.Damage)
		}
	}
}
