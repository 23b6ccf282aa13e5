package chaos

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

var none []string

func TestCleanHistoryPasses(t *testing.T) {
	r := Check(clean().events())
	wantOnly(t, r, none, none)
	tt := r.Totals
	// 8 expected slots (t0+1s..t0+8s) of 3 jobs.
	if tt.SlotsExpected != 24 || tt.Enqueued != 24 || tt.RunsStarted != 8 || tt.RunsOK != 8 || tt.Acquired != 1 || tt.MaxEpoch != 7 {
		t.Fatalf("totals %+v", tt)
	}
	if r.Jobs[0].Completed != 8 || r.Jobs[0].Ran != 8 {
		t.Fatalf("dup: %+v", r.Jobs[0])
	}
	for _, j := range r.Jobs {
		if j.Expected != 8 || j.Missing != 0 {
			t.Errorf("job %s: %+v", j.Name, j)
		}
	}
}

func TestEnqueuedTwice(t *testing.T) {
	slot := ms(3 * time.Second)
	again := Event{T: at(3500 * time.Millisecond), Kind: KindEnqueue, Job: "miss", Slot: slot, Entry: "other-0", Epoch: 8}
	t.Run("another entry", func(t *testing.T) {
		r := Check(clean().add(again).events())
		wantOnly(t, r, []string{VEnqueuedTwice}, none)
		if v := r.Violations[0]; v.Job != "miss" || v.Slot != slot || !strings.Contains(v.Desc, "other-0") {
			t.Fatalf("violation %+v", v)
		}
	})
	t.Run("a trigger's tick id twice", func(t *testing.T) {
		h := clean().add(
			Event{T: at(4 * time.Second), Kind: KindEnqueue, Job: "miss", Tick: "miss:trigger:k1", Entry: "a"},
			Event{T: at(5 * time.Second), Kind: KindEnqueue, Job: "miss", Tick: "miss:trigger:k1", Entry: "b"})
		wantOnly(t, Check(h.events()), []string{VEnqueuedTwice}, none)
	})
	t.Run("the same entry seen again", func(t *testing.T) {
		seen := Event{T: at(3500 * time.Millisecond), Kind: KindEnqueue, Job: "miss", Slot: slot, Entry: itoa(slot) + "-0"}
		wantOnly(t, Check(clean().add(seen).events()), none, none)
	})
	t.Run("async loss across a failover is documented", func(t *testing.T) {
		h := clean().add(again, Event{T: at(3100 * time.Millisecond), Kind: KindFault, Fault: "failover", Phase: "start", Target: "store"},
			Event{T: at(3300 * time.Millisecond), Kind: KindFault, Fault: "failover", Phase: "end", Target: "store"})
		h.bounds.AsyncLoss = true
		r := Check(h.events())
		wantOnly(t, r, none, []string{VEnqueuedTwice})
		if r.Totals.Faults["failover"] != 1 {
			t.Fatalf("faults %v", r.Totals.Faults)
		}
	})
	t.Run("async loss without a failover between", func(t *testing.T) {
		h := clean().add(again, Event{T: at(5 * time.Second), Kind: KindFault, Fault: "failover", Phase: "start", Target: "store"},
			Event{T: at(5300 * time.Millisecond), Kind: KindFault, Fault: "failover", Phase: "end", Target: "store"})
		h.bounds.AsyncLoss = true
		wantOnly(t, Check(h.events()), []string{VEnqueuedTwice}, none)
	})
	t.Run("a failover without AsyncLoss", func(t *testing.T) {
		h := clean().add(again, Event{T: at(3100 * time.Millisecond), Kind: KindFault, Fault: "store-kill", Phase: "start", Target: "primary"})
		wantOnly(t, Check(h.events()), []string{VEnqueuedTwice}, none)
	})
}

// cutRun is dup's slot at t0+4s: its first run on r2 never ends, a
// second starts on r3 at t0+7s.
func cutRun(h *hist) *hist {
	slot := ms(4 * time.Second)
	h.drop(func(e Event) bool { return e.Kind == KindRunEnd && e.Slot == slot })
	return h.add(
		Event{T: at(7 * time.Second), Kind: KindRunStart, Job: "dup", Slot: slot, Attempt: 1, Worker: "r3", PID: 300},
		Event{T: at(7100 * time.Millisecond), Kind: KindRunEnd, Job: "dup", Slot: slot, Attempt: 1, Worker: "r3", PID: 300, OK: yes()})
}

