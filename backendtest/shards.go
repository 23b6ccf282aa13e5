package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// Shards runs the suite of a store that shards (onetick.Sharder,
// docs/shards.md): what a shard's view adds to the Backend contract.
// Exercise, run on a view, checks that a view obeys the contract on its
// own; Shards checks that views do not see each other: a lease of one
// shard neither blocks nor fences another, and last-fired slots, tick
// and trigger records, controls, history and the ledger are per shard;
// and that shard 0 of 1 is the store itself. h.New returns the store (not
// a view); Expire and Stream must work on a view too.
func Shards(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, s onetick.Sharder)
	}{
		{"OneShardIsTheStore", testOneShardIsTheStore},
		{"LeasesIsolated", testShardLeasesIsolated},
		{"ClaimFencedAcrossViews", testShardClaimFencedAcrossViews},
		{"StatePerShard", testShardStatePerShard},
		{"ControlsPerShard", testShardControlsPerShard},
		{"SameViewTwice", testShardSameViewTwice},
		{"BadShard", testShardBad},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fresh(t, h)
			s, ok := b.(onetick.Sharder)
			if !ok {
				t.Fatalf("%T does not implement onetick.Sharder", b)
			}
			tc.fn(t, h, s)
		})
	}
}

// vs is the key of the suite's stream name in view v: under the view's
// key prefix where the store has one (a Redis Cluster needs every key of
// a claim in the view's slot), else the name itself.
func vs(v onetick.Backend, name string) string {
	if p, ok := v.(interface{ Prefix() string }); ok {
		return p.Prefix() + ":s:" + name
	}
	return name
}

