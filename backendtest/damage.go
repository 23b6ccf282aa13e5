package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// DamageKind names a way the state of a store can be damaged by an
// operator's mistake, a migration script or another application sharing
// the store.
type DamageKind int

const (
	LeaseWrongType      DamageKind = iota + 1 // the lease key holds another type
	LeaseGarbage                              // the lease holds a value that is not "holder|epoch"
	LeaseNoExpiry                             // a well-formed lease without expiry
	EpochWrongType                            // the epoch counter holds another type
	EpochGarbage                              // the epoch counter is not an integer
	EpochDeleted                              // the epoch counter is gone
	HistoryGarbageEntry                       // one history entry is not a term
	HistoryWrongType                          // the history holds another type
	HistoryDeleted                            // the history is gone
	LastWrongType                             // the last-fired slots as a whole hold another type
	LastDeleted                               // the last-fired slots are gone
	LastFieldGarbage                          // one job's last-fired slot (Damage.Job) does not parse
	StreamWrongType                           // a job's stream (Damage.Stream) holds another type
	RecordsWrongType                          // the tick records of Damage.Slot hold another type
	EpochRolledBack                           // the epoch counter lost increments (a failover to a lagging replica)
	PausedWrongType                           // the pause controls as a whole hold another type
	PausedFieldGarbage                        // one job's (Damage.Job) pause intervals do not parse
)

var damageNames = map[DamageKind]string{
	LeaseWrongType: "LeaseWrongType", LeaseGarbage: "LeaseGarbage", LeaseNoExpiry: "LeaseNoExpiry",
	EpochWrongType: "EpochWrongType", EpochGarbage: "EpochGarbage", EpochDeleted: "EpochDeleted",
	HistoryGarbageEntry: "HistoryGarbageEntry", HistoryWrongType: "HistoryWrongType", HistoryDeleted: "HistoryDeleted",
	LastWrongType: "LastWrongType", LastDeleted: "LastDeleted", LastFieldGarbage: "LastFieldGarbage",
	StreamWrongType: "StreamWrongType", RecordsWrongType: "RecordsWrongType",
	PausedWrongType: "PausedWrongType", PausedFieldGarbage: "PausedFieldGarbage", EpochRolledBack: "EpochRolledBack",
}

func (k DamageKind) String() string {
	if n, ok := damageNames[k]; ok {
		return n
	}
	return fmt.Sprintf("DamageKind(%d)", int(k))
}

// Damage is one damage to apply.
type Damage struct {
	Kind   DamageKind
	Job    string       // LastFieldGarbage
	Stream string       // StreamWrongType
	Slot   onetick.Slot // RecordsWrongType
}

var damageTests = []struct {
	name string
	fn   func(t *testing.T, h Harness, b onetick.Backend)
}{
	{"DamageStreamIsolated", testDamageStreamIsolated},
	{"DamageLastFieldIsolated", testDamageLastField},
	{"DamageLastWhole", testDamageLastWhole},
	{"DamageRecords", testDamageRecords},
	{"DamageLease", testDamageLease},
	{"DamageEpoch", testDamageEpoch},
	{"DamageHistory", testDamageHistory},
	{"DamageWhileRunning", testDamageWhileRunning},
	{"ClaimFuzzDamage", testClaimFuzzDamage},
}