func TestRunTwice(t *testing.T) {
	kill := func(name, target string) Event {
		return Event{T: at(5 * time.Second), Kind: KindFault, Fault: name, Phase: "start", Target: target}
	}
	t.Run("no fault", func(t *testing.T) {
		r := Check(cutRun(clean()).events())
		wantOnly(t, r, []string{VRunTwice}, none)
		if v := r.Violations[0]; v.Job != "dup" || v.Slot != ms(4*time.Second) || v.Replica != "r3" {
			t.Fatalf("violation %+v", v)
		}
	})
	for _, f := range []string{"kill9", "worker-kill", "term"} {
		t.Run("documented: "+f+" of its worker", func(t *testing.T) {
			r := Check(cutRun(clean()).add(kill(f, "r2")).events())
			wantOnly(t, r, none, none)
			if r.Totals.Reruns != 1 || r.Totals.Retries != 0 {
				t.Fatalf("totals %+v", r.Totals)
			}
		})
	}
	t.Run("documented: its command's pid killed", func(t *testing.T) {
		wantOnly(t, Check(cutRun(clean()).add(kill("worker-kill", "pid:104")).events()), none, none)
	})
	t.Run("documented: its worker stopped past the liveness TTL", func(t *testing.T) {
		h := cutRun(clean()).add(
			Event{T: at(3 * time.Second), Kind: KindFault, Fault: "stop", Phase: "start", Target: "r2"},
			Event{T: at(8 * time.Second), Kind: KindFault, Fault: "stop", Phase: "end", Target: "r2"})
		wantOnly(t, Check(h.events()), none, none)
	})
	t.Run("a kill of another replica", func(t *testing.T) {
		wantOnly(t, Check(cutRun(clean()).add(kill("kill9", "r1")).events()), []string{VRunTwice}, none)
	})
	// The first start's worker could not reach the store: its liveness
	// lapsed and another worker took the tick over.
	for _, f := range []struct{ name, target string }{
		{"latency", "r2"}, {"partition", "r2"}, {"store-kill", "store"}, {"store-restart", "store"}, {"failover", "primary"},
	} {
		t.Run("documented: "+f.name+" of "+f.target, func(t *testing.T) {
			r := Check(cutRun(clean()).add(kill(f.name, f.target),
				Event{T: at(6 * time.Second), Kind: KindFault, Fault: f.name, Phase: "end", Target: f.target}).events())
			wantOnly(t, r, none, none)
			if r.Totals.Reruns != 1 {
				t.Fatalf("totals %+v", r.Totals)
			}
		})
	}
	t.Run("latency of another replica", func(t *testing.T) {
		wantOnly(t, Check(cutRun(clean()).add(kill("latency", "r1")).events()), []string{VRunTwice}, none)
	})
	t.Run("a store fault over before the first start", func(t *testing.T) {
		h := cutRun(clean()).add(
			Event{T: at(2 * time.Second), Kind: KindFault, Fault: "store-kill", Phase: "start", Target: "store"},
			Event{T: at(2500 * time.Millisecond), Kind: KindFault, Fault: "store-kill", Phase: "end", Target: "store"})
		wantOnly(t, Check(h.events()), []string{VRunTwice}, none)
	})
	t.Run("documented: its worker killed just before the first start was logged", func(t *testing.T) {
		k := kill("kill9", "r2")
		k.T = at(4020*time.Millisecond - StartSlack + 10*time.Millisecond)
		wantOnly(t, Check(cutRun(clean()).add(k).events()), none, none)
	})
	t.Run("a kill of its worker more than StartSlack before the first run", func(t *testing.T) {
		k := kill("kill9", "r2")
		k.T = at(4020*time.Millisecond - StartSlack - 10*time.Millisecond)
		wantOnly(t, Check(cutRun(clean()).add(k).events()), []string{VRunTwice}, none)
	})
	t.Run("after an OK end, a kill of its worker after the second start", func(t *testing.T) {
		slot := ms(4 * time.Second)
		k := kill("kill9", "r2")
		k.T = at(7500 * time.Millisecond)
		h := clean().add(k,
			Event{T: at(7 * time.Second), Kind: KindRunStart, Job: "dup", Slot: slot, Attempt: 1, Worker: "r3", PID: 300})
		r := Check(h.events())
		wantOnly(t, r, []string{VRunTwice}, none)
		if !strings.Contains(r.Violations[0].Desc, "completed OK") {
			t.Fatalf("violation %+v", r.Violations[0])
		}
	})
	// dup's slot at t0+4s ran OK on r2 (ended t0+4.05s), then again on
	// r3 at t0+7s.
	okTwice := func(fault string, start time.Duration) *hist {
		h := clean().add(Event{T: at(7 * time.Second), Kind: KindRunStart, Job: "dup", Slot: ms(4 * time.Second), Attempt: 1, Worker: "r3", PID: 300})
		if fault != "" {
			h.add(Event{T: at(start), Kind: KindFault, Fault: fault, Phase: "start", Target: "r2"},
				Event{T: at(start + 2*time.Second), Kind: KindFault, Fault: fault, Phase: "end", Target: "r2"})
		}
		return h
	}
	t.Run("documented: after an OK end, its worker cut off before its done record", func(t *testing.T) {
		r := Check(okTwice("partition", 4040*time.Millisecond).events())
		wantOnly(t, r, none, []string{VRunTwice})
		if r.Totals.Reruns != 1 || !strings.Contains(r.Documented[0].Desc, "partition of r2") {
			t.Fatalf("totals %+v, documented %+v", r.Totals, r.Documented)
		}
	})
	t.Run("documented: after an OK end, its worker killed before the second start", func(t *testing.T) {
		wantOnly(t, Check(okTwice("kill9", 6*time.Second).events()), none, []string{VRunTwice})
	})
	// dup's slot at t0+1s ran OK on r2 (ended t0+1.05s), then again on
	// r3 at t0+9s, with a fault of r2 (or of the store) at `at`.
	lateTwice := func(fault, target string, start time.Duration) *hist {
		h := clean().add(Event{T: at(9 * time.Second), Kind: KindRunStart, Job: "dup", Slot: ms(time.Second), Attempt: 1, Worker: "r3", PID: 300})
		return h.add(Event{T: at(start), Kind: KindFault, Fault: fault, Phase: "start", Target: target},
			Event{T: at(start + 500*time.Millisecond), Kind: KindFault, Fault: fault, Phase: "end", Target: target})
	}
	t.Run("documented: after an OK end, its worker cut off within DoneSlack", func(t *testing.T) {
		wantOnly(t, Check(lateTwice("partition", "r2", 1050*time.Millisecond+DoneSlack-100*time.Millisecond).events()), none, []string{VRunTwice})
	})
	t.Run("after an OK end, its worker cut off after DoneSlack", func(t *testing.T) {
		r := Check(lateTwice("partition", "r2", 1050*time.Millisecond+DoneSlack+100*time.Millisecond).events())
		wantOnly(t, r, []string{VRunTwice}, none)
		if !strings.Contains(r.Violations[0].Desc, "completed OK") {
			t.Fatalf("violation %+v", r.Violations[0])
		}
	})
	t.Run("after an OK end, a store kill after DoneSlack", func(t *testing.T) {
		wantOnly(t, Check(lateTwice("store-kill", "store", 1050*time.Millisecond+DoneSlack+100*time.Millisecond).events()), []string{VRunTwice}, none)
	})
	t.Run("documented: after an OK end, an async failover after DoneSlack", func(t *testing.T) {
		h := lateTwice("failover", "127.0.0.1:1", 1050*time.Millisecond+DoneSlack+100*time.Millisecond)
		h.bounds.AsyncLoss = true
		wantOnly(t, Check(h.events()), none, []string{VRunTwice})
	})
	// The worker's own report (a lapse event) instead of a fault.
	lapse := func(at time.Duration, tick, note string) Event {
		return Event{T: t0.Add(at), Kind: KindLapse, Replica: "r2", Tick: tick, Note: note}
	}
	late := func() *hist {
		return clean().add(Event{T: at(9 * time.Second), Kind: KindRunStart, Job: "dup", Slot: ms(time.Second), Attempt: 1, Worker: "r3", PID: 300})
	}
	t.Run("documented: after an OK end, its worker says it did not record the result", func(t *testing.T) {
		r := Check(late().add(lapse(2*time.Second, "dup:"+itoa(ms(time.Second)), "not recorded")).events())
		wantOnly(t, r, none, []string{VRunTwice})
		if !strings.Contains(r.Documented[0].Desc, "r2's own report") {
			t.Fatalf("documented %+v", r.Documented[0])
		}
	})
	t.Run("after an OK end, its worker says it did not record another tick", func(t *testing.T) {
		wantOnly(t, Check(late().add(lapse(2*time.Second, "dup:"+itoa(ms(2*time.Second)), "not recorded")).events()), []string{VRunTwice}, none)
	})
	t.Run("a failed heartbeat of its worker excuses nothing", func(t *testing.T) {
		wantOnly(t, Check(late().add(lapse(2*time.Second, "", "store call failed: heartbeat")).events()), []string{VRunTwice}, none)
	})
	t.Run("documented: an open run cancelled by its worker", func(t *testing.T) {
		slot := ms(4 * time.Second)
		h := clean().drop(func(e Event) bool { return e.Kind == KindRunEnd && e.Slot == slot }).add(
			lapse(5*time.Second, "dup:"+itoa(slot), "cancelled: cancelling the handler: liveness lapsed"),
			Event{T: at(7 * time.Second), Kind: KindRunStart, Job: "dup", Slot: slot, Attempt: 1, Worker: "r3", PID: 300})
		wantOnly(t, Check(h.events()), none, none)
		if r := Check(h.events()); r.Totals.Reruns != 1 {
			t.Fatalf("totals %+v", r.Totals)
		}
	})
	t.Run("another worker's report", func(t *testing.T) {
		e := lapse(2*time.Second, "dup:"+itoa(ms(time.Second)), "not recorded")
		e.Replica = "r1"
		wantOnly(t, Check(late().add(e).events()), []string{VRunTwice}, none)
	})
	t.Run("after an OK end, its worker cut off after the second start", func(t *testing.T) {
		wantOnly(t, Check(okTwice("partition", 7100*time.Millisecond).events()), []string{VRunTwice}, none)
	})
	t.Run("after an OK end, a fault of another replica", func(t *testing.T) {
		h := okTwice("", 0).add(Event{T: at(4040 * time.Millisecond), Kind: KindFault, Fault: "partition", Phase: "start", Target: "r1"})
		wantOnly(t, Check(h.events()), []string{VRunTwice}, none)
	})
	t.Run("a retry after a failure", func(t *testing.T) {
		slot := ms(4 * time.Second)
		h := clean().drop(func(e Event) bool { return e.Kind == KindRunEnd && e.Slot == slot }).add(
			Event{T: at(4050 * time.Millisecond), Kind: KindRunEnd, Job: "dup", Slot: slot, Attempt: 1, Worker: "r2", PID: 104, OK: no()},
			Event{T: at(5 * time.Second), Kind: KindRunStart, Job: "dup", Slot: slot, Attempt: 2, Worker: "r2", PID: 105},
			Event{T: at(5100 * time.Millisecond), Kind: KindRunEnd, Job: "dup", Slot: slot, Attempt: 2, Worker: "r2", PID: 105, OK: yes()})
		r := Check(h.events())
		wantOnly(t, r, none, none)
		if r.Totals.Retries != 1 {
			t.Fatalf("totals %+v", r.Totals)
		}
	})
	t.Run("identified by tick id only", func(t *testing.T) {
		tick := "dup:" + itoa(ms(4*time.Second))
		h := clean().add(Event{T: at(7 * time.Second), Kind: KindRunStart, Tick: tick, Attempt: 1, Worker: "r3"})
		wantOnly(t, Check(h.events()), []string{VRunTwice}, none)
	})
}