// view returns shard n of shards, failing the test on an error; closing
// it is left to the test's end, as a caller would (it does nothing).
func view(t *testing.T, s onetick.Sharder, n, shards int) onetick.Backend {
	t.Helper()
	v, err := s.Shard(n, shards)
	if err != nil {
		t.Fatalf("Shard(%d, %d): %v", n, shards, err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// testOneShardIsTheStore: with one shard the view of shard 0 reads and
// writes the store's own state, under today's keys: a lease taken on the
// store is the view's, a claim through the view moves the store's
// last-fired slot, and the reverse.
func testOneShardIsTheStore(t *testing.T, _ Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	b := s.(onetick.Backend)
	v := view(t, s, 0, 1)
	l := mustAcquire(t, b, "a", 30*time.Second)
	info, err := v.Leader(ctx)
	if err != nil || !info.Held || info.Lease != l {
		t.Fatalf("the view's leader %+v, %v; want the store's lease %+v", info, err, l)
	}
	if _, err := v.Acquire(ctx, "b", 30*time.Second); !errors.Is(err, onetick.ErrLeaseHeld) {
		t.Fatalf("acquire on the view while the store's lease is held: %v, want ErrLeaseHeld", err)
	}
	slot := pastSlot(time.Minute, time.Second)
	if o := mustClaim(t, v, l, tick("j", slot, vs(v, "one"))); o[0] != onetick.Claimed {
		t.Fatalf("claim through the view under the store's lease: %v", o)
	}
	last, err := b.LastFired(ctx, []string{"j"})
	if err != nil || last["j"] != slot {
		t.Fatalf("the store's last-fired slots %v, %v; want j at %v", last, err, slot)
	}
	if err := v.Release(ctx, l); err != nil {
		t.Fatalf("release through the view: %v", err)
	}
	if info, err := b.Leader(ctx); err != nil || info.Held {
		t.Fatalf("the store's leader after the view released: %+v, %v", info, err)
	}
	// The next term, on the store: the tick the view claimed is a
	// Duplicate there.
	l2 := mustAcquire(t, b, "b", 30*time.Second)
	if o := mustClaim(t, b, l2, tick("j", slot, vs(b, "one"))); o[0] != onetick.Duplicate {
		t.Fatalf("the store's claim of the tick the view claimed: %v, want Duplicate", o)
	}
}

// testShardLeasesIsolated: each shard has its own lease: held on shard 1,
// shard 2 and the store's own lease are still free; renewing, expiring
// and releasing one leaves the others as they were; each shard's history
// holds its own terms.
func testShardLeasesIsolated(t *testing.T, h Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	b := s.(onetick.Backend)
	v1, v2 := view(t, s, 1, 3), view(t, s, 2, 3)
	l1 := mustAcquire(t, v1, "a", 30*time.Second)
	l2 := mustAcquire(t, v2, "b", 30*time.Second)
	if info, err := b.Leader(ctx); err != nil || info.Held {
		t.Fatalf("the store's own lease after two shards were taken: %+v, %v; want free", info, err)
	}
	for _, c := range []struct {
		v onetick.Backend
		l onetick.Lease
	}{{v1, l1}, {v2, l2}} {
		info, err := c.v.Leader(ctx)
		if err != nil || info.Lease != c.l {
			t.Fatalf("leader %+v, %v; want %+v", info, err, c.l)
		}
	}
	// Another holder is refused on a held shard only.
	if _, err := v1.Acquire(ctx, "c", 30*time.Second); !errors.Is(err, onetick.ErrLeaseHeld) {
		t.Fatalf("acquire of held shard 1: %v, want ErrLeaseHeld", err)
	}
	// Shard 1's lease is not shard 2's.
	if _, err := v2.Renew(ctx, l1, 30*time.Second); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Fatalf("renew of shard 1's lease on shard 2: %v, want ErrLeaseLost", err)
	}
	if err := v2.Release(ctx, l1); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Fatalf("release of shard 1's lease on shard 2: %v, want ErrLeaseLost", err)
	}
	// Expiring shard 1 leaves shard 2 held.
	h.Expire(t, v1)
	if _, err := v2.Renew(ctx, l2, 30*time.Second); err != nil {
		t.Fatalf("renew of shard 2 after shard 1 expired: %v", err)
	}
	l1b := mustAcquire(t, v1, "c", 30*time.Second)
	if err := v2.Release(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Renew(ctx, l1b, 30*time.Second); err != nil {
		t.Fatalf("renew of shard 1 after shard 2 was released: %v", err)
	}
	for _, c := range []struct {
		v       onetick.Backend
		holders []string
	}{{v1, []string{"c", "a"}}, {v2, []string{"b"}}, {b, nil}} {
		terms, err := c.v.History(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tm := range terms {
			got = append(got, tm.Holder)
		}
		if len(got) != len(c.holders) || (len(got) > 0 && (got[0] != c.holders[0] || got[len(got)-1] != c.holders[len(c.holders)-1])) {
			t.Fatalf("history holders %v, want %v", got, c.holders)
		}
	}
}

// testShardClaimFencedAcrossViews: a claim under shard 1's lease given to
// shard 2's view is fenced (shard 2 held by another replica, or by
// nobody) and writes nothing there.
func testShardClaimFencedAcrossViews(t *testing.T, h Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	v1, v2 := view(t, s, 1, 3), view(t, s, 2, 3)
	l1 := mustAcquire(t, v1, "a", 30*time.Second)
	slot := pastSlot(time.Minute, time.Second)
	if _, err := v2.Claim(ctx, l1, []onetick.Tick{tick("j", slot, vs(v2, "fence"))}); !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("claim under shard 1's lease on free shard 2: %v, want ErrFenced", err)
	}
	mustAcquire(t, v2, "b", 30*time.Second)
	if _, err := v2.Claim(ctx, l1, []onetick.Tick{tick("j", slot, vs(v2, "fence"))}); !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("claim under shard 1's lease on shard 2 held by b: %v, want ErrFenced", err)
	}
	if last, err := v2.LastFired(ctx, []string{"j"}); err != nil || len(last) != 0 {
		t.Fatalf("shard 2's last-fired slots after fenced claims: %v, %v; want none", last, err)
	}
	if recs := h.Stream(t, v2, vs(v2, "fence")); len(recs) != 0 {
		t.Fatalf("fenced claims appended %+v", recs)
	}
	// Shard 1's own claim is not fenced by shard 2's leader.
	if o := mustClaim(t, v1, l1, tick("j", slot, vs(v1, "fence"))); o[0] != onetick.Claimed {
		t.Fatalf("claim on shard 1 under its lease: %v", o)
	}
}

// testShardStatePerShard: last-fired slots, tick records, trigger records
// and the ledger are each shard's: the same tick claimed on two shards is
// Claimed on both (in use a job is in one shard only; this shows the
// records do not meet), and what one shard wrote is not read by another
// or by the store.
func testShardStatePerShard(t *testing.T, h Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	b := s.(onetick.Backend)
	v1, v2 := view(t, s, 1, 3), view(t, s, 2, 3)
	l1 := mustAcquire(t, v1, "a", 30*time.Second)
	l2 := mustAcquire(t, v2, "b", 30*time.Second)
	early := pastSlot(2*time.Minute, time.Minute)
	late := early + onetick.Slot(time.Minute/time.Millisecond)
	if o := mustClaim(t, v1, l1, tick("j", late, vs(v1, "state"))); o[0] != onetick.Claimed {
		t.Fatalf("shard 1: %v", o)
	}
	// Shard 1's last-fired slot (late) does not make shard 2's earlier
	// slot a Duplicate, nor does its tick record the same tick.
	if o := mustClaim(t, v2, l2, tick("j", early, vs(v2, "state")), tick("j", late, vs(v2, "state"))); o[0] != onetick.Claimed || o[1] != onetick.Claimed {
		t.Fatalf("shard 2, the slot before and the tick shard 1 claimed: %v, want both Claimed", o)
	}
	if last, err := b.LastFired(ctx, []string{"j"}); err != nil || len(last) != 0 {
		t.Fatalf("the store's last-fired slots %v, %v; want none", last, err)
	}
	if n := len(h.Stream(t, v1, vs(v1, "state"))); n != 1 {
		t.Fatalf("shard 1's stream holds %d entries, want 1", n)
	}
	if n := len(h.Stream(t, v2, vs(v2, "state"))); n != 2 {
		t.Fatalf("shard 2's stream holds %d entries, want 2", n)
	}
	// Triggers: a trigger's record (its idempotency key) is per shard.
	tr := onetick.Tick{Job: "j", Key: "req-1", Payload: `{}`, Retention: time.Hour}
	for i, v := range []onetick.Backend{v1, v1, v2} {
		tr.Stream = vs(v, "trigger")
		res, err := v.Enqueue(ctx, []onetick.Tick{tr}, alice)
		want := []onetick.Outcome{onetick.Claimed, onetick.Duplicate, onetick.Claimed}[i]
		if err != nil || res.Outcomes[0] != want {
			t.Fatalf("trigger %d: %+v, %v; want %v", i, res, err, want)
		}
	}
	// The ledger, where the store keeps one.
	lg1, ok1 := v1.(onetick.Ledger)
	lg2, ok2 := v2.(onetick.Ledger)
	lgb, okb := b.(onetick.Ledger)
	if !ok1 || !ok2 || !okb {
		return
	}
	runs := func(lg onetick.Ledger) int {
		p, err := lg.Runs(ctx, onetick.RunQuery{Job: "j"})
		if errors.Is(err, onetick.ErrLedgerOff) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Runs)
	}
	if n1, n2, nb := runs(lg1), runs(lg2), runs(lgb); n1 >= 0 && (n1 != 2 || n2 != 3 || nb != 0) {
		t.Fatalf("ledger records of j: shard 1 %d, shard 2 %d, store %d; want 2 (a slot, a trigger), 3, 0", n1, n2, nb)
	}
}

