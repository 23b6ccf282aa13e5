//go:build verify

package verify

// Process faults of the leader: kill -9 (crash), SIGTERM during a rolling
// deploy (graceful handover), SIGSTOP longer than the lease (a paused
// leader that wakes up believing it leads).

import (
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"
)

// maxMissedPerFailover: with a 1ms grace a crash loses the slots of up
// to one ttl, plus the one the takeover lands on.
var maxMissedPerFailover = int(math.Ceil(float64(ttl)/float64(interval))) + 1

// TestKillLeader kills the leader with SIGKILL four times, starting a
// replacement replica each time. A standby takes over within one ttl
// plus the renew period (measured from the kill to the new term's first
// claimed tick); the 1ms-grace job skips at most ceil(ttl/interval)+1
// slots per failover and counts exactly the slots it skips; the others
// catch up; nothing is fired twice.
func TestKillLeader(t *testing.T) {
	const scenario = "2. kill -9 leader"
	Scenario(t, scenario)
	killLeader(t, scenario, NewFleet(t, scenario, StartRedis(t)), 4)
}

// killLeader is TestKillLeader's scenario on the fleet f (of any store).
func killLeader(t *testing.T, scenario string, f *Fleet, rounds int) {
	for i := 1; i <= 3; i++ {
		f.Start(fmt.Sprintf("r%d", i))
	}
	leader := f.WaitLeader(2 * ttl)
	Settle(3 * time.Second)

	bound := ttl + renew + slack
	var takeovers, logTakeovers []time.Duration
	var notes []string
	for round := 1; round <= rounds; round++ {
		oldEpoch := leader.Epoch()
		marks := f.Marks()
		WaitPhase(500 * time.Millisecond)
		killedAt := f.Kill(leader)
		repl := f.Start(fmt.Sprintf("r%d", 3+round))
		who, line, ok := f.AwaitBecameLeader(ttl+renew+5*time.Second, marks, leader, oldEpoch)
		if !ok {
			t.Fatalf("round %d: no replica became leader after %s was killed", round, leader.Name)
		}
		newEpoch := line.Int("epoch")
		// The new term's first claimed tick, from the streams.
		var first time.Time
		if !Poll(bound+5*time.Second, 50*time.Millisecond, func() bool {
			first = time.Time{}
			for _, j := range allJobs {
				for _, e := range f.ReadStream(j) {
					if int64(e.Epoch) == newEpoch && (first.IsZero() || e.At.Before(first)) {
						first = e.At
					}
				}
			}
			return !first.IsZero()
		}) {
			t.Fatalf("round %d: the new leader %s (epoch %d) claimed no tick", round, who.Name, newEpoch)
		}
		took := first.Sub(killedAt)
		takeovers = append(takeovers, took)
		logTakeovers = append(logTakeovers, line.Time.Sub(killedAt))
		t.Logf("round %d: killed %s (epoch %d); %s became leader (epoch %d) after %s, first tick after %s; replacement %s",
			round, leader.Name, oldEpoch, who.Name, newEpoch, line.Time.Sub(killedAt).Round(time.Millisecond), took.Round(time.Millisecond), repl.Name)
		if took > bound {
			t.Errorf("round %d: takeover took %s (kill to first tick of epoch %d), want <= ttl+renew+slack = %s", round, took, newEpoch, bound)
		}
		leader = who
		Settle(2 * time.Second)
	}

	as := f.Snapshot()
	CheckInvariants(t, as, jobGrace, jobDup)
	// The 1ms-grace job: bounded gaps at failovers, none elsewhere, and the
	// missed counter agrees with the stream.
	a := as[jobMissed]
	failoverGaps := 0
	for _, g := range a.Gaps {
		if g.FromTerm == g.ToTerm {
			t.Errorf("%s: %d slots missed inside term %s (after %s), not at a failover", jobMissed, g.Missing, g.FromTerm, g.After)
			continue
		}
		failoverGaps++
		if g.Missing > maxMissedPerFailover {
			t.Errorf("%s: failover %s -> %s missed %d slots, want <= ceil(ttl/interval)+1 = %d", jobMissed, g.FromTerm, g.ToTerm, g.Missing, maxMissedPerFailover)
		}
	}
	f.CheckMissedCounters(as)
	for _, j := range allJobs {
		if d := f.SumCounter("scheduler_job_duplicate_ticks_total", j); d != 0 {
			t.Logf("%s: the store refused %v duplicate claims", j, d)
		}
	}
	if n := len(a.Terms); n != rounds+1 {
		t.Errorf("%s: %d terms fired, want %d (one per failover plus the first)", jobMissed, n, rounds+1)
	}
	notes = append(notes, fmt.Sprintf("%d kills at mid-second; time from SIGKILL to the new term's first stream entry: %v (to its \"became leader\" line: %v); bound ttl+renew+1s = %s.",
		rounds, roundAll(takeovers), roundAll(logTakeovers), bound))
	notes = append(notes, fmt.Sprintf("%s skipped %d slots in %d failover gaps (bound %d per failover); the missed counters summed to %v. %s and %s caught up (catch-up ticks: %v, %v).",
		jobMissed, len(a.Missed), failoverGaps, maxMissedPerFailover, f.SumCounter("scheduler_job_missed_ticks_total", jobMissed), jobGrace, jobDup,
		f.SumCounter("scheduler_job_catchup_ticks_total", jobGrace), f.SumCounter("scheduler_job_catchup_ticks_total", jobDup)))
	AddRow(t, &Row{Scenario: scenario, Runs: rounds, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		TimeLabel: "kill → first tick", Times: takeovers, Notes: notes})
}

