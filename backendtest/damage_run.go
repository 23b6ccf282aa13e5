package backendtest

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
)

// eventually waits until cond holds, checking every 10ms for up to 20s:
// for state the engine exposes without a signal (readiness, gauges).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testDamageWhileRunning damages the store under a running leader with
// jobs a, b and c (every 100ms, prefer duplicate), then repairs it by
// hand. In every case: no tick is appended twice, the jobs whose state is
// intact keep firing without a gap, and the damaged one is reported and
// fires every slot again once repaired.
func testDamageWhileRunning(t *testing.T, h Harness, _ onetick.Backend) {
	const step = 100
	cases := []struct {
		d Damage
		// stops says which jobs the damage stops: "b" alone, or "all".
		stops string
	}{
		{Damage{Kind: StreamWrongType, Stream: sk("run:b")}, "b"},
		{Damage{Kind: LastFieldGarbage, Job: "b"}, "b"},
		{Damage{Kind: LastWrongType}, "all"},
		{Damage{Kind: LastDeleted}, ""},
		{Damage{Kind: EpochDeleted}, ""},
		{Damage{Kind: HistoryGarbageEntry}, ""},
		{Damage{Kind: HistoryWrongType}, ""},
		{Damage{Kind: LeaseWrongType}, "all"},
		{Damage{Kind: LeaseGarbage}, "all"},
	}
	for _, tc := range cases {
		t.Run(tc.d.Kind.String(), func(t *testing.T) {
			b := fresh(t, h)
			rec := newRecorder()
			var jobs []onetick.Job
			for _, n := range []string{"a", "b", "c"} {
				jobs = append(jobs, onetick.Job{Name: n, Schedule: every(t, "@every 100ms"), Prefer: onetick.PreferDuplicate,
					Stream: sk("run:" + n), MaxCatchup: 1000})
			}
			cfg := onetick.Config{Backend: b, Replica: "r1", Lease: fastLease, Sink: rec, Jobs: jobs}
			r := startScheduler(t, cfg)
			start := onetick.SlotOf(time.Now())
			for _, j := range jobs {
				rec.waitSlot(t, j.Name, start+step)
			}
			damage(t, h, b, tc.d)
			mark := onetick.SlotOf(time.Now())
			m := r.s.Metrics()
			switch tc.stops {
			case "b":
				// a and c go on; b is refused, counted and named.
				rec.waitSlot(t, "a", mark+5*step)
				rec.waitSlot(t, "c", mark+5*step)
				if got := testutil.ToFloat64(m.BrokenJobs); got != 1 {
					t.Fatalf("scheduler_broken_jobs %v, want 1", got)
				}
				got := testutil.ToFloat64(m.JobBrokenTicks.WithLabelValues("b"))
				if got < 3 {
					t.Fatalf("broken ticks of b %v, want at least 3", got)
				}
				if total := testutil.ToFloat64(m.BrokenTicks); total < got {
					t.Fatalf("fleet total of broken ticks %v, below b's %v", total, got)
				}
				if r.s.Ready() != nil {
					t.Fatalf("one job's damage made the replica unready: %v", r.s.Ready())
				}
			case "all":
				eventually(t, "the damage is reported as blocking", func() bool { return r.s.Ready() != nil })
				if !errors.Is(r.s.Ready(), onetick.ErrDamaged) {
					t.Fatalf("ready: %v, want ErrDamaged", r.s.Ready())
				}
			default:
				rec.waitSlot(t, "a", mark+5*step)
			}
			if tc.d.Kind == EpochDeleted || tc.d.Kind == HistoryGarbageEntry || tc.d.Kind == HistoryWrongType {
				// A leadership change over the damaged state.
				r.stop()
				cfg.Replica = "r2"
				r = startScheduler(t, cfg)
				again := onetick.SlotOf(time.Now())
				for _, j := range jobs {
					rec.waitSlot(t, j.Name, again+step)
				}
			} else {
				h.Fix(t, b, tc.d)
			}
			fixed := onetick.SlotOf(time.Now())
			for _, j := range jobs {
				rec.waitSlot(t, j.Name, fixed+3*step)
			}
			if tc.stops == "b" {
				eventually(t, "b is no longer broken", func() bool { return testutil.ToFloat64(m.BrokenJobs) == 0 })
			}
			if tc.stops == "all" {
				eventually(t, "the replica is ready again", func() bool { return r.s.Ready() == nil })
			}
			r.stop()
			var epochs []onetick.Epoch
			for _, j := range jobs {
				recs := h.Stream(t, b, sk("run:"+j.Name))
				slots := checkContiguous(t, recs, j.Name, step)
				if slots[len(slots)-1] < fixed+3*step {
					t.Fatalf("job %s stopped at %s", j.Name, slots[len(slots)-1])
				}
				for _, x := range recs {
					if n := len(epochs); n == 0 || epochs[n-1] != x.Epoch {
						epochs = append(epochs, x.Epoch)
					}
				}
			}
			if tc.d.Kind == EpochDeleted && !(len(epochs) >= 2 && epochs[len(epochs)-1] > epochs[0]) {
				t.Fatalf("epochs %v: the leader after the deleted counter must have a larger epoch", epochs)
			}
		})
	}
}

