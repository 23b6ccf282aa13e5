package backendtest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// Shards runs the suite of a store that shards (onetick.Sharder,
// docs/shards.md): what a shard's view adds to the Backend contract.
// Exercise, run on a view, checks that a view obeys the contract on its
// own; Shards checks that views do not see each other: a lease of one
// shard neither blocks nor fences another, history is per shard, and a
// view reads back the last-fired slots, tick and trigger records,
// controls and ledger of its jobs and lists only its own (per shard, or
// shared and filtered by onetick.ShardOf: Harness.SharedJobState); and
// that shard 0 of 1 is the store itself. h.New returns the store (not a
// view); Expire and Stream must work on a view too.
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

// jobIn returns a job name that onetick.ShardOf puts in shard n of
// shards: base followed by the smallest number that does.
func jobIn(base string, n, shards int) string {
	for i := 0; ; i++ {
		if j := base + strconv.Itoa(i); onetick.ShardOf(j, shards) == n {
			return j
		}
	}
}

// testShardStatePerShard: last-fired slots, tick records, trigger records
// and the ledger of a view's own jobs (onetick.ShardOf) are read back
// through that view. Where each shard keeps its own job state, what one
// shard wrote is not read by another or by the store, and the same tick
// claimed on two shards is Claimed on both (in use a job is in one shard
// only; this shows the records do not meet). Where the state is shared
// (Harness.SharedJobState), the store reads what a view wrote.
func testShardStatePerShard(t *testing.T, h Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	b := s.(onetick.Backend)
	v1, v2 := view(t, s, 1, 3), view(t, s, 2, 3)
	j1, j2 := jobIn("j", 1, 3), jobIn("j", 2, 3)
	l1 := mustAcquire(t, v1, "a", 30*time.Second)
	l2 := mustAcquire(t, v2, "b", 30*time.Second)
	early := pastSlot(2*time.Minute, time.Minute)
	late := early + onetick.Slot(time.Minute/time.Millisecond)
	if o := mustClaim(t, v1, l1, tick(j1, late, vs(v1, "state1"))); o[0] != onetick.Claimed {
		t.Fatalf("shard 1: %v", o)
	}
	if o := mustClaim(t, v2, l2, tick(j2, early, vs(v2, "state2")), tick(j2, late, vs(v2, "state2"))); o[0] != onetick.Claimed || o[1] != onetick.Claimed {
		t.Fatalf("shard 2, two slots of its job: %v, want both Claimed", o)
	}
	for _, c := range []struct {
		v    onetick.Backend
		job  string
		slot onetick.Slot
	}{{v1, j1, late}, {v2, j2, late}} {
		if last, err := c.v.LastFired(ctx, []string{c.job}); err != nil || last[c.job] != c.slot {
			t.Fatalf("last-fired slots of %s through its shard: %v, %v; want %v", c.job, last, err, c.slot)
		}
	}
	last, err := b.LastFired(ctx, []string{j1, j2})
	if want := map[bool]int{false: 0, true: 2}[h.SharedJobState]; err != nil || len(last) != want {
		t.Fatalf("the store's last-fired slots %v, %v; want %d (shared job state: %v)", last, err, want, h.SharedJobState)
	}
	if n := len(h.Stream(t, v1, vs(v1, "state1"))); n != 1 {
		t.Fatalf("shard 1's stream holds %d entries, want 1", n)
	}
	if n := len(h.Stream(t, v2, vs(v2, "state2"))); n != 2 {
		t.Fatalf("shard 2's stream holds %d entries, want 2", n)
	}
	// Triggers: a trigger's record (its idempotency key) is read back
	// through the job's shard.
	for i, c := range []struct {
		v   onetick.Backend
		job string
	}{{v1, j1}, {v1, j1}, {v2, j2}} {
		tr := onetick.Tick{Job: c.job, Key: "req-1", Payload: `{}`, Retention: time.Hour, Stream: vs(c.v, "trigger")}
		res, err := c.v.Enqueue(ctx, []onetick.Tick{tr}, alice)
		want := []onetick.Outcome{onetick.Claimed, onetick.Duplicate, onetick.Claimed}[i]
		if err != nil || res.Outcomes[0] != want {
			t.Fatalf("trigger %d: %+v, %v; want %v", i, res, err, want)
		}
	}
	// The ledger, where the store keeps one.
	lg1, ok1 := v1.(onetick.Ledger)
	lg2, ok2 := v2.(onetick.Ledger)
	lgb, okb := b.(onetick.Ledger)
	runs := func(lg onetick.Ledger, job string) int {
		p, err := lg.Runs(ctx, onetick.RunQuery{Job: job})
		if errors.Is(err, onetick.ErrLedgerOff) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Runs)
	}
	if ok1 && ok2 && okb {
		nb := map[bool]int{false: 0, true: 2}[h.SharedJobState]
		if n1, n2, n := runs(lg1, j1), runs(lg2, j2), runs(lgb, j1); n1 >= 0 && (n1 != 2 || n2 != 3 || n != nb) {
			t.Fatalf("ledger records: %s on shard 1 %d, %s on shard 2 %d, %s on the store %d; want 2 (a slot, a trigger), 3, %d",
				j1, n1, j2, n2, j1, n, nb)
		}
	}
	if h.SharedJobState {
		return
	}
	// One job on two shards: shard 1's last-fired slot (late) does not
	// make shard 2's earlier slot a Duplicate, nor does its tick record
	// the same tick.
	if o := mustClaim(t, v1, l1, tick("j", late, vs(v1, "same"))); o[0] != onetick.Claimed {
		t.Fatalf("shard 1: %v", o)
	}
	if o := mustClaim(t, v2, l2, tick("j", early, vs(v2, "same")), tick("j", late, vs(v2, "same"))); o[0] != onetick.Claimed || o[1] != onetick.Claimed {
		t.Fatalf("shard 2, the slot before and the tick shard 1 claimed: %v, want both Claimed", o)
	}
	if last, err := b.LastFired(ctx, []string{"j"}); err != nil || len(last) != 0 {
		t.Fatalf("the store's last-fired slots %v, %v; want none", last, err)
	}
	if n1, n2 := len(h.Stream(t, v1, vs(v1, "same"))), len(h.Stream(t, v2, vs(v2, "same"))); n1 != 1 || n2 != 2 {
		t.Fatalf("the shards' streams of one job hold %d and %d entries, want 1 and 2", n1, n2)
	}
	tr := onetick.Tick{Job: "j", Key: "req-1", Payload: `{}`, Retention: time.Hour}
	for i, v := range []onetick.Backend{v1, v1, v2} {
		tr.Stream = vs(v, "trigger")
		res, err := v.Enqueue(ctx, []onetick.Tick{tr}, alice)
		want := []onetick.Outcome{onetick.Claimed, onetick.Duplicate, onetick.Claimed}[i]
		if err != nil || res.Outcomes[0] != want {
			t.Fatalf("trigger %d of one job on two shards: %+v, %v; want %v", i, res, err, want)
		}
	}
	if ok1 && ok2 && okb {
		if n1, n2, nb := runs(lg1, "j"), runs(lg2, "j"), runs(lgb, "j"); n1 >= 0 && (n1 != 2 || n2 != 3 || nb != 0) {
			t.Fatalf("ledger records of j: shard 1 %d, shard 2 %d, store %d; want 2 (a slot, a trigger), 3, 0", n1, n2, nb)
		}
	}
}

