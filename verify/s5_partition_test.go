//go:build verify

package verify

// Network faults between the leader and Redis, through a proxy per
// replica: a cut (connections reset), a blackhole (silence), and added
// latency.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// TestPartition cuts the leader off Redis, first by resetting its
// connections, then by silently dropping its traffic. Each time the
// leader stops firing before the store could grant its lease to anyone
// else, a standby takes over, nothing is fired twice, and after the heal
// the old leader rejoins as a standby. Then 200ms of latency each way on
// the leader's link (its connections reset, so they are set up again over
// the slow link) raises its renewal latency without leadership flapping
// or a skipped slot.
func TestPartition(t *testing.T) {
	const scenario = "5. partition leader↔redis"
	Scenario(t, scenario)
	srv := StartRedis(t)
	f := NewFleet(t, scenario, srv)
	f.StoreFaults = true
	proxies := map[*Replica]*Proxy{}
	for i := 1; i <= 3; i++ {
		p := StartProxy(t, srv.Addr())
		r := f.Start(fmt.Sprintf("r%d", i), WithRedisURL(p.URL()))
		proxies[r] = p
	}
	leader := f.WaitLeader(2 * ttl)
	Settle(2 * time.Second)

	takeovers, notes, leader := isolationRounds(t, f, proxies, leader, 2*ttl)

	// Hold: the leader's claim for the next slot is sent while it still
	// trusts its lease, but stuck in the network until after a standby has
	// taken over; then it arrives. The store must refuse it (FENCED) and
	// record the old term as fenced.
	leader = f.WaitLeader(2 * ttl)
	notes = append(notes, holdPhase(t, f, leader, proxies[leader]))

	// Latency: 200ms each way on the leader's link, after a reconnect.
	leader = f.WaitLeader(2 * ttl)
	changes := f.LeadershipChanges
	before := changes()
	h0 := f.Scrape(leader).Histogram("scheduler_renewal_latency_seconds")
	delayMark := leader.Mark()
	// The latency comes with a reconnect (as on a route change): the
	// leader's new connections are set up over the slow link.
	const delay = 200 * time.Millisecond
	delayStart := time.Now()
	proxies[leader].SetDelay(delay)
	proxies[leader].Reset()
	end := time.Now().Add(8 * time.Second)
	for time.Now().Before(end) {
		next := time.Now().Add(time.Second)
		ls, err := f.Leaders()
		if err != nil || len(ls) != 1 || ls[0] != leader {
			t.Errorf("delay: leaders %v (err %v), want only %s", names(ls), err, leader.Name)
		}
		time.Sleep(time.Until(next))
	}
	h1 := f.Scrape(leader).Histogram("scheduler_renewal_latency_seconds")
	proxies[leader].SetDelay(0)
	after := changes()
	if after != before {
		t.Errorf("delay: leadership changed %v times under %s of added latency each way", after-before, delay)
	}
	n := h1.Count - h0.Count
	mean := 0.0
	if n > 0 {
		mean = (h1.Sum - h0.Sum) / n
	}
	if n < 4 {
		t.Errorf("delay: the leader renewed %v times in 8s, want at least 4", n)
	} else if mean < (2 * delay).Seconds() {
		t.Errorf("delay: mean renewal latency %s under %s each way, want >= %s", fmtSeconds(mean), delay, 2*delay)
	}
	t.Logf("delay: %v renewals, mean %s (before: mean %s)", n, fmtSeconds(mean), fmtSeconds(h0.Sum/max(h0.Count, 1)))
	early, skipped := 0, int64(0)
	for _, l := range leader.Lines()[delayMark:] {
		if l.Level != "INFO" {
			t.Logf("delay: %s logged: %s", leader.Name, l.Raw)
		}
		switch {
		case strings.HasPrefix(l.Msg, "store refused an early tick"):
			early++
		case l.Msg == "gap: slots skipped":
			skipped += l.Int("skipped")
		}
	}
	notes = append(notes, fmt.Sprintf("delay %s each way on the leader's link for 8s, its connections reset at the start: no leadership change; %v renewals averaging %s (before: %s); the leader logged %d skipped slots and %d ticks refused by the store as early (replicas and Redis share one clock).",
		delay, n, fmtSeconds(mean), fmtSeconds(h0.Sum/max(h0.Count, 1)), skipped, early))

	Settle(2 * time.Second)
	as := f.Snapshot()
	CheckInvariants(t, as, jobGrace, jobDup)
	f.CheckMissedCounters(as)
	// The reconnect at the start of the delay phase costs a few 400ms round
	// trips (dial, handshake, a claim cut off by the reset and sent again),
	// so a slot due then may come later than the 1s grace floor: skipped
	// and counted. After the reconnect window nothing may be skipped.
	reconnected := onetick.SlotOf(delayStart.Add(3 * time.Second))
	for _, g := range as[jobMissed].Gaps {
		if g.FromTerm == g.ToTerm {
			// Only the delay phase happens inside a term.
			if g.After >= reconnected {
				t.Errorf("%s: %d slots skipped after %s while %s led throughout (the delay phase, after the reconnect)", jobMissed, g.Missing, g.After, g.FromTerm)
			} else {
				t.Logf("%s: %d slots skipped after %s while the leader reconnected over the slow link (counted)", jobMissed, g.Missing, g.After)
			}
		}
		if g.Missing > maxMissedPerFailover {
			t.Errorf("%s: %d slots missed between %s and %s, want <= %d", jobMissed, g.Missing, g.FromTerm, g.ToTerm, maxMissedPerFailover)
		}
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 4, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		TimeLabel: "fault → became leader", Times: takeovers, Notes: notes})
}

