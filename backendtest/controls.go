package backendtest

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

var controlTests = []struct {
	name string
	fn   func(t *testing.T, h Harness, b onetick.Backend)
}{
	{"PauseRefusesSlots", testPauseRefusesSlots},
	{"PauseIntervalLeaderless", testPauseIntervalLeaderless},
	{"PauseSurvivesLeaderChange", testPauseSurvivesLeaderChange},
	{"Trigger", testTrigger},
	{"Backfill", testBackfill},
	{"ControlLog", testControlLog},
	{"PausedStateDamaged", testPausedStateDamaged},
	{"TickVersion", testTickVersion},
}

var alice = onetick.Actor{Who: "alice", Reason: "incident 42"}

// storeSlot is the store's now as a slot.
func storeSlot(t *testing.T, b onetick.Backend) onetick.Slot {
	return onetick.Slot(storeMs(t, b))
}

// testPauseRefusesSlots: a paused job's slots are answered Paused (also on
// a retry of the same claim) and accounted for, while other jobs of the
// same batch are claimed; after the resume the next slot is claimed.
func testPauseRefusesSlots(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	l := mustAcquire(t, b, "a", 30*time.Second)
	c, err := b.Pause(ctx, "p", alice)
	if err != nil {
		t.Fatalf("pause: %v", err)
	}
	if !c.Paused || !c.Changed || len(c.Intervals) != 1 || !c.Intervals[0].Until.IsZero() {
		t.Fatalf("pause returned %+v, want one open interval", c)
	}
	if again, err := b.Pause(ctx, "p", alice); err != nil || again.Changed || len(again.Intervals) != 1 {
		t.Fatalf("pausing a paused job: %+v, %v; want no change", again, err)
	}
	s := onetick.SlotOf(c.Intervals[0].Since)
	batch := []onetick.Tick{tick("p", s, sk("pz")), tick("q", s, sk("pz"))}
	for attempt := 0; attempt < 2; attempt++ {
		if o := mustClaim(t, b, l, batch...); o[0] != onetick.Paused || o[1] != onetick.Claimed {
			t.Fatalf("claim %d: %v, want paused, claimed", attempt, o)
		}
	}
	// A slot before the pause is not paused.
	if o := mustClaim(t, b, l, tick("r", s-1000, sk("pz"))); o[0] != onetick.Claimed {
		t.Fatalf("a slot before the pause: %v", o)
	}
	recs := h.Stream(t, b, sk("pz"))
	if len(recs) != 2 || recs[0].Job != "q" {
		t.Fatalf("stream %+v: want q and r only", recs)
	}
	last, err := b.LastFired(ctx, []string{"p"})
	if err != nil || last["p"] != s {
		t.Fatalf("last fired %v (%v): a paused slot is accounted for", last, err)
	}
	ctl, v1, err := b.Controls(ctx)
	if err != nil || !ctl["p"].Paused || ctl["p"].Actor != alice {
		t.Fatalf("controls %+v, %v", ctl, err)
	}
	for storeSlot(t, b) <= s {
	}
	r, err := b.Resume(ctx, "p", onetick.Actor{Who: "bob"})
	if err != nil || r.Paused || !r.Changed {
		t.Fatalf("resume: %+v, %v", r, err)
	}
	until := onetick.SlotOf(r.Intervals[0].Until)
	if until <= s {
		t.Fatalf("resume ended the interval at %s, not after its start %s", until, s)
	}
	if _, v2, _ := b.Controls(ctx); v2 <= v1 {
		t.Fatalf("controls version %d after a resume, want more than %d", v2, v1)
	}
	if o := mustClaim(t, b, l, tick("p", until, sk("pz"))); o[0] != onetick.Claimed {
		t.Fatalf("the first slot after the resume: %v, want claimed", o)
	}
	// The interval is behind the last-fired slot now: dropped.
	if ctl, _, _ := b.Controls(ctx); len(ctl["p"].Intervals) != 0 {
		t.Fatalf("controls after the job moved past its pause: %+v", ctl["p"])
	}
	// Resuming again changes nothing.
	_, v3, _ := b.Controls(ctx)
	if r, err := b.Resume(ctx, "p", alice); err != nil || r.Changed {
		t.Fatalf("resuming a job that is not paused: %+v, %v", r, err)
	}
	if _, v4, _ := b.Controls(ctx); v4 != v3 {
		t.Fatalf("a resume of a job that is not paused moved the version %d -> %d", v3, v4)
	}
}