// testShardControlsPerShard: a pause, its log and the controls' version
// are the shard's.
func testShardControlsPerShard(t *testing.T, _ Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	b := s.(onetick.Backend)
	v1, v2 := view(t, s, 1, 3), view(t, s, 2, 3)
	_, ver2, err := v2.Controls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Pause(ctx, "j", alice); err != nil {
		t.Fatal(err)
	}
	c1, ver1, err := v1.Controls(ctx)
	if err != nil || !c1["j"].Paused || ver1 == 0 {
		t.Fatalf("shard 1's controls %+v, version %d, %v; want j paused", c1, ver1, err)
	}
	for _, v := range []onetick.Backend{v2, b} {
		c, ver, err := v.Controls(ctx)
		if err != nil || len(c) != 0 || ver != ver2 {
			t.Fatalf("controls of another shard: %+v, version %d, %v; want none, version %d", c, ver, err, ver2)
		}
		if log, err := v.ControlLog(ctx, 10); err != nil || len(log) != 0 {
			t.Fatalf("control log of another shard: %+v, %v; want empty", log, err)
		}
	}
	// A paused job on shard 1 is not paused on shard 2.
	l2 := mustAcquire(t, v2, "b", 30*time.Second)
	if o := mustClaim(t, v2, l2, tick("j", pastSlot(time.Second, time.Millisecond), vs(v2, "ctl"))); o[0] != onetick.Claimed {
		t.Fatalf("shard 2's claim of j paused on shard 1: %v, want Claimed", o)
	}
}

// testShardSameViewTwice: asking again for a shard gives a view of the
// same state, and closing a view leaves the store and the other views
// working.
func testShardSameViewTwice(t *testing.T, _ Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	b := s.(onetick.Backend)
	a, again := view(t, s, 1, 3), view(t, s, 1, 3)
	l := mustAcquire(t, a, "a", 30*time.Second)
	if info, err := again.Leader(ctx); err != nil || info.Lease != l {
		t.Fatalf("the second view's leader %+v, %v; want %+v", info, err, l)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close of a view: %v", err)
	}
	if _, err := again.Renew(ctx, l, 30*time.Second); err != nil {
		t.Fatalf("renew through another view of the shard after a view was closed: %v", err)
	}
	if _, err := b.Time(ctx); err != nil {
		t.Fatalf("the store after a view was closed: %v", err)
	}
	if _, err := view(t, s, 2, 3).Leader(ctx); err != nil {
		t.Fatalf("a new view after a view was closed: %v", err)
	}
}

// testShardBad: a shard number outside [0, shards) or a count outside
// [1, MaxShards] is an error, not a view.
func testShardBad(t *testing.T, _ Harness, s onetick.Sharder) {
	for _, c := range [][2]int{{3, 3}, {-1, 3}, {0, 0}, {0, onetick.MaxShards + 1}} {
		if v, err := s.Shard(c[0], c[1]); err == nil || v != nil {
			t.Errorf("Shard(%d, %d) = %v, %v; want an error", c[0], c[1], v, err)
		}
	}
}
