package storekit_test

import (
	"errors"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

const token = "me|7"

// view is the View of case c for a tick at slot.
func view(c storekit.ClaimCase, slot onetick.Slot) storekit.View {
	v := storekit.View{Seen: c.Record != storekit.NoRecord, Record: c.Record.Token(token),
		HasLast: c.HasLast, Last: slot + c.LastDelta}
	if c.RecordDamaged {
		v.RecordDamage = &onetick.DamageError{Key: "records", Reason: "holds a string"}
	}
	if c.JobDamaged {
		v.JobDamage = &onetick.DamageError{Key: "last", Field: "j", Reason: "not an integer"}
	}
	if c.StreamDamaged {
		v.StreamDamage = &onetick.DamageError{Key: "s", Reason: "holds a string"}
	}
	if c.Paused {
		v.Paused = func(job string, s onetick.Slot) (bool, error) { return job == "j" && s == slot, nil }
	}
	return v
}

func TestDecideCases(t *testing.T) {
	const slot onetick.Slot = 1_000_000
	for _, c := range storekit.ClaimCases() {
		t.Run(c.Name, func(t *testing.T) {
			tick := onetick.Tick{Job: "j", Slot: slot, Stream: "s", OutOfOrder: c.OutOfOrder}
			limit := slot + 100
			if c.Early {
				limit = slot - 1
			}
			d, err := storekit.Decide(tick, token, limit, view(c, slot))
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != c.Want {
				t.Fatalf("outcome %v, want %v", d.Outcome, c.Want)
			}
			if d.Record != c.Writes.Token(token) || d.Move != c.Moves || d.Append != c.Appends {
				t.Errorf("writes record %q, moves %v, appends %v; want %q, %v, %v",
					d.Record, d.Move, d.Append, c.Writes.Token(token), c.Moves, c.Appends)
			}
			if (d.Outcome == onetick.Broken) != (d.Damage != nil) {
				t.Errorf("outcome %v with damage %v", d.Outcome, d.Damage)
			}
			if d.Damage != nil && d.Damage.Job != "j" {
				t.Errorf("damage names job %q, want j", d.Damage.Job)
			}
		})
	}
}

// TestDecideAsksPausedOnlyWhenItMatters: a store may read pause
// intervals lazily; Decide asks only for an in-order tick not decided
// before, and passes the read's error on.
func TestDecideAsksPausedOnlyWhenItMatters(t *testing.T) {
	asked := 0
	boom := errors.New("read failed")
	v := storekit.View{Paused: func(string, onetick.Slot) (bool, error) { asked++; return false, boom }}
	tick := onetick.Tick{Job: "j", Slot: 10}
	for _, c := range []struct {
		name string
		t    onetick.Tick
		v    storekit.View
	}{
		{"early", onetick.Tick{Job: "j", Slot: 1000}, v},
		{"out of order", onetick.Tick{Job: "j", Slot: 10, OutOfOrder: true}, v},
		{"recorded", tick, storekit.View{Seen: true, Record: token, Paused: v.Paused}},
		{"fired", tick, storekit.View{HasLast: true, Last: 10, Paused: v.Paused}},
	} {
		if _, err := storekit.Decide(c.t, token, 100, c.v); err != nil || asked != 0 {
			t.Errorf("%s: err %v, asked %d times", c.name, err, asked)
		}
	}
	if _, err := storekit.Decide(tick, token, 100, v); !errors.Is(err, boom) || asked != 1 {
		t.Errorf("err %v, asked %d times; want the read's error, once", err, asked)
	}
}

func TestDecisionAnswer(t *testing.T) {
	res := onetick.ClaimResult{Outcomes: make([]onetick.Outcome, 2)}
	d, _ := storekit.Decide(onetick.Tick{Job: "j", Slot: 1}, token, 10, storekit.View{JobDamage: &onetick.DamageError{Key: "last"}})
	storekit.Decision{Outcome: onetick.Claimed}.Answer(&res, 0)
	d.Answer(&res, 1)
	if res.Outcomes[0] != onetick.Claimed || res.Outcomes[1] != onetick.Broken || len(res.Damaged) != 1 ||
		res.Damaged[1].Key != "last" || res.Damaged[1].Job != "j" {
		t.Errorf("result %+v, damaged %v", res, res.Damaged)
	}
}

func TestTokens(t *testing.T) {
	if got := storekit.PausedToken(token); got != "me|7|p" {
		t.Errorf("PausedToken = %q", got)
	}
	if got := storekit.ManualToken("alice"); got != "manual|alice" {
		t.Errorf("ManualToken = %q", got)
	}
	for _, r := range []storekit.RecordState{storekit.OwnRecord, storekit.OwnPausedRecord, storekit.OtherRecord} {
		if r.Token(token) == "" || r.Token(token) == storekit.NoRecord.Token(token) {
			t.Errorf("record %d has token %q", r, r.Token(token))
		}
	}
}