func TestNeverRun(t *testing.T) {
	slot := func(d time.Duration) func(Event) bool {
		return func(e Event) bool { return e.Slot == ms(d) && e.Kind == KindRunStart }
	}
	t.Run("a run job's slot not run", func(t *testing.T) {
		r := Check(clean().drop(slot(5 * time.Second)).events())
		wantOnly(t, r, []string{VNeverRun}, none)
		if v := r.Violations[0]; v.Job != "dup" || v.Slot != ms(5*time.Second) || !strings.Contains(v.Desc, "was enqueued") || len(v.Window) == 0 {
			t.Fatalf("violation %+v", v)
		}
	})
	t.Run("an enqueue-only job's slots not enqueued, one finding per gap", func(t *testing.T) {
		h := clean().drop(func(e Event) bool {
			return e.Job == "dupq" && (e.Slot == ms(2*time.Second) || e.Slot == ms(3*time.Second) || e.Slot == ms(6*time.Second))
		})
		r := Check(h.events())
		wantOnly(t, r, []string{VNeverRun, VNeverRun}, none)
		if !strings.Contains(r.Violations[0].Desc, "2 slots") || r.Jobs[1].Missing != 3 {
			t.Fatalf("violations %+v, jobs %+v", r.Violations, r.Jobs)
		}
	})
	t.Run("a slot within Settle of the end may be missing", func(t *testing.T) {
		h := clean().drop(func(e Event) bool { return e.Slot == ms(8*time.Second) })
		h.bounds.Settle = 2500 * time.Millisecond
		wantOnly(t, Check(h.events()), none, none)
	})
	t.Run("async loss near a failover is documented", func(t *testing.T) {
		h := clean().drop(func(e Event) bool { return e.Job == "dupq" && e.Slot == ms(5*time.Second) }).add(
			Event{T: at(5500 * time.Millisecond), Kind: KindFault, Fault: "store-kill", Phase: "start", Target: "primary"})
		h.bounds.AsyncLoss = true
		wantOnly(t, Check(h.events()), none, []string{VNeverRun})
	})
	t.Run("async loss far from a failover", func(t *testing.T) {
		h := clean().drop(func(e Event) bool { return e.Job == "dupq" && e.Slot == ms(2*time.Second) }).add(
			Event{T: at(7 * time.Second), Kind: KindFault, Fault: "store-kill", Phase: "start", Target: "primary"})
		h.bounds.AsyncLoss = true
		wantOnly(t, Check(h.events()), []string{VNeverRun}, none)
	})
}