// fresh returns a new backend for a subtest, closed at its end.
func fresh(t *testing.T, h Harness) onetick.Backend {
	b := h.New(t)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func damage(t *testing.T, h Harness, b onetick.Backend, d Damage) {
	t.Helper()
	if h.Damage == nil || !h.Damage(t, b, d) {
		t.Skipf("this backend cannot hold damage %s", d.Kind)
	}
}

// streamIDs returns the tick ids in a stream, failing on a tick id that
// appears twice.
func streamIDs(t *testing.T, h Harness, b onetick.Backend, stream string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for _, r := range h.Stream(t, b, stream) {
		if ids[r.Tick] {
			t.Fatalf("tick %s appears twice in stream %s", r.Tick, stream)
		}
		ids[r.Tick] = true
	}
	return ids
}

func wantDamage(t *testing.T, err error, key string) *onetick.DamageError {
	t.Helper()
	var d *onetick.DamageError
	if !errors.As(err, &d) || !errors.Is(err, onetick.ErrDamaged) {
		t.Fatalf("got %v, want a *DamageError naming %s", err, key)
	}
	if key != "" && d.Key != key {
		t.Fatalf("damage names key %q, want %q (%v)", d.Key, key, d)
	}
	return d
}

// inspectFinds asserts Inspect reports a damage of key (and field).
func inspectFinds(t *testing.T, b onetick.Backend, streams map[string]string, key, field string) *onetick.DamageError {
	t.Helper()
	found, err := b.Inspect(ctxT(t), streams)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	for _, d := range found {
		if d.Key == key && d.Field == field {
			return d
		}
	}
	t.Fatalf("inspect found %v, want a damage of %s %s", found, key, field)
	return nil
}

func inspectClean(t *testing.T, b onetick.Backend, streams map[string]string) {
	t.Helper()
	found, err := b.Inspect(ctxT(t), streams)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if len(found) != 0 {
		t.Fatalf("inspect after repair found %v, want nothing", found)
	}
}

// testDamageStreamIsolated: jobs a, b, c claimed in one batch, b's stream
// holding another type. a and c are claimed, b is Broken naming its
// stream, and retries of the same claim never append a or c again.
func testDamageStreamIsolated(t *testing.T, h Harness, b onetick.Backend) {
	s := pastSlot(time.Second, time.Second)
	damage(t, h, b, Damage{Kind: StreamWrongType, Stream: sk("x:b")})
	l := mustAcquire(t, b, "a", 30*time.Second)
	batch := []onetick.Tick{tick("a", s, sk("x:a")), tick("b", s, sk("x:b")), tick("c", s, sk("x:c"))}
	for attempt := 0; attempt < 3; attempt++ {
		res, err := b.Claim(ctxT(t), l, batch)
		if err != nil {
			t.Fatalf("claim %d: %v", attempt, err)
		}
		o := res.Outcomes
		if o[0] != onetick.Claimed || o[1] != onetick.Broken || o[2] != onetick.Claimed {
			t.Fatalf("claim %d: outcomes %v, want claimed, broken, claimed", attempt, o)
		}
		d := res.Damaged[1]
		if d == nil || d.Key != sk("x:b") || d.Job != "b" || d.Repairable {
			t.Fatalf("claim %d: damage %+v, want x:b of job b, not repairable by onetick", attempt, d)
		}
		if len(res.Damaged) != 1 {
			t.Fatalf("claim %d: %d damages, want 1", attempt, len(res.Damaged))
		}
	}
	for _, st := range []string{sk("x:a"), sk("x:c")} {
		if n := len(streamIDs(t, h, b, st)); n != 1 {
			t.Fatalf("stream %s has %d entries after three claims of one tick, want 1", st, n)
		}
	}
	last, err := b.LastFired(ctxT(t), []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if last["a"] != s || last["c"] != s {
		t.Fatalf("last fired %v, want a and c at %s", last, s)
	}
	if _, ok := last["b"]; ok {
		t.Fatalf("b's last-fired slot moved although its tick was not appended: %v", last)
	}
	streams := map[string]string{"a": sk("x:a"), "b": sk("x:b"), "c": sk("x:c")}
	d := inspectFinds(t, b, streams, sk("x:b"), "")
	if _, err := b.Repair(ctxT(t), d, true); !errors.Is(err, onetick.ErrNotRepairable) {
		t.Fatalf("repair of a job's stream: %v, want ErrNotRepairable (onetick does not touch streams)", err)
	}
	h.Fix(t, b, Damage{Kind: StreamWrongType, Stream: sk("x:b")})
	if o := mustClaim(t, b, l, batch...); o[0] != onetick.Claimed || o[1] != onetick.Claimed || o[2] != onetick.Claimed {
		t.Fatalf("after the fix: %v, want all claimed (b now, a and c as this term's retry)", o)
	}
	for _, st := range []string{sk("x:a"), sk("x:b"), sk("x:c")} {
		if n := len(streamIDs(t, h, b, st)); n != 1 {
			t.Fatalf("stream %s has %d entries, want 1", st, n)
		}
	}
	inspectClean(t, b, streams)
}

// testDamageLastField: one job's last-fired slot does not parse. The
// others are read and claimed normally; the damaged job's in-order ticks
// are Broken (no guess at its position), out-of-order ones are still
// deduplicated by their record; Repair moves the field aside.
func testDamageLastField(t *testing.T, h Harness, b onetick.Backend) {
	s := pastSlot(2*time.Second, time.Second)
	l := mustAcquire(t, b, "a", 30*time.Second)
	mustClaim(t, b, l, tick("a", s, sk("y")), tick("b", s, sk("y")), tick("c", s, sk("y")))
	damage(t, h, b, Damage{Kind: LastFieldGarbage, Job: "b"})
	last, err := b.LastFired(ctxT(t), []string{"a", "b", "c"})
	ds := onetick.Damages(err)
	if len(ds) != 1 || ds[0].Job != "b" || ds[0].Field != "b" || !errors.Is(err, onetick.ErrDamaged) {
		t.Fatalf("last fired: %v, want one damage naming job b", err)
	}
	if last["a"] != s || last["c"] != s || len(last) != 2 {
		t.Fatalf("last fired %v, want a and c at %s and no b", last, s)
	}
	n := s + 1000
	res, err := b.Claim(ctxT(t), l, []onetick.Tick{tick("a", n, sk("y")), tick("b", n, sk("y")), tick("c", n, sk("y"))})
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Outcomes; o[0] != onetick.Claimed || o[1] != onetick.Broken || o[2] != onetick.Claimed {
		t.Fatalf("outcomes %v, want claimed, broken, claimed", o)
	}
	if d := res.Damaged[1]; d == nil || d.Field != "b" || d.Job != "b" {
		t.Fatalf("damage %+v, want the field of b", d)
	}
	// A manual tick does not depend on the last-fired slot.
	ooo := tick("b", s-5000, sk("y"))
	ooo.OutOfOrder = true
	if o := mustClaim(t, b, l, ooo); o[0] != onetick.Claimed {
		t.Fatalf("out-of-order tick of the damaged job: %v, want claimed", o)
	}
	d := inspectFinds(t, b, map[string]string{"a": sk("y"), "b": sk("y"), "c": sk("y")}, d0Key(res), "b")
	if !d.Repairable {
		t.Fatalf("a last-fired field should be repairable: %+v", d)
	}
	if _, err := b.Repair(ctxT(t), d, false); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if _, err := b.Repair(ctxT(t), d, false); err == nil {
		t.Fatal("a second repair of the same damage succeeded; want 'no longer there'")
	}
	if o := mustClaim(t, b, l, tick("b", n, sk("y"))); o[0] != onetick.Claimed {
		t.Fatalf("after repair: %v, want claimed", o)
	}
	ids := streamIDs(t, h, b, sk("y"))
	if len(ids) != 7 {
		t.Fatalf("stream has %d entries, want 7 (3 + a, c + the manual tick + b)", len(ids))
	}
	inspectClean(t, b, map[string]string{"a": sk("y"), "b": sk("y"), "c": sk("y")})
}

func storeMs(t *testing.T, b onetick.Backend) int64 {
	now, err := b.Time(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

func d0Key(res onetick.ClaimResult) string {
	for _, d := range res.Damaged {
		return d.Key
	}
	return ""
}

// testDamageLastWhole: the last-fired state as a whole holds another
// type. Reading it and claiming fail loudly with a *DamageError and write
// nothing, however often retried; once repaired, claims proceed.
func testDamageLastWhole(t *testing.T, h Harness, b onetick.Backend) {
	s := pastSlot(time.Second, time.Second)
	l := mustAcquire(t, b, "a", 30*time.Second)
	damage(t, h, b, Damage{Kind: LastWrongType})
	_, err := b.LastFired(ctxT(t), []string{"a"})
	d := wantDamage(t, err, "")
	if d.Field != "" || !d.Repairable {
		t.Fatalf("damage %+v, want the whole key, repairable", d)
	}
	for attempt := 0; attempt < 3; attempt++ {
		_, err := b.Claim(ctxT(t), l, []onetick.Tick{tick("a", s, sk("w")), tick("b", s, sk("w"))})
		wantDamage(t, err, d.Key)
	}
	if n := len(streamIDs(t, h, b, sk("w"))); n != 0 {
		t.Fatalf("stream has %d entries after refused claims, want 0", n)
	}
	found := inspectFinds(t, b, map[string]string{"a": sk("w")}, d.Key, "")
	if _, err := b.Repair(ctxT(t), found, false); err != nil {
		t.Fatalf("repair: %v", err)
	}
	if o := mustClaim(t, b, l, tick("a", s, sk("w")), tick("b", s, sk("w"))); o[0] != onetick.Claimed || o[1] != onetick.Claimed {
		t.Fatalf("after repair: %v", o)
	}
	if n := len(streamIDs(t, h, b, sk("w"))); n != 2 {
		t.Fatalf("stream has %d entries, want 2", n)
	}
}

// testDamageRecords: the tick records of one slot's bucket hold another
// type: that slot's ticks are Broken (whether they were claimed is
// unknown), other slots are claimed.
func testDamageRecords(t *testing.T, h Harness, b onetick.Backend) {
	s := pastSlot(2*time.Minute, time.Minute)
	damage(t, h, b, Damage{Kind: RecordsWrongType, Slot: s})
	l := mustAcquire(t, b, "a", 30*time.Second)
	res, err := b.Claim(ctxT(t), l, []onetick.Tick{tick("a", s, sk("r")), tick("a", s+onetick.Slot(time.Minute.Milliseconds()), sk("r"))})
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Outcomes; o[0] != onetick.Broken || o[1] != onetick.Claimed {
		t.Fatalf("outcomes %v, want broken, claimed", o)
	}
	if n := len(streamIDs(t, h, b, sk("r"))); n != 1 {
		t.Fatalf("stream has %d entries, want 1", n)
	}
	d := inspectFinds(t, b, map[string]string{"a": sk("r")}, res.Damaged[0].Key, "")
	if _, err := b.Repair(ctxT(t), d, false); err != nil {
		t.Fatalf("repair: %v", err)
	}
	inspectClean(t, b, map[string]string{"a": sk("r")})
}

// testDamageLease: a lease key of another type, a value that is not a
// lease, and a lease that never expires. Nobody can acquire (a
// *DamageError, not "held"), the holder's renew and claim are refused, and
// Repair (with confirmation for the no-expiry case) lets a replica lead
// again with a larger epoch.
func testDamageLease(t *testing.T, h Harness, _ onetick.Backend) {
	for _, k := range []DamageKind{LeaseWrongType, LeaseGarbage, LeaseNoExpiry} {
		t.Run(k.String(), func(t *testing.T) {
			b := fresh(t, h)
			ctx := ctxT(t)
			a := mustAcquire(t, b, "a", 30*time.Second)
			damage(t, h, b, Damage{Kind: k})
			_, err := b.Acquire(ctx, "b", 30*time.Second)
			d := wantDamage(t, err, "")
			if errors.Is(err, onetick.ErrLeaseHeld) {
				t.Fatalf("acquire: %v, a damaged lease must not look held", err)
			}
			if _, err := b.Leader(ctx); !errors.Is(err, onetick.ErrDamaged) {
				t.Fatalf("leader: %v, want ErrDamaged", err)
			}
			if _, err := b.Renew(ctx, a, 30*time.Second); !errors.Is(err, onetick.ErrLeaseLost) {
				t.Fatalf("renew by the holder: %v, want ErrLeaseLost", err)
			}
			if _, err := b.Claim(ctx, a, []onetick.Tick{tick("j", pastSlot(time.Second, time.Second), sk("l"))}); !errors.Is(err, onetick.ErrFenced) {
				t.Fatalf("claim by the holder: %v, want ErrFenced", err)
			}
			found := inspectFinds(t, b, nil, d.Key, "")
			if k == LeaseNoExpiry {
				if _, err := b.Repair(ctx, found, false); !errors.Is(err, onetick.ErrNotRepairable) {
					t.Fatalf("unconfirmed repair of a lease without expiry: %v, want ErrNotRepairable", err)
				}
			}
			if _, err := b.Repair(ctx, found, true); err != nil {
				t.Fatalf("repair: %v", err)
			}
			c := mustAcquire(t, b, "c", 30*time.Second)
			if c.Epoch <= a.Epoch {
				t.Fatalf("epoch after repair %d, want more than %d", c.Epoch, a.Epoch)
			}
			inspectClean(t, b, nil)
		})
	}
}

// testDamageEpoch: an epoch counter of another type or value refuses
// acquisition loudly; a deleted one does not matter: epochs never repeat
// or go backwards, the history and the clock give a floor.
func testDamageEpoch(t *testing.T, h Harness, _ onetick.Backend) {
	for _, k := range []DamageKind{EpochWrongType, EpochGarbage, EpochDeleted, EpochRolledBack} {
		t.Run(k.String(), func(t *testing.T) {
			b := fresh(t, h)
			ctx := ctxT(t)
			a := mustAcquire(t, b, "a", 30*time.Second)
			if err := b.Release(ctx, a); err != nil {
				t.Fatal(err)
			}
			damage(t, h, b, Damage{Kind: k})
			if k != EpochDeleted && k != EpochRolledBack {
				_, err := b.Acquire(ctx, "b", 30*time.Second)
				d := wantDamage(t, err, "")
				found := inspectFinds(t, b, nil, d.Key, "")
				if _, err := b.Repair(ctx, found, false); err != nil {
					t.Fatalf("repair: %v", err)
				}
			}
			c := mustAcquire(t, b, "c", 30*time.Second)
			if c.Epoch <= a.Epoch {
				t.Fatalf("epoch %d after %s, want more than %d", c.Epoch, k, a.Epoch)
			}
			inspectClean(t, b, nil)
		})
	}
	t.Run("EpochAndHistoryLost", func(t *testing.T) {
		b := fresh(t, h)
		a := mustAcquire(t, b, "a", 30*time.Second)
		if err := b.Release(ctxT(t), a); err != nil {
			t.Fatal(err)
		}
		// A failover to a replica that had neither the increment nor the
		// term: the counter back at 1, the history gone.
		damage(t, h, b, Damage{Kind: EpochRolledBack})
		damage(t, h, b, Damage{Kind: HistoryDeleted})
		// The clock's floor is in milliseconds: it holds for an epoch
		// issued at least a millisecond before the counter was lost.
		for st := storeMs(t, b); storeMs(t, b) <= st; {
		}
		if c := mustAcquire(t, b, "c", 30*time.Second); c.Epoch <= a.Epoch {
			t.Fatalf("epoch %d with no counter and no history, want more than %d (the clock's floor)", c.Epoch, a.Epoch)
		}
	})
}

// testDamageHistory: the history is auxiliary. A damaged entry or a
// history of another type never prevents acquiring, renewing, releasing
// or claiming; the damage is reported with the grant and by History.
func testDamageHistory(t *testing.T, h Harness, _ onetick.Backend) {
	for _, k := range []DamageKind{HistoryGarbageEntry, HistoryWrongType} {
		t.Run(k.String(), func(t *testing.T) {
			b := fresh(t, h)
			ctx := ctxT(t)
			a := mustAcquire(t, b, "a", 30*time.Second)
			if err := b.Release(ctx, a); err != nil {
				t.Fatal(err)
			}
			damage(t, h, b, Damage{Kind: k})
			g, err := b.Acquire(ctx, "b", 30*time.Second)
			if err != nil {
				t.Fatalf("acquire with a damaged history: %v", err)
			}
			if g.Damage == nil || g.Lease.Epoch <= a.Epoch {
				t.Fatalf("grant %+v: want the history's damage reported and an epoch above %d", g, a.Epoch)
			}
			if _, err := b.Renew(ctx, g.Lease, 30*time.Second); err != nil {
				t.Fatalf("renew: %v", err)
			}
			if o := mustClaim(t, b, g.Lease, tick("j", pastSlot(time.Second, time.Second), sk("hs"))); o[0] != onetick.Claimed {
				t.Fatalf("claim: %v", o)
			}
			terms, err := b.History(ctx, 10)
			if !errors.Is(err, onetick.ErrDamaged) {
				t.Fatalf("history: %v, want the damage reported", err)
			}
			if k == HistoryGarbageEntry && (len(terms) != 2 || terms[0].Epoch != g.Lease.Epoch || terms[1].Epoch != a.Epoch) {
				t.Fatalf("history %+v: want the two readable terms around the damaged entry", terms)
			}
			if err := b.Release(ctx, g.Lease); err != nil {
				t.Fatalf("release: %v", err)
			}
			// A stale holder's claim is still fenced.
			if _, err := b.Claim(ctx, a, []onetick.Tick{tick("j", pastSlot(time.Second, time.Second), sk("hs"))}); !errors.Is(err, onetick.ErrFenced) {
				t.Fatalf("stale claim: %v, want ErrFenced", err)
			}
			found, err := b.Inspect(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range found {
				if _, err := b.Repair(ctx, d, false); err != nil {
					t.Fatalf("repair %+v: %v", d, err)
				}
			}
			if _, err := b.History(ctx, 10); err != nil {
				t.Fatalf("history after repair: %v", err)
			}
			c := mustAcquire(t, b, "c", 30*time.Second)
			if c.Epoch <= g.Lease.Epoch {
				t.Fatalf("epoch %d after repair, want more than %d", c.Epoch, g.Lease.Epoch)
			}
		})
	}
}