// holdPhase holds the leader's traffic from just before a slot until a
// standby has taken over, then delivers it, and checks that the store
// fenced the stale claim. It returns a note for the report.
func holdPhase(t *testing.T, f *Fleet, leader *Replica, p *Proxy) string {
	t.Helper()
	oldEpoch := leader.Epoch()
	marks := f.Marks()
	WaitPhase(900 * time.Millisecond)
	heldAt := time.Now()
	p.SetMode(ModeHold)
	slot := heldAt.Truncate(time.Second).Add(time.Second) // the slot its claim is for
	who, line, ok := f.AwaitBecameLeader(2*ttl+slack, marks, leader, oldEpoch)
	if !ok {
		p.SetMode(ModePass)
		t.Fatalf("hold: no standby took over from %s", leader.Name)
	}
	newEpoch := line.Int("epoch")
	if !Poll(ttl, 20*time.Millisecond, func() bool {
		m, err := leader.Metrics()
		return err == nil && m.Get("scheduler_is_leader") == 0
	}) {
		t.Errorf("hold: %s still reports scheduler_is_leader 1 after %s took over", leader.Name, who.Name)
	}
	// Let the new leader fire the held slot itself, then deliver.
	if !Poll(ttl, 50*time.Millisecond, func() bool {
		for _, e := range f.ReadStream(jobDup) {
			if int64(e.Epoch) == newEpoch && e.Slot.Time().Equal(slot) {
				return true
			}
		}
		return false
	}) {
		t.Errorf("hold: the new leader %s did not fire slot %s", who.Name, slot.UTC().Format("15:04:05"))
	}
	p.SetMode(ModePass)
	releasedAt := time.Now()

	var reason string
	if !Poll(5*time.Second, 50*time.Millisecond, func() bool {
		terms, err := f.backend.History(ctxFor(t, 5*time.Second), 20)
		if err != nil {
			return false
		}
		for _, tm := range terms {
			if int64(tm.Epoch) == oldEpoch {
				reason = string(tm.Reason)
			}
		}
		return reason == "fenced"
	}) {
		t.Errorf("hold: the store did not record the held term %d as fenced after its traffic arrived (reason %q): the delayed claim was not refused, or never arrived", oldEpoch, reason)
	}
	for _, j := range allJobs {
		a := Analyze(j, f.ReadStream(j), interval)
		o, n := a.SpanOfEpoch(oldEpoch), a.SpanOfEpoch(newEpoch)
		if o != nil && o.Last.Time().After(heldAt) {
			t.Errorf("hold: %s: the held term %d has an entry for slot %s, after its traffic was held at %s", j, oldEpoch, o.Last, heldAt.Format("15:04:05.000"))
		}
		if o != nil && n != nil && !o.LastAt.Before(n.FirstAt) {
			t.Errorf("hold: %s: the held term %d appended at %s, after the new term began at %s", j, oldEpoch, o.LastAt, n.FirstAt)
		}
	}
	if !Poll(2*ttl, 50*time.Millisecond, func() bool {
		code, _, err := leader.Get("/readyz")
		return err == nil && code == 200
	}) {
		t.Errorf("hold: %s /readyz not 200 after the release", leader.Name)
	}
	t.Logf("hold: %s (epoch %d) held at %s; %s became leader (epoch %d) after %s; traffic delivered at %s; the store recorded term %d as %q",
		leader.Name, oldEpoch, heldAt.Format("15:04:05.000"), who.Name, newEpoch, line.Time.Sub(heldAt).Round(time.Millisecond),
		releasedAt.Format("15:04:05.000"), oldEpoch, reason)
	return fmt.Sprintf("hold: %s's claim for slot %s, sent while it trusted its lease, was held in the network until %s had taken over (%s later) and fired that slot; delivered then, the store refused it: term %d recorded as %q, no entry of it after the hold.",
		leader.Name, slot.UTC().Format("15:04:05"), who.Name, fmtDur(line.Time.Sub(heldAt)), oldEpoch, reason)
}