func TestMissedUncounted(t *testing.T) {
	gap := func() *hist {
		return clean().drop(func(e Event) bool {
			return e.Job == "miss" && (e.Slot == ms(3*time.Second) || e.Slot == ms(4*time.Second))
		})
	}
	t.Run("not counted", func(t *testing.T) {
		r := Check(gap().events(Event{Job: "miss", Replica: "r1", Value: 1}))
		wantOnly(t, r, []string{VMissedUncounted}, none)
		if v := r.Violations[0]; v.Job != "miss" || v.Slot != ms(3*time.Second) || !strings.Contains(v.Desc, "1 uncounted") {
			t.Fatalf("violation %+v", v)
		}
	})
	t.Run("another job's counter does not count", func(t *testing.T) {
		wantOnly(t, Check(gap().events(Event{Job: "dup", Replica: "r1", Value: 5})), []string{VMissedUncounted}, none)
	})
	t.Run("counted by two replicas", func(t *testing.T) {
		r := Check(gap().events(Event{Job: "miss", Replica: "r1", Value: 1}, Event{Job: "miss", Replica: "r2", Value: 1}))
		wantOnly(t, r, none, none)
		if r.Totals.MissedCounted != 2 || r.Jobs[2].Missing != 2 {
			t.Fatalf("totals %+v jobs %+v", r.Totals, r.Jobs)
		}
	})
	t.Run("one missed event and one counted", func(t *testing.T) {
		h := gap().add(Event{T: at(4100 * time.Millisecond), Kind: KindMissed, Job: "miss", Slot: ms(3 * time.Second), Replica: "r1"})
		wantOnly(t, Check(h.events(Event{Job: "miss", Replica: "r1", Value: 1})), none, none)
	})
	t.Run("a missed event of another slot does not cover", func(t *testing.T) {
		h := gap().add(Event{T: at(4100 * time.Millisecond), Kind: KindMissed, Job: "miss", Slot: ms(5 * time.Second), Replica: "r1"})
		wantOnly(t, Check(h.events(Event{Job: "miss", Replica: "r1", Value: 1})), []string{VMissedUncounted}, none)
	})
	t.Run("async loss near a failover is documented", func(t *testing.T) {
		h := gap().add(Event{T: at(4500 * time.Millisecond), Kind: KindFault, Fault: "failover", Phase: "start", Target: "store"},
			Event{T: at(4600 * time.Millisecond), Kind: KindFault, Fault: "failover", Phase: "end", Target: "store"})
		h.bounds.AsyncLoss = true
		wantOnly(t, Check(h.events(Event{Job: "miss", Replica: "r1", Value: 1})), none, []string{VMissedUncounted})
	})
}