// A job whose interval is longer than its grace.
const (
	jobEvery5      = "every-5s"
	every5Interval = 5 * time.Second
)

const every5YAML = fleetYAML + `  - name: ` + jobEvery5 + `
    schedule: "@every 5s"
    prefer: missed
    grace: 1ms
    stream: ` + prefix + `:` + jobEvery5 + `
`

// TestKillLeaderLongInterval kills the leader of a "@every 5s", prefer:
// missed job half a second before a slot, so that the slot is older than
// the grace when a standby takes over (2-3s later). The new leader must
// skip it and then wait for the next slot like any leader: idle, not
// spinning. Also the skipped slot must be fired by nobody and counted.
func TestKillLeaderLongInterval(t *testing.T) {
	const scenario = "2b. kill -9 before a slot of a 5s job"
	Scenario(t, scenario)
	f := NewFleetWith(t, scenario, StartRedis(t), every5YAML)
	f.Start("r1")
	f.Start("r2")
	leader := f.WaitLeader(2 * ttl)
	// Wait for a fired slot (the persisted cursor), then for the instant
	// 0.5s before the next one.
	if !Poll(every5Interval+slack, 100*time.Millisecond, func() bool { return len(f.ReadStream(jobEvery5)) > 0 }) {
		t.Fatalf("%s fired nothing in %s", jobEvery5, every5Interval+slack)
	}
	now := time.Now()
	slot := now.Truncate(every5Interval).Add(every5Interval)
	if time.Until(slot) < time.Second {
		slot = slot.Add(every5Interval)
	}
	time.Sleep(time.Until(slot.Add(-500 * time.Millisecond)))
	marks := f.Marks()
	killedAt := f.Kill(leader)
	who, line, ok := f.AwaitBecameLeader(ttl+renew+slack, marks, leader, leader.Epoch())
	if !ok {
		t.Fatalf("no standby took over from %s", leader.Name)
	}
	if age := line.Time.Sub(slot); age <= time.Second {
		t.Fatalf("takeover %s after the slot: within the (1s) grace, nothing to skip; the lease (renewed at most renew before the kill) should have kept the standby out for longer", age)
	}
	// CPU of the new leader from just after the takeover until just before
	// the next slot: it has nothing to do.
	next := slot.Add(every5Interval)
	m0 := f.Scrape(who)
	t0 := time.Now()
	time.Sleep(time.Until(next.Add(-200 * time.Millisecond)))
	m1 := f.Scrape(who)
	t1 := time.Now()
	cpu := m1.Get("process_cpu_seconds_total") - m0.Get("process_cpu_seconds_total")
	rate := cpu / t1.Sub(t0).Seconds()
	missedBefore := m1.Job("scheduler_job_missed_ticks_total", jobEvery5)
	t.Logf("killed %s at %s, %s took over at %s (%s after the slot at %s); until the next slot it used %.2f CPU-seconds in %s (%.0f%% of a core); missed counter before the next slot: %v",
		leader.Name, killedAt.Format("15:04:05.000"), who.Name, line.Time.Format("15:04:05.000"), line.Time.Sub(slot).Round(time.Millisecond),
		slot.Format("15:04:05"), cpu, t1.Sub(t0).Round(time.Millisecond), 100*rate, missedBefore)
	if rate > 0.25 {
		t.Errorf("the new leader %s used %.0f%% of a core for %s while waiting for the next slot (busy loop): an idle leader should use almost none",
			who.Name, 100*rate, t1.Sub(t0).Round(time.Millisecond))
	}

	// After the next slot: the skipped slot is absent and counted.
	if !Poll(every5Interval, 100*time.Millisecond, func() bool {
		for _, e := range f.ReadStream(jobEvery5) {
			if !e.Slot.Time().Before(next) {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the new leader did not fire the slot at %s", next.Format("15:04:05"))
	}
	WaitPhase(500 * time.Millisecond)
	a := Analyze(jobEvery5, f.ReadStream(jobEvery5), every5Interval)
	t.Log(a)
	if len(a.Duplicates) > 0 {
		t.Errorf("%s: duplicates %v", jobEvery5, fmtSlots(a.Duplicates))
	}
	counted := f.Scrape(who).Job("scheduler_job_missed_ticks_total", jobEvery5) + f.LastMetrics(leader).Job("scheduler_job_missed_ticks_total", jobEvery5)
	if int(counted) != len(a.Missed) {
		t.Errorf("%s: missed counter %v, but the stream misses %d slots %v", jobEvery5, counted, len(a.Missed), fmtSlots(a.Missed))
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 1, Duplicates: len(a.Duplicates), Missed: fmt.Sprintf("%s %d", jobEvery5, len(a.Missed)),
		TimeLabel: "kill → became leader", Times: []time.Duration{line.Time.Sub(killedAt)},
		Notes: []string{fmt.Sprintf("leader killed 0.5s before a slot of a \"@every 5s\" prefer: missed job (grace 1ms, i.e. the engine's 1s floor); the new leader took over %s after that slot and, waiting for the next one, used %.0f%% of a core (%.2f CPU-s in %s); the skipped slot was counted %s.",
			fmtDur(line.Time.Sub(slot)), 100*rate, cpu, fmtDur(t1.Sub(t0)), map[bool]string{true: "at once", false: "only when the next slot fired"}[missedBefore >= 1])}})
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// TestRollingDeploy replaces each of three replicas in turn: start the
// new one, wait until it serves, SIGTERM the old one (exit 0 within 10s).
// Handovers are graceful (release + notification): no slot is missed or
// doubled, even with the 1ms grace.
func TestRollingDeploy(t *testing.T) {
	const scenario = "3. rolling deploy"
	Scenario(t, scenario)
	rollingDeploy(t, scenario, NewFleet(t, scenario, StartRedis(t)))
}

// rollingDeploy is TestRollingDeploy's scenario on the fleet f.
func rollingDeploy(t *testing.T, scenario string, f *Fleet) {
	old := []*Replica{f.Start("v1-a")}
	f.WaitLeader(2 * ttl)
	old = append(old, f.Start("v1-b"), f.Start("v1-c"))
	Settle(3 * time.Second)

	var handovers []time.Duration
	leaderSteps := 0
	for i, o := range old {
		f.Start(fmt.Sprintf("v2-%c", 'a'+i)) // returns once it listens
		ls, err := f.Leaders()
		if err != nil {
			t.Fatal(err)
		}
		wasLeader := len(ls) == 1 && ls[0] == o
		oldEpoch := o.Epoch()
		marks := f.Marks()
		// Mid-second: a handover takes milliseconds; one that straddled a
		// slot would legitimately skip it under a 1ms grace.
		WaitPhase(500 * time.Millisecond)
		termAt := f.Stop(o)
		if _, ok := o.FindLog(marks[o], Msg("onetick stopped")); !ok {
			t.Errorf("%s: no \"onetick stopped\" line after SIGTERM", o.Name)
		}
		if wasLeader {
			leaderSteps++
			if _, ok := o.FindLog(marks[o], Msg("released lease")); !ok {
				t.Errorf("%s led but logged no \"released lease\" on SIGTERM", o.Name)
			}
			who, line, ok := f.AwaitBecameLeader(2*ttl, marks, o, oldEpoch)
			if !ok {
				t.Fatalf("step %d: nobody became leader after the leader %s was stopped", i+1, o.Name)
			}
			d := line.Time.Sub(termAt)
			handovers = append(handovers, d)
			t.Logf("step %d: %s (leader) stopped; %s became leader after %s", i+1, o.Name, who.Name, d.Round(time.Millisecond))
		} else {
			t.Logf("step %d: %s (standby) stopped", i+1, o.Name)
		}
		Settle(2 * time.Second)
	}
	f.WaitLeader(2 * ttl)
	as := f.Snapshot()
	CheckInvariants(t, as, allJobs...)
	f.CheckMissedCounters(as)
	if leaderSteps == 0 {
		t.Error("the leader was never among the replaced replicas")
	}
	for _, j := range allJobs {
		if d := f.SumCounter("scheduler_job_duplicate_ticks_total", j); d != 0 {
			t.Errorf("%s: the store refused %v duplicate claims during the deploy", j, d)
		}
	}
	AddRow(t, &Row{Scenario: scenario, Runs: len(old), Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		TimeLabel: "SIGTERM → became leader", Times: handovers,
		Notes: []string{fmt.Sprintf("%d replicas replaced one at a time with overlap (SIGTERM at mid-second); %d of the steps stopped the leader; handover (SIGTERM of the old leader to the new leader's \"became leader\"): %v.",
			len(old), leaderSteps, roundAll(handovers))}})
}

// TestLongPause stops the leader with SIGSTOP for 2×ttl. A standby takes
// over; when the paused process resumes it must step down without its
// old term writing anything after the new term began.
func TestLongPause(t *testing.T) {
	const scenario = "4. long pause (SIGSTOP 2×ttl)"
	Scenario(t, scenario)
	longPause(t, scenario, NewFleet(t, scenario, StartRedis(t)), 2)
}

// longPause is TestLongPause's scenario on the fleet f.
func longPause(t *testing.T, scenario string, f *Fleet, rounds int) {
	for i := 1; i <= 3; i++ {
		f.Start(fmt.Sprintf("r%d", i))
	}
	var takeovers []time.Duration
	var notes []string
	for round := 1; round <= rounds; round++ {
		leader := f.WaitLeader(2 * ttl)
		Settle(2 * time.Second)
		oldEpoch := leader.Epoch()
		f.Scrape(leader)
		fencedBefore := f.LastMetrics(leader).Job("scheduler_job_fenced_ticks_total", jobDup) +
			f.LastMetrics(leader).Job("scheduler_job_fenced_ticks_total", jobMissed) + f.LastMetrics(leader).Job("scheduler_job_fenced_ticks_total", jobGrace)
		marks := f.Marks()
		// Round 1 pauses between slots, round 2 just before one, so that the
		// resumed process has a tick due at once.
		if round == 1 {
			WaitPhase(500 * time.Millisecond)
		} else {
			WaitPhase(980 * time.Millisecond)
		}
		pausedAt := time.Now()
		if err := leader.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		who, line, ok := f.AwaitBecameLeader(2*ttl, marks, leader, oldEpoch)
		if !ok {
			_ = leader.Signal(syscall.SIGCONT)
			t.Fatalf("round %d: nobody took over from the paused leader %s", round, leader.Name)
		}
		takeovers = append(takeovers, line.Time.Sub(pausedAt))
		time.Sleep(time.Until(pausedAt.Add(2 * ttl)))
		if err := leader.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		resumedAt := time.Now()
		var stopped LogLine
		if !f.Await(2*ttl, func() bool {
			var ok bool
			stopped, ok = leader.FindLog(marks[leader], func(l LogLine) bool {
				return l.Msg == "stopped leading" && l.Int("epoch") == oldEpoch
			})
			return ok
		}) {
			t.Errorf("round %d: %s resumed but logged no \"stopped leading\" for epoch %d", round, leader.Name, oldEpoch)
		}
		var m Metrics
		if !Poll(2*ttl, 50*time.Millisecond, func() bool {
			var err error
			m, err = f.scrape(leader)
			return err == nil && m.Get("scheduler_is_leader") == 0
		}) {
			t.Errorf("round %d: %s still reports scheduler_is_leader 1 after resuming", round, leader.Name)
		}
		fenced := m.Job("scheduler_job_fenced_ticks_total", jobDup) + m.Job("scheduler_job_fenced_ticks_total", jobMissed) +
			m.Job("scheduler_job_fenced_ticks_total", jobGrace) - fencedBefore
		_, sawFence := leader.FindLog(marks[leader], MsgPrefix("claim fenced by the store"))
		if !leader.Alive() {
			t.Errorf("round %d: %s exited after resuming", round, leader.Name)
		}
		// What the stale term still planned (and counted) after resuming.
		staleSkipped := int64(0)
		for _, l := range leader.Lines()[marks[leader]:] {
			if l.Msg == "gap: slots skipped" && l.Int("epoch") == oldEpoch {
				staleSkipped += l.Int("skipped")
			}
		}
		how := fmt.Sprintf("stepped down %s after SIGCONT, reason %q, fenced claims %v (log: %v); its stale term logged and counted %d skipped slots on resuming",
			stopped.Time.Sub(resumedAt).Round(time.Millisecond), stopped.Str("reason"), fenced, sawFence, staleSkipped)
		t.Logf("round %d: paused %s (epoch %d); %s became leader (epoch %d) after %s; resumed: %s",
			round, leader.Name, oldEpoch, who.Name, line.Int("epoch"), line.Time.Sub(pausedAt).Round(time.Millisecond), how)
		notes = append(notes, fmt.Sprintf("round %d: %s %s.", round, leader.Name, how))

		// Nothing of the old term after the new term's first slot.
		newEpoch := line.Int("epoch")
		if !Poll(ttl, 50*time.Millisecond, func() bool {
			return Analyze(jobDup, f.ReadStream(jobDup), interval).SpanOfEpoch(newEpoch) != nil
		}) {
			t.Fatalf("round %d: the new leader (epoch %d) fired nothing", round, newEpoch)
		}
		for _, j := range allJobs {
			a := Analyze(j, f.ReadStream(j), interval)
			o, n := a.SpanOfEpoch(oldEpoch), a.SpanOfEpoch(newEpoch)
			if o == nil || n == nil {
				continue // the 1ms-grace job may not have fired yet in the new term
			}
			if o.Last >= n.First {
				t.Errorf("round %d: %s: the paused term %d fired slot %s, not before the new term's first slot %s", round, j, oldEpoch, o.Last, n.First)
			}
			if !o.LastAt.Before(n.FirstAt) {
				t.Errorf("round %d: %s: the paused term %d appended at %s, after the new term began at %s", round, j, oldEpoch, o.LastAt, n.FirstAt)
			}
		}
		// It rejoins as a standby.
		if code, _, err := leader.Get("/readyz"); err != nil || code != 200 {
			t.Errorf("round %d: %s /readyz = %d, %v after resuming", round, leader.Name, code, err)
		}
	}
	Settle(2 * time.Second)
	as := f.Snapshot()
	CheckInvariants(t, as, jobGrace, jobDup)
	f.CheckMissedCounters(as)
	for _, g := range as[jobMissed].Gaps {
		if g.Missing > maxMissedPerFailover {
			t.Errorf("%s: %d slots missed between %s and %s, want <= %d", jobMissed, g.Missing, g.FromTerm, g.ToTerm, maxMissedPerFailover)
		}
	}
	AddRow(t, &Row{Scenario: scenario, Runs: rounds, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		TimeLabel: "SIGSTOP → became leader", Times: takeovers, Notes: notes})
}