// testPauseIntervalLeaderless: paused and resumed while no leader claims;
// a leader catching up afterwards gets Paused for the slots of the pause
// and fires the slots after it: no catch-up of paused slots, whatever the
// preference.
func testPauseIntervalLeaderless(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	l := mustAcquire(t, b, "a", 30*time.Second)
	s0 := storeSlot(t, b) - 10
	mustClaim(t, b, l, tick("p", s0, sk("pl")))
	c, err := b.Pause(ctx, "p", alice)
	if err != nil {
		t.Fatal(err)
	}
	since := onetick.SlotOf(c.Intervals[0].Since)
	for storeSlot(t, b) < since+30 {
	}
	r, err := b.Resume(ctx, "p", alice)
	if err != nil {
		t.Fatal(err)
	}
	until := onetick.SlotOf(r.Intervals[0].Until)
	for storeSlot(t, b) < until+5 {
	}
	o := mustClaim(t, b, l, tick("p", since+10, sk("pl")), tick("p", since+20, sk("pl")), tick("p", until+1, sk("pl")))
	if o[0] != onetick.Paused || o[1] != onetick.Paused || o[2] != onetick.Claimed {
		t.Fatalf("catch-up over a pause: %v, want paused, paused, claimed", o)
	}
	if n := len(h.Stream(t, b, sk("pl"))); n != 2 {
		t.Fatalf("stream has %d entries, want 2", n)
	}
}

// testPauseSurvivesLeaderChange: a pause made under one leader binds the
// next: it lives in the store.
func testPauseSurvivesLeaderChange(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	mustAcquire(t, b, "a", 30*time.Second)
	c, err := b.Pause(ctx, "p", alice)
	if err != nil {
		t.Fatal(err)
	}
	h.Expire(t, b)
	l := mustAcquire(t, b, "b", 30*time.Second)
	if o := mustClaim(t, b, l, tick("p", onetick.SlotOf(c.Intervals[0].Since), sk("ps"))); o[0] != onetick.Paused {
		t.Fatalf("the next leader's claim of a paused slot: %v", o)
	}
}

// testTrigger: a trigger has its own identity, is appended with kind
// trigger, needs no lease, and a retried request (same key) enqueues
// nothing; a paused job can still be triggered by hand.
func testTrigger(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	if _, err := b.Pause(ctx, "j", alice); err != nil {
		t.Fatal(err)
	}
	tr := onetick.Tick{Job: "j", Key: "req-1", Stream: sk("tg"), Payload: `{"x":1}`, Retention: time.Hour}
	for attempt := 0; attempt < 2; attempt++ {
		res, err := b.Enqueue(ctx, []onetick.Tick{tr}, alice)
		if err != nil {
			t.Fatalf("trigger: %v", err)
		}
		want := onetick.Claimed
		if attempt > 0 {
			want = onetick.Duplicate
		}
		if res.Outcomes[0] != want {
			t.Fatalf("trigger attempt %d: %v, want %v", attempt, res.Outcomes[0], want)
		}
	}
	tr.Key = "req-2"
	if res, err := b.Enqueue(ctx, []onetick.Tick{tr}, alice); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("second trigger: %+v, %v", res, err)
	}
	recs := h.Stream(t, b, sk("tg"))
	if len(recs) != 2 {
		t.Fatalf("stream %+v, want two triggers", recs)
	}
	r := recs[0]
	if r.Tick != "j:trigger:req-1" || r.Kind != onetick.KindTrigger || r.Payload != `{"x":1}` || r.Slot <= 0 {
		t.Fatalf("trigger entry %+v", r)
	}
	if last, _ := b.LastFired(ctx, []string{"j"}); len(last) != 0 {
		t.Fatalf("a trigger moved the last-fired slot: %v", last)
	}
}

// testBackfill: scheduled slots of a range, with their scheduled
// identity; repeating the backfill enqueues nothing; a slot still
// recorded from its scheduled claim is a duplicate; a future slot is
// early; the last-fired slot does not move.
func testBackfill(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	base := pastSlot(time.Hour, time.Minute)
	l := mustAcquire(t, b, "a", 30*time.Second)
	scheduled := tick("j", base+60000*3, sk("bf"))
	scheduled.Retention = 3 * time.Hour // records live their retention past their slot
	mustClaim(t, b, l, scheduled)
	var ticks []onetick.Tick
	for i := 0; i < 4; i++ {
		ticks = append(ticks, onetick.Tick{Job: "j", Slot: base + onetick.Slot(60000*i), Stream: sk("bf"), Payload: "{}", Retention: time.Hour})
	}
	res, err := b.Enqueue(ctx, ticks, alice)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Outcomes
	if o[0] != onetick.Claimed || o[1] != onetick.Claimed || o[2] != onetick.Claimed || o[3] != onetick.Duplicate {
		t.Fatalf("backfill: %v, want claimed x3 and the already claimed slot duplicate", o)
	}
	res, err = b.Enqueue(ctx, ticks, alice)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range res.Outcomes {
		if x != onetick.Duplicate {
			t.Fatalf("repeated backfill: tick %d %v, want duplicate", i, x)
		}
	}
	future := onetick.Tick{Job: "j", Slot: onetick.SlotOf(time.Now().Add(time.Hour)), Stream: sk("bf"), Payload: "{}", Retention: time.Hour}
	if res, err := b.Enqueue(ctx, []onetick.Tick{future}, alice); err != nil || res.Outcomes[0] != onetick.Early {
		t.Fatalf("a future slot: %+v, %v", res, err)
	}
	recs := h.Stream(t, b, sk("bf"))
	if len(recs) != 4 {
		t.Fatalf("stream has %d entries, want 1 scheduled + 3 backfilled", len(recs))
	}
	for _, r := range recs[1:] {
		if r.Kind != onetick.KindBackfill || r.Tick != onetick.TickID("j", r.Slot) {
			t.Fatalf("backfill entry %+v", r)
		}
	}
	if last, _ := b.LastFired(ctx, []string{"j"}); last["j"] != base+60000*3 {
		t.Fatalf("backfill moved the last-fired slot: %v", last)
	}
}