func TestTrustOverlap(t *testing.T) {
	// r2 acquires at t0+4.5s; r1 last renewed at t0+4s, trusting until
	// t0+6.7s, renewing on until the end.
	takeover := func() *hist {
		return clean().add(Event{T: at(4500 * time.Millisecond), Kind: KindLeader, Phase: "acquired", Replica: "r2", Epoch: 8, TrustUntil: at(7 * time.Second)})
	}
	t.Run("both trust", func(t *testing.T) {
		r := Check(takeover().events())
		wantOnly(t, r, []string{VTrustOverlap}, none)
		if v := r.Violations[0]; v.Replica != "r2" || !v.T.Equal(at(4500*time.Millisecond)) {
			t.Fatalf("violation %+v", v)
		}
	})
	stopRenewing := func(h *hist) *hist {
		return h.drop(func(e Event) bool { return e.Replica == "r1" && e.Phase == "renewed" && e.T.After(at(4*time.Second)) })
	}
	t.Run("the old leader lost it first", func(t *testing.T) {
		h := stopRenewing(takeover()).add(Event{T: at(4400 * time.Millisecond), Kind: KindLeader, Phase: "lost", Replica: "r1"})
		wantOnly(t, Check(h.events()), none, none)
	})
	for _, f := range []string{"kill9", "worker-kill"} {
		t.Run("the old leader killed first: "+f, func(t *testing.T) {
			h := stopRenewing(takeover()).add(Event{T: at(4400 * time.Millisecond), Kind: KindFault, Fault: f, Phase: "start", Target: "r1"})
			wantOnly(t, Check(h.events()), none, none)
		})
	}
	t.Run("another replica killed", func(t *testing.T) {
		h := stopRenewing(takeover()).add(Event{T: at(4400 * time.Millisecond), Kind: KindFault, Fault: "kill9", Phase: "start", Target: "r3"})
		wantOnly(t, Check(h.events()), []string{VTrustOverlap}, none)
	})
	t.Run("the old leader's trust ran out first", func(t *testing.T) {
		h := clean().drop(func(e Event) bool { return e.Replica == "r1" && e.Phase == "renewed" && e.T.After(at(time.Second)) })
		h.add(Event{T: at(4500 * time.Millisecond), Kind: KindLeader, Phase: "acquired", Replica: "r2", Epoch: 8, TrustUntil: at(7 * time.Second)})
		wantOnly(t, Check(h.events()), none, none)
	})
	t.Run("an overlap within MaxSkew", func(t *testing.T) {
		h := stopRenewing(takeover()).add(Event{T: at(4550 * time.Millisecond), Kind: KindLeader, Phase: "lost", Replica: "r1"})
		wantOnly(t, Check(h.events()), none, none)
		h.bounds.MaxSkew = 10 * time.Millisecond
		wantOnly(t, Check(h.events()), []string{VTrustOverlap}, none)
	})
	t.Run("a lapsed renewal starts a new term", func(t *testing.T) {
		// r1 renews at t0+4s (until t0+6.7s), r2 leads from t0+7s to
		// t0+7.5s, r1 renews again at t0+8s: no overlap; at t0+7.2s: one.
		h := clean().drop(func(e Event) bool { return e.Replica == "r1" && e.Phase == "renewed" && e.T.After(at(4*time.Second)) })
		h.add(Event{T: at(7 * time.Second), Kind: KindLeader, Phase: "acquired", Replica: "r2", Epoch: 8, TrustUntil: at(9 * time.Second)},
			Event{T: at(7500 * time.Millisecond), Kind: KindLeader, Phase: "lost", Replica: "r2"},
			Event{T: at(8 * time.Second), Kind: KindLeader, Phase: "renewed", Replica: "r1", Epoch: 7, TrustUntil: at(10 * time.Second)})
		wantOnly(t, Check(h.events()), none, none)
		h.add(Event{T: at(7200 * time.Millisecond), Kind: KindLeader, Phase: "renewed", Replica: "r1", Epoch: 7, TrustUntil: at(9 * time.Second)})
		wantOnly(t, Check(h.events()), []string{VTrustOverlap}, none)
	})
	t.Run("across a failover under AsyncLoss", func(t *testing.T) {
		h := takeover().add(Event{T: at(4 * time.Second), Kind: KindFault, Fault: "failover", Phase: "start", Target: "store"},
			Event{T: at(6 * time.Second), Kind: KindFault, Fault: "failover", Phase: "end", Target: "store"})
		h.bounds.AsyncLoss = true
		wantOnly(t, Check(h.events()), none, []string{VTrustOverlap})
	})
}