// isolationRounds cuts the leader off its store through its proxy, once
// with connections reset (cut) and once silently (blackhole): the isolated
// leader must stop before a standby is granted the lease, its term must
// write nothing after the new one began, and after the heal (ready within
// healWithin) it rejoins as a standby. It returns the takeover times, the
// report's notes and the leader at the end.
func isolationRounds(t *testing.T, f *Fleet, proxies map[*Replica]*Proxy, leader *Replica, healWithin time.Duration) (takeovers []time.Duration, notes []string, _ *Replica) {
	t.Helper()
	for _, mode := range []ProxyMode{ModeCut, ModeBlackhole} {
		oldEpoch := leader.Epoch()
		marks := f.Marks()
		p := proxies[leader]
		WaitPhase(500 * time.Millisecond)
		cutAt := time.Now()
		p.SetMode(mode)

		// Watch the isolated leader's own view: when does it stop leading?
		var stoppedAt time.Time
		if !Poll(2*ttl, 20*time.Millisecond, func() bool {
			m, err := leader.Metrics()
			if err == nil && m.Get("scheduler_is_leader") == 0 {
				stoppedAt = time.Now()
				return true
			}
			return false
		}) {
			t.Fatalf("%s: the isolated leader %s still reports scheduler_is_leader 1 after %s", mode, leader.Name, 2*ttl)
		}
		who, line, ok := f.AwaitBecameLeader(2*ttl+slack, marks, leader, oldEpoch)
		if !ok {
			t.Fatalf("%s: no standby took over from the isolated leader %s", mode, leader.Name)
		}
		newEpoch := line.Int("epoch")
		took := line.Time.Sub(cutAt)
		takeovers = append(takeovers, took)
		// The old leader observably stopped (upper bound: the poll that saw
		// 0) before the new one was granted the lease.
		if !stoppedAt.Before(line.Time) {
			t.Errorf("%s: the isolated leader %s still led at %s, when %s became leader at %s",
				mode, leader.Name, stoppedAt.Format("15:04:05.000"), who.Name, line.Time.Format("15:04:05.000"))
		}
		if code, _, err := leader.Get("/readyz"); err == nil && code == http.StatusOK {
			t.Errorf("%s: the isolated replica %s reports ready", mode, leader.Name)
		}
		if !Poll(2*ttl, 50*time.Millisecond, func() bool {
			return Analyze(jobDup, f.ReadStream(jobDup), interval).SpanOfEpoch(newEpoch) != nil
		}) {
			t.Fatalf("%s: the new leader %s (epoch %d) fired nothing", mode, who.Name, newEpoch)
		}
		Settle(time.Second)

		// Heal: the old leader rejoins as a standby.
		p.SetMode(ModePass)
		healAt := time.Now()
		if !Poll(healWithin, 50*time.Millisecond, func() bool {
			code, _, err := leader.Get("/readyz")
			return err == nil && code == http.StatusOK
		}) {
			t.Errorf("%s: %s /readyz not 200 within %s of the heal", mode, leader.Name, healWithin)
		}
		readyAfter := time.Since(healAt)
		m := f.Scrape(leader)
		if m.Get("scheduler_is_leader") != 0 {
			t.Errorf("%s: the healed replica %s reports scheduler_is_leader 1", mode, leader.Name)
		}
		if !leader.Alive() {
			t.Errorf("%s: %s exited", mode, leader.Name)
		}
		// Its old term wrote nothing after the new one began.
		for _, j := range allJobs {
			a := Analyze(j, f.ReadStream(j), interval)
			o, n := a.SpanOfEpoch(oldEpoch), a.SpanOfEpoch(newEpoch)
			if o != nil && n != nil && (o.Last >= n.First || !o.LastAt.Before(n.FirstAt)) {
				t.Errorf("%s: %s: the isolated term %d fired slot %s (at %s), not before the new term's first %s (at %s)",
					mode, j, oldEpoch, o.Last, o.LastAt, n.First, n.FirstAt)
			}
		}
		// It logs the end of its term (after trying to release, which can
		// take the release timeout on a silent link).
		var stopLine LogLine
		if !f.Await(2*ttl, func() bool {
			var ok bool
			stopLine, ok = leader.FindLog(marks[leader], func(l LogLine) bool {
				return l.Msg == "stopped leading" && l.Int("epoch") == oldEpoch
			})
			return ok
		}) {
			t.Errorf("%s: %s logged no \"stopped leading\" for epoch %d", mode, leader.Name, oldEpoch)
		}
		t.Logf("%s: isolated %s (epoch %d) at %s; it stopped leading after %s (reason %q); %s became leader (epoch %d) after %s; healed, ready again after %s",
			mode, leader.Name, oldEpoch, cutAt.Format("15:04:05.000"), stoppedAt.Sub(cutAt).Round(time.Millisecond), stopLine.Str("reason"),
			who.Name, newEpoch, took.Round(time.Millisecond), readyAfter.Round(time.Millisecond))
		notes = append(notes, fmt.Sprintf("%s: the isolated leader stopped %s after the fault (seen on its /metrics), %s before %s was granted the lease (%s after the fault); ready again %s after the heal.",
			mode, fmtDur(stoppedAt.Sub(cutAt)), fmtDur(line.Time.Sub(stoppedAt)), who.Name, fmtDur(took), fmtDur(readyAfter)))
		leader = who
		Settle(2 * time.Second)
	}
	return takeovers, notes, leader
}