// testClaimFuzzDamage runs ClaimFuzz with fixed seeds.
func testClaimFuzzDamage(t *testing.T, h Harness, _ onetick.Backend) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			b := fresh(t, h)
			ClaimFuzz(t, h, b, seed, 60)
		})
	}
}

// ClaimFuzz claims random batches through two alternating leaders, with
// random damage applied and repaired between claims, retries of earlier
// batches and claims by superseded leaders, and checks after each step:
// no tick id is ever appended twice; a tick answered Claimed is in its
// stream; a tick answered Broken or Early was not appended by that
// claim; a job's last-fired slot never moves backwards; a claim by a
// superseded leader writes nothing. Backends call it from a Go fuzz
// target with the seed as input.
func ClaimFuzz(t *testing.T, h Harness, b onetick.Backend, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	jobs := []string{"f0", "f1", "f2", "f3"}
	streams := []string{sk("fz:0"), sk("fz:1"), sk("fz:2")}
	streamOf := func(j string) string { return streams[int(j[1]-'0')%len(streams)] }
	base := pastSlot(10*time.Minute, time.Minute)
	cur := mustAcquire(t, b, "L0", time.Minute)
	var stale []onetick.Lease
	var prev [][]onetick.Tick
	lastSeen := map[string]onetick.Slot{}
	active := map[DamageKind]Damage{}
	canDamage := map[DamageKind]bool{}
	// snapshot counts every tick id over all streams.
	snapshot := func() map[string]int {
		ids := map[string]int{}
		for _, s := range streams {
			for _, r := range h.Stream(t, b, s) {
				ids[r.Tick]++
				if ids[r.Tick] > 1 {
					t.Fatalf("tick %s appended twice", r.Tick)
				}
			}
		}
		return ids
	}
	for step := 0; step < steps; step++ {
		before := snapshot()
		switch op := rng.IntN(10); {
		case op < 2 && len(active) < 3:
			kinds := []DamageKind{StreamWrongType, LastFieldGarbage, LastWrongType, RecordsWrongType, HistoryGarbageEntry}
			k := kinds[rng.IntN(len(kinds))]
			if _, on := active[k]; on {
				continue
			}
			// One damage per key at a time: restoring one must not undo
			// or overwrite the other.
			_, whole := active[LastWrongType]
			_, field := active[LastFieldGarbage]
			if (k == LastFieldGarbage && whole) || (k == LastWrongType && field) {
				continue
			}
			d := Damage{Kind: k, Job: jobs[rng.IntN(len(jobs))], Stream: streams[rng.IntN(len(streams))],
				Slot: base + onetick.Slot(rng.IntN(5))*60000}
			if ok, known := canDamage[k]; known && !ok {
				continue
			}
			ok := h.Damage(t, b, d)
			canDamage[k] = ok
			if ok {
				active[k] = d
			}
		case op < 4 && len(active) > 0:
			for k, d := range active {
				h.Fix(t, b, d)
				delete(active, k)
				break
			}
		case op < 5:
			// A leadership change: the old leader becomes stale.
			if err := b.Release(ctxT(t), cur); err != nil {
				t.Fatalf("release: %v", err)
			}
			stale = append(stale, cur)
			cur = mustAcquire(t, b, "L"+strconv.Itoa(step), time.Minute)
		case op < 6 && len(stale) > 0:
			l := stale[rng.IntN(len(stale))]
			batch := randomBatch(rng, jobs, streamOf, base)
			if _, err := b.Claim(ctxT(t), l, batch); !errors.Is(err, onetick.ErrFenced) {
				t.Fatalf("claim by superseded leader %+v: %v, want ErrFenced", l, err)
			}
			if after := snapshot(); len(after) != len(before) {
				t.Fatalf("a fenced claim appended %d entries", len(after)-len(before))
			}
		default:
			batch := randomBatch(rng, jobs, streamOf, base)
			if len(prev) > 0 && rng.IntN(3) == 0 {
				batch = prev[rng.IntN(len(prev))] // a retry
			}
			prev = append(prev, batch)
			res, err := b.Claim(ctxT(t), cur, batch)
			after := snapshot()
			if err != nil {
				if !errors.Is(err, onetick.ErrDamaged) {
					t.Fatalf("claim: %v", err)
				}
				if len(after) != len(before) {
					t.Fatalf("a claim that failed (%v) appended %d entries", err, len(after)-len(before))
				}
				break
			}
			for i, o := range res.Outcomes {
				id := batch[i].ID()
				switch o {
				case onetick.Claimed:
					if after[id] != 1 {
						t.Fatalf("tick %s answered claimed but is not in its stream", id)
					}
				case onetick.Broken, onetick.Early:
					if before[id] == 0 && after[id] != 0 {
						t.Fatalf("tick %s answered %s but was appended", id, o)
					}
					if o == onetick.Broken && res.Damaged[i] == nil {
						t.Fatalf("tick %s broken without a damage", id)
					}
				}
			}
		}
		last, err := b.LastFired(ctxT(t), jobs)
		if err != nil && !errors.Is(err, onetick.ErrDamaged) {
			t.Fatalf("last fired: %v", err)
		}
		for j, s := range last {
			if s < lastSeen[j] {
				t.Fatalf("last-fired slot of %s moved back from %s to %s", j, lastSeen[j], s)
			}
			lastSeen[j] = s
		}
	}
}

// randomBatch returns up to 6 ticks of random jobs, each job's slots in
// increasing order (as the scheduler sends them), some out of order
// (manual ticks) and some in the future.
func randomBatch(rng *rand.Rand, jobs []string, streamOf func(string) string, base onetick.Slot) []onetick.Tick {
	var out []onetick.Tick
	for _, j := range jobs {
		if rng.IntN(2) == 0 {
			continue
		}
		s := base + onetick.Slot(rng.IntN(20))*15000
		for n := rng.IntN(3); n >= 0; n-- {
			t := onetick.Tick{Job: j, Slot: s, Stream: streamOf(j), Payload: "{}", Retention: time.Hour}
			switch rng.IntN(8) {
			case 0:
				t.OutOfOrder = true
			case 1:
				t.Slot = onetick.SlotOf(time.Now().Add(time.Hour)) // early
			}
			out = append(out, t)
			s += onetick.Slot(1+rng.IntN(3)) * 15000
		}
	}
	return out
}