func TestEpochBackwards(t *testing.T) {
	handover := func(replica string, epoch int64) *hist {
		h := clean().drop(func(e Event) bool { return e.Replica == "r1" && e.Phase == "renewed" && e.T.After(at(4*time.Second)) })
		return h.add(Event{T: at(4100 * time.Millisecond), Kind: KindLeader, Phase: "lost", Replica: "r1"},
			Event{T: at(4200 * time.Millisecond), Kind: KindLeader, Phase: "acquired", Replica: replica, Epoch: epoch, TrustUntil: at(7 * time.Second)})
	}
	t.Run("increasing", func(t *testing.T) {
		wantOnly(t, Check(handover("r2", 8).events()), none, none)
	})
	t.Run("lower", func(t *testing.T) {
		r := Check(handover("r2", 6).events())
		wantOnly(t, r, []string{VEpochBackwards}, none)
		if v := r.Violations[0]; v.Replica != "r2" || !strings.Contains(v.Desc, "epoch 6") || !strings.Contains(v.Desc, "epoch 7") {
			t.Fatalf("violation %+v", v)
		}
	})
	t.Run("equal, another replica", func(t *testing.T) {
		wantOnly(t, Check(handover("r2", 7).events()), []string{VEpochBackwards}, none)
	})
	t.Run("equal, the same replica (leadership kept)", func(t *testing.T) {
		wantOnly(t, Check(handover("r1", 7).events()), none, none)
	})
	t.Run("lower, the same replica", func(t *testing.T) {
		wantOnly(t, Check(handover("r1", 3).events()), []string{VEpochBackwards}, none)
	})
}

func TestHistoryProblems(t *testing.T) {
	ev := clean().events()
	t.Run("no run event", func(t *testing.T) {
		r := Check(ev[1:])
		// Without jobs no slot is judged; the history itself fails.
		wantOnly(t, r, []string{VHistory}, none)
	})
	t.Run("no end event", func(t *testing.T) {
		wantOnly(t, Check(ev[:len(ev)-1]), []string{VHistory}, none)
	})
	t.Run("a job without a period", func(t *testing.T) {
		h := clean()
		h.jobs = append(h.jobs, JobSpec{Name: "bad", Prefer: "missed", From: 1})
		wantOnly(t, Check(h.events()), []string{VHistory}, none)
	})
	t.Run("a run without a job or tick", func(t *testing.T) {
		wantOnly(t, Check(clean().add(Event{T: at(time.Second), Kind: KindRunStart, Worker: "r2"}).events()), []string{VHistory}, none)
	})
	t.Run("an enqueue without a job", func(t *testing.T) {
		wantOnly(t, Check(clean().add(Event{T: at(time.Second), Kind: KindEnqueue}).events()), []string{VHistory}, none)
	})
	t.Run("empty", func(t *testing.T) {
		wantOnly(t, Check(nil), []string{VHistory, VHistory}, none)
	})
}

func TestOrderOfLinesDoesNotMatter(t *testing.T) {
	ev := cutRun(clean()).events()
	// Reversed: the checker orders by time.
	rev := make([]Event, len(ev))
	for i, e := range ev {
		rev[len(ev)-1-i] = e
	}
	wantOnly(t, Check(rev), []string{VRunTwice}, none)
}