// testShardControlsPerShard: a view lists the pauses and control log of
// its own jobs only, so that a reader merging every view's Controls and
// ControlLog sees each job once. Where each shard keeps its own job
// state, the controls' version is the shard's and a job paused on one
// shard is not paused on another.
func testShardControlsPerShard(t *testing.T, h Harness, s onetick.Sharder) {
	ctx := ctxT(t)
	b := s.(onetick.Backend)
	views := []onetick.Backend{view(t, s, 0, 3), view(t, s, 1, 3), view(t, s, 2, 3)}
	v1, v2 := views[1], views[2]
	j1, j2 := jobIn("j", 1, 3), jobIn("j", 2, 3)
	_, ver2, err := v2.Controls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Pause(ctx, j1, alice); err != nil {
		t.Fatal(err)
	}
	c1, ver1, err := v1.Controls(ctx)
	if err != nil || len(c1) != 1 || !c1[j1].Paused || ver1 == 0 {
		t.Fatalf("shard 1's controls %+v, version %d, %v; want %s paused", c1, ver1, err, j1)
	}
	others := []onetick.Backend{v2}
	if !h.SharedJobState {
		others = append(others, b) // a shared store's own listings hold every job
	}
	for _, v := range others {
		c, ver, err := v.Controls(ctx)
		if err != nil || len(c) != 0 || (!h.SharedJobState && ver != ver2) {
			t.Fatalf("controls of another shard: %+v, version %d, %v; want none, version %d", c, ver, err, ver2)
		}
		if log, err := v.ControlLog(ctx, 10); err != nil || len(log) != 0 {
			t.Fatalf("control log of another shard: %+v, %v; want empty", log, err)
		}
	}
	// Each view lists its own: merged, every paused job once.
	if _, err := v2.Pause(ctx, j2, alice); err != nil {
		t.Fatal(err)
	}
	paused := map[string]int{}
	logged := map[string]int{}
	for _, v := range views {
		c, _, err := v.Controls(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for job := range c {
			paused[job]++
		}
		log, err := v.ControlLog(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range log {
			logged[r.Job]++
		}
	}
	if len(paused) != 2 || paused[j1] != 1 || paused[j2] != 1 || len(logged) != 2 || logged[j1] != 1 || logged[j2] != 1 {
		t.Fatalf("merged over the views: controls of %v, log records of %v; want %s and %s once each", paused, logged, j1, j2)
	}
	if log, err := v1.ControlLog(ctx, 1); err != nil || len(log) != 1 || log[0].Job != j1 {
		t.Fatalf("shard 1's newest control record: %+v, %v; want %s's, though %s's is newer in the store", log, err, j1, j2)
	}
	if h.SharedJobState {
		return
	}
	// A job paused on shard 1 is not paused on shard 2.
	if _, err := v1.Pause(ctx, "j", alice); err != nil {
		t.Fatal(err)
	}
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