// testControlLog: every control is recorded, newest first, with who, why
// and when.
func testControlLog(t *testing.T, _ Harness, b onetick.Backend) {
	ctx := ctxT(t)
	if _, err := b.Pause(ctx, "j", alice); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resume(ctx, "j", onetick.Actor{Who: "bob", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Enqueue(ctx, []onetick.Tick{{Job: "j", Key: "k", Stream: sk("cl"), Payload: "{}", Retention: time.Hour}},
		onetick.Actor{Who: "carol"}); err != nil {
		t.Fatal(err)
	}
	recs, err := b.ControlLog(ctx, 10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("control log %+v, %v", recs, err)
	}
	if recs[0].Action != "trigger" || recs[0].Who != "carol" || recs[1].Action != "resume" || recs[1].Reason != "fixed" ||
		recs[2].Action != "pause" || recs[2].Who != "alice" || recs[2].Reason != "incident 42" || recs[2].At.IsZero() {
		t.Fatalf("control log %+v", recs)
	}
}

// testPausedStateDamaged: the pause controls as a whole of another type
// stop every claim loudly (the replica cannot tell which job is paused);
// one job's unparseable intervals make that job Broken.
func testPausedStateDamaged(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	l := mustAcquire(t, b, "a", 30*time.Second)
	s := pastSlot(time.Second, time.Second)
	damage(t, h, b, Damage{Kind: PausedFieldGarbage, Job: "p"})
	res, err := b.Claim(ctx, l, []onetick.Tick{tick("p", s, sk("pd")), tick("q", s, sk("pd"))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcomes[0] != onetick.Broken || res.Outcomes[1] != onetick.Claimed {
		t.Fatalf("outcomes %v, want broken, claimed", res.Outcomes)
	}
	h.Fix(t, b, Damage{Kind: PausedFieldGarbage, Job: "p"})
	damage(t, h, b, Damage{Kind: PausedWrongType})
	_, err = b.Claim(ctx, l, []onetick.Tick{tick("q", s+1000, sk("pd"))})
	if !errors.Is(err, onetick.ErrDamaged) {
		t.Fatalf("claim with the pause controls of another type: %v, want ErrDamaged", err)
	}
	if _, err := b.Pause(ctx, "p", alice); !errors.Is(err, onetick.ErrDamaged) {
		t.Fatalf("pause with the pause controls of another type: %v, want ErrDamaged", err)
	}
	h.Fix(t, b, Damage{Kind: PausedWrongType})
	if o := mustClaim(t, b, l, tick("q", s+1000, sk("pd"))); o[0] != onetick.Claimed {
		t.Fatalf("after the fix: %v", o)
	}
}

// testTickVersion: a job's definition version travels with its ticks,
// claimed, triggered or backfilled, as the entry's version; a tick
// without one has none.
func testTickVersion(t *testing.T, h Harness, b onetick.Backend) {
	ctx := ctxT(t)
	base := pastSlot(time.Hour, time.Minute)
	l := mustAcquire(t, b, "a", 30*time.Second)
	v1, plain := tick("j", base, sk("ver")), tick("k", base, sk("ver"))
	v1.Version = "v1"
	mustClaim(t, b, l, v1, plain)
	tr := onetick.Tick{Job: "j", Key: "req-v", Stream: sk("ver"), Payload: "{}", Retention: time.Hour, OutOfOrder: true, Version: "v2"}
	if res, err := b.Enqueue(ctx, []onetick.Tick{tr}, alice); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("trigger: %+v, %v", res, err)
	}
	bf := onetick.Tick{Job: "j", Slot: base - 60000, Stream: sk("ver"), Payload: "{}", Retention: time.Hour, OutOfOrder: true, Version: "v3"}
	if res, err := b.Enqueue(ctx, []onetick.Tick{bf}, alice); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	got := map[string]string{}
	for _, r := range h.Stream(t, b, sk("ver")) {
		got[r.Tick] = r.Version
	}
	want := map[string]string{v1.ID(): "v1", plain.ID(): "", tr.ID(): "v2", bf.ID(): "v3"}
	if !maps.Equal(got, want) {
		t.Fatalf("versions by tick %v, want %v", got, want)
	}
}