func TestPrint(t *testing.T) {
	r := Check(cutRun(clean()).events())
	var b bytes.Buffer
	if err := r.Print(&b, PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"store test, seed 1",
		"VIOLATION run_twice job=dup slot=" + itoa(ms(4*time.Second)) + " replica=r3 at 10:00:07.000",
		"> #", // the window marks the two run starts
		"run_start job=dup slot=10:00:04.000 attempt=1 worker=r2 pid=104",
		"verdict: FAIL (1 violations, 0 documented)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The window holds the events within WindowSpan, at most WindowMax.
	w := r.Violations[0].Window
	if len(w) == 0 || len(w) > WindowMax {
		t.Fatalf("window of %d lines", len(w))
	}
	marked := 0
	for _, l := range w {
		if l.Mark {
			marked++
		}
		if l.Event.T.Before(at(4*time.Second-WindowSpan)) || l.Event.T.After(at(7*time.Second+WindowSpan)) {
			t.Errorf("line %d outside the window: %s", l.N, l.Event)
		}
	}
	if marked != 2 {
		t.Fatalf("%d marked lines, want the 2 runs", marked)
	}

	b.Reset()
	if err := Check(clean().events()).Print(&b, PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "verdict: PASS") {
		t.Fatalf("clean report:\n%s", b.String())
	}
}

func TestTooManySlots(t *testing.T) {
	h := clean()
	h.jobs = append(h.jobs, JobSpec{Name: "epoch", Every: time.Millisecond, Prefer: "duplicate", From: 1})
	r := Check(h.events())
	wantOnly(t, r, []string{VHistory}, none)
	if !strings.Contains(r.Violations[0].Desc, "more than 1000000") {
		t.Fatalf("violation %+v", r.Violations[0])
	}
}

func TestBadBounds(t *testing.T) {
	h := clean()
	h.bounds.Settle = -time.Hour
	r := Check(h.events())
	// Judged with Settle 0: the slots at t0+9s and t0+10s are missing too.
	if r.OK() || r.Violations[0].Kind != VHistory || !strings.Contains(r.Violations[0].Desc, "bounds out of range") {
		t.Fatalf("violations %q: %+v", kinds(r.Violations), r.Violations[0])
	}
}

func TestBackfillsAndTriggers(t *testing.T) {
	slot := ms(3 * time.Second)
	backfill := func(job string) Event {
		return Event{T: at(6 * time.Second), Kind: KindEnqueue, Job: job, Slot: slot, Tick: job + ":" + itoa(slot), Entry: "bf", TickKind: "backfill"}
	}
	t.Run("a backfill enqueues a fired slot again", func(t *testing.T) {
		r := Check(clean().add(backfill("dupq")).events())
		wantOnly(t, r, []string{VEnqueuedTwice}, none)
		if !strings.Contains(r.Violations[0].Desc, `"bf" (backfill`) {
			t.Fatalf("violation %+v", r.Violations[0])
		}
	})
	lost := func(job string) func(Event) bool {
		return func(e Event) bool { return e.Job == job && e.Slot == slot }
	}
	t.Run("a duplicate slot only a backfill enqueued", func(t *testing.T) {
		r := Check(clean().drop(lost("dupq")).add(backfill("dupq")).events())
		wantOnly(t, r, []string{VNeverRun}, none)
		if !strings.Contains(r.Violations[0].Desc, "only by a backfill") {
			t.Fatalf("violation %+v", r.Violations[0])
		}
	})
	t.Run("a run job's slot only a backfill enqueued, then run", func(t *testing.T) {
		h := clean().drop(lost("dup")).add(backfill("dup"),
			Event{T: at(6100 * time.Millisecond), Kind: KindRunStart, Job: "dup", Slot: slot, Tick: "dup:" + itoa(slot), Attempt: 1, Worker: "r2"})
		wantOnly(t, Check(h.events()), []string{VNeverRun}, none)
	})
	// A backfill within Settle of the slot's due time (Settle is 2 s)
	// claimed the slot before the leader could: the leader's claim found
	// it taken.
	early := func(job string) Event {
		e := backfill(job)
		e.T = at(4900 * time.Millisecond)
		return e
	}
	t.Run("a duplicate slot a backfill enqueued within Settle", func(t *testing.T) {
		wantOnly(t, Check(clean().drop(lost("dupq")).add(early("dupq")).events()), none, none)
	})
	t.Run("a run job's slot a backfill enqueued within Settle, then run", func(t *testing.T) {
		h := clean().drop(lost("dup")).add(early("dup"),
			Event{T: at(5 * time.Second), Kind: KindRunStart, Job: "dup", Slot: slot, Tick: "dup:" + itoa(slot), Attempt: 1, Worker: "r2"})
		wantOnly(t, Check(h.events()), none, none)
	})
	t.Run("a missed slot a backfill enqueued within Settle", func(t *testing.T) {
		wantOnly(t, Check(clean().drop(lost("miss")).add(early("miss")).events()), none, none)
	})
	t.Run("a backfill within Settle of a slot the scheduler fired", func(t *testing.T) {
		wantOnly(t, Check(clean().add(early("dupq")).events()), []string{VEnqueuedTwice}, none)
	})
	t.Run("a missed slot a backfill filled is still uncounted", func(t *testing.T) {
		wantOnly(t, Check(clean().drop(lost("miss")).add(backfill("miss")).events()), []string{VMissedUncounted}, none)
	})
	t.Run("runs of triggers are told apart by tick id", func(t *testing.T) {
		// Two triggers whose runs carry the same slot (the trigger's time).
		h := clean()
		for i, key := range []string{"k1", "k2"} {
			tick := "dup:trigger:" + key
			h.add(Event{T: at(5200 * time.Millisecond), Kind: KindEnqueue, Job: "dup", Tick: tick, Entry: key, TickKind: "trigger"},
				Event{T: at(5300 * time.Millisecond), Kind: KindRunStart, Job: "dup", Slot: ms(5200 * time.Millisecond), Tick: tick, Attempt: 1, Worker: "r2", PID: 900 + i})
		}
		r := Check(h.events())
		wantOnly(t, r, none, none)
		if r.Totals.Enqueued != 26 {
			t.Fatalf("totals %+v", r.Totals)
		}
	})
}

func TestMissedCounters(t *testing.T) {
	gap := clean().drop(func(e Event) bool {
		return e.Job == "miss" && (e.Slot == ms(3*time.Second) || e.Slot == ms(4*time.Second) || e.Slot == ms(5*time.Second))
	})
	c := func(name, replica string, d time.Duration, v float64) Event {
		return Event{T: at(d), Kind: KindCounter, Name: name, Job: "miss", Replica: replica, Value: v}
	}
	for _, tc := range []struct {
		name   string
		events []Event
		counts float64
	}{
		{"cumulative reads of one process", []Event{c(JobMissedCounter, "a1", 4*time.Second, 1), c(JobMissedCounter, "a1", 6*time.Second, 2)}, 2},
		{"two processes", []Event{c(JobMissedCounter, "a1", 4*time.Second, 1), c(JobMissedCounter, "b1", 6*time.Second, 2)}, 3},
		{"a restart seen as a drop", []Event{c(JobMissedCounter, "a", 4*time.Second, 2), c(JobMissedCounter, "a", 6*time.Second, 1)}, 3},
		{"a restart seen as a kill between", []Event{c(JobMissedCounter, "a", 4*time.Second, 1),
			{T: at(5 * time.Second), Kind: KindFault, Fault: "kill9", Phase: "start", Target: "a"}, c(JobMissedCounter, "a", 6*time.Second, 2)}, 3},
		{"both counters: the larger sum", []Event{c(JobMissedCounter, "a1", 4*time.Second, 3), c(MissedCounter, "a1", 4*time.Second, 2)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := *gap
			h.ev = append(append([]Event(nil), gap.ev...), tc.events...)
			r := Check(h.events())
			if r.Jobs[2].MissedCounted != tc.counts {
				t.Fatalf("counted %g, want %g", r.Jobs[2].MissedCounted, tc.counts)
			}
			if tc.counts >= 3 {
				wantOnly(t, r, none, none)
			} else {
				wantOnly(t, r, []string{VMissedUncounted}, none)
			}
		})
	}
}

// A job with no history: r1 leads from t0 and is killed at t0+0.5s
// before it fired any slot; the slots t0+1s..t0+3s are never enqueued.
func TestNoHistoryHead(t *testing.T) {
	head := func(acquired time.Duration) *hist {
		h := clean().drop(func(e Event) bool {
			return e.Kind == KindLeader && e.Phase == "renewed" ||
				e.Slot != 0 && e.Slot <= ms(3*time.Second)
		}).add(Event{T: at(500 * time.Millisecond), Kind: KindFault, Fault: "kill9", Phase: "start", Target: "r1"})
		if acquired > 0 {
			h.add(Event{T: at(acquired), Kind: KindLeader, Phase: "acquired", Replica: "r3", Epoch: 8, TrustUntil: at(acquired + 2700*time.Millisecond)})
			for s := acquired + time.Second; s < h.length; s += time.Second {
				h.add(Event{T: at(s), Kind: KindLeader, Phase: "renewed", Replica: "r3", Epoch: 8, TrustUntil: at(s + 2700*time.Millisecond)})
			}
		}
		return h
	}
	t.Run("documented: a new leader after the first leader fired nothing", func(t *testing.T) {
		r := Check(head(3500 * time.Millisecond).events())
		wantOnly(t, r, none, []string{VNeverRun, VNeverRun, VMissedUncounted})
		if d := r.Documented[0]; d.Job != "dup" || d.Slot != ms(time.Second) || !strings.Contains(d.Desc, "3 slots") {
			t.Fatalf("documented %+v", d)
		}
	})
	t.Run("no leader change: the first slots are missing", func(t *testing.T) {
		h := head(0).add(Event{T: at(0), Kind: KindLeader, Phase: "renewed", Replica: "r1", Epoch: 7, TrustUntil: at(20 * time.Second)})
		h.drop(func(e Event) bool { return e.Kind == KindFault })
		wantOnly(t, Check(h.events()), []string{VNeverRun, VNeverRun, VMissedUncounted}, none)
	})
	t.Run("slots due after the new leader started are missing", func(t *testing.T) {
		r := Check(head(1500 * time.Millisecond).events())
		wantOnly(t, r, []string{VNeverRun, VNeverRun, VMissedUncounted}, []string{VNeverRun, VNeverRun, VMissedUncounted})
		if v := r.Violations[0]; v.Slot != ms(2*time.Second) {
			t.Fatalf("violation %+v", v)
		}
	})
}
