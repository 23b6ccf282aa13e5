//go:build verify

package verify

// The scenarios on etcd (backend: etcd): three replicas of the same jobs
// as on Redis, on a three-member cluster of real etcd processes, their
// ticks read back through the etcd Backend's streams. Steady state,
// kill -9 of the onetick leader and the rolling deploy run the Redis
// scenarios' own code and assertions; kill -9 of the etcd leader member
// and the partition of the onetick leader from etcd are etcd's own.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/etcdtest"
)

// TestEtcdSteadyState: as TestSteadyState, for 30s.
func TestEtcdSteadyState(t *testing.T) {
	const scenario = "15a. etcd: steady state"
	Scenario(t, scenario)
	steadyState(t, scenario, NewEtcdFleet(t, scenario).Fleet, 30*time.Second)
}

// TestEtcdKillLeader: as TestKillLeader (kill -9 of the onetick leader),
// three kills.
func TestEtcdKillLeader(t *testing.T) {
	const scenario = "15b. etcd: kill -9 onetick leader"
	Scenario(t, scenario)
	killLeader(t, scenario, NewEtcdFleet(t, scenario).Fleet, 3)
}

// TestEtcdRollingDeploy: as TestRollingDeploy.
func TestEtcdRollingDeploy(t *testing.T) {
	const scenario = "15c. etcd: rolling deploy"
	Scenario(t, scenario)
	rollingDeploy(t, scenario, NewEtcdFleet(t, scenario).Fleet)
}

// TestEtcdKillEtcdLeader kills the etcd member that leads the cluster
// (SIGKILL), twice; each time the two others elect a leader, the
// replicas' clients fail over to them, and the killed member is restarted
// on its data. Asserted: nothing fired twice, never two onetick leaders,
// prefer: duplicate misses nothing, every job fires again, the missed
// counters match the streams. Measured: the etcd election, each job's
// time from the kill to its next append, onetick leadership changes.
func TestEtcdKillEtcdLeader(t *testing.T) {
	const scenario = "15d. etcd: kill -9 etcd leader member"
	Scenario(t, scenario)
	ef := NewEtcdFleet(t, scenario)
	f, c := ef.Fleet, ef.Cluster
	f.StoreFaults = true
	for i := 1; i <= 3; i++ {
		f.Start(fmt.Sprintf("r%d", i))
	}
	f.WaitLeader(2 * ttl)
	Settle(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := c.Client(t)

	var nexts []time.Duration
	var notes []string
	for round := 1; round <= 2; round++ {
		old, err := c.AwaitLeader(ctx, cl, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		before := f.LeadershipChanges()
		WaitPhase(500 * time.Millisecond)
		killedAt := time.Now()
		c.Kill(old)
		now, err := c.AwaitLeader(ctx, cl, 15*time.Second)
		if err != nil {
			t.Fatalf("round %d: after the kill of %s: %v", round, c.Name(old), err)
		}
		elected := time.Since(killedAt)
		// Each job's first append after the kill.
		next := map[string]time.Duration{}
		if !Poll(4*ttl, 100*time.Millisecond, func() bool {
			for _, j := range allJobs {
				if _, ok := next[j]; ok {
					continue
				}
				for _, e := range f.ReadStream(j) {
					if e.At.After(killedAt) {
						next[j] = e.At.Sub(killedAt)
						break
					}
				}
			}
			return len(next) == len(allJobs)
		}) {
			t.Fatalf("round %d: jobs firing again within %s of the kill of the etcd leader: %v", round, 4*ttl, next)
		}
		var worst time.Duration
		for _, d := range next {
			worst = max(worst, d)
		}
		nexts = append(nexts, worst)
		ls, err := f.Leaders()
		if err != nil || len(ls) != 1 {
			t.Errorf("round %d: onetick leaders after the etcd election: %v (err %v), want one", round, names(ls), err)
		}
		restartAt := time.Now()
		if err := c.Restart(old); err != nil {
			t.Fatalf("round %d: restart %s: %v", round, c.Name(old), err)
		}
		rejoined := time.Since(restartAt)
		Settle(3 * time.Second)
		changed := f.LeadershipChanges() - before
		notes = append(notes, fmt.Sprintf("round %d: etcd leader %s killed, %s elected %s later; next append %s %s, %s %s, %s %s after the kill; %v onetick leadership change(s); %s restarted and serving %s later.",
			round, c.Name(old), c.Name(now), fmtDur(elected), jobMissed, fmtDur(next[jobMissed]), jobGrace, fmtDur(next[jobGrace]),
			jobDup, fmtDur(next[jobDup]), changed, c.Name(old), fmtDur(rejoined)))
		t.Log(notes[len(notes)-1])
	}
	as := f.Snapshot()
	CheckInvariants(t, as, jobDup)
	f.CheckMissedCounters(as)
	AddRow(t, &Row{Scenario: scenario, Runs: 2, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		TimeLabel: "kill → every job appended again", Times: nexts, Notes: notes})
}

// TestEtcdPartition cuts the onetick leader off etcd, first resetting
// its connections, then silently dropping its traffic (isolationRounds,
// as on Redis). Each replica reaches etcd through a proxy of its own to
// one member (a replica beside its local member), so the cut isolates
// the replica, not an etcd member: the cluster itself is not partitioned
// here (see docs/etcd.md).
func TestEtcdPartition(t *testing.T) {
	const scenario = "15e. etcd: partition onetick leader↔etcd"
	Scenario(t, scenario)
	ef := NewEtcdFleet(t, scenario)
	f := ef.Fleet
	f.StoreFaults = true
	proxies := map[*Replica]*Proxy{}
	for i, m := range ef.Cluster.Members {
		p := StartProxy(t, fmt.Sprintf("127.0.0.1:%d", m.Port))
		r := ef.StartVia(fmt.Sprintf("r%d", i+1), "http://"+p.Addr())
		proxies[r] = p
	}
	leader := f.WaitLeader(2 * ttl)
	Settle(2 * time.Second)
	takeovers, notes, _ := isolationRounds(t, f, proxies, leader, 3*ttl)
	Settle(2 * time.Second)
	f.WaitLeader(2 * ttl)
	as := f.Snapshot()
	CheckInvariants(t, as, jobDup)
	f.CheckMissedCounters(as)
	for _, g := range as[jobMissed].Gaps {
		if g.FromTerm == g.ToTerm {
			t.Errorf("%s: %d slots skipped after %s while %s led throughout", jobMissed, g.Missing, g.After, g.FromTerm)
		}
		if g.Missing > maxMissedPerFailover {
			t.Errorf("%s: %d slots missed between %s and %s, want <= %d", jobMissed, g.Missing, g.FromTerm, g.ToTerm, maxMissedPerFailover)
		}
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 2, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		TimeLabel: "fault → became leader", Times: takeovers, Notes: notes})
}

// TestEtcdPartitionMember partitions one etcd member: its peer traffic
// cut both ways (a gate in front of each member's peer port,
// etcdtest.StartPartitionableCluster) and the replicas' client traffic
// to it cut too (a proxy per member in front of its client port, shared
// by the replicas). First the etcd leader member, its client
// connections reset; then a follower, its client traffic silently
// dropped. Each time the partition lasts 2×ttl and is then healed.
// Asserted: the majority elects a leader, nothing fired twice, prefer:
// duplicate misses nothing, every job appends again (with connections
// reset: during the partition, with one onetick leader at its end;
// with traffic dropped: by 4×ttl after the heal), the missed counters
// match the streams. Measured: etcd's election, each job's time from
// the fault to its next append, onetick leadership changes. With the
// traffic dropped the replicas' calls that went to the member hang (the
// client has no keepalive), which is why that round asserts less.
func TestEtcdPartitionMember(t *testing.T) {
	const scenario = "15f. etcd: partition of one etcd member"
	Scenario(t, scenario)
	c := etcdtest.StartPartitionableCluster(t, 3)
	ef := newEtcdFleet(t, scenario, c)
	f := ef.Fleet
	f.StoreFaults = true
	var proxies []*Proxy
	var urls []string
	for _, m := range c.Members {
		p := StartProxy(t, fmt.Sprintf("127.0.0.1:%d", m.Port))
		proxies = append(proxies, p)
		urls = append(urls, "http://"+p.Addr())
	}
	for i := 1; i <= 3; i++ {
		ef.StartOn(fmt.Sprintf("r%d", i), urls)
	}
	f.WaitLeader(2 * ttl)
	Settle(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := c.Client(t)

	var nexts []time.Duration
	var notes []string
	for round, mode := range []ProxyMode{ModeCut, ModeBlackhole} {
		leader, err := c.AwaitLeader(ctx, cl, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		victim, what := leader, "leader"
		if round == 1 {
			victim, what = (leader+1)%len(c.Members), "follower"
		}
		before := f.LeadershipChanges()
		WaitPhase(500 * time.Millisecond)
		at := time.Now()
		c.Partition(victim)
		proxies[victim].SetMode(mode)
		// The majority's leader, as the two other members see it.
		var elected time.Duration
		now := -1
		if !Poll(15*time.Second, 20*time.Millisecond, func() bool {
			now = -1
			for k, m := range c.Members {
				if k == victim {
					continue
				}
				sctx, scancel := context.WithTimeout(ctx, time.Second)
				st, err := cl.Status(sctx, m.Endpoint())
				scancel()
				if err != nil || st.Leader == 0 || st.Leader == c.ID(victim) {
					return false
				}
				for j := range c.Members {
					if c.ID(j) == st.Leader {
						if now >= 0 && now != j {
							return false // the two disagree
						}
						now = j
					}
				}
			}
			return now >= 0
		}) {
			t.Fatalf("round %d: the majority elects no leader within 15s of partitioning %s", round+1, c.Name(victim))
		}
		elected = time.Since(at)
		// Each job's first append after the fault: during the partition
		// (asserted when client connections are reset, measured when
		// dropped: see docs/etcd.md), else after the heal (asserted).
		next := map[string]time.Duration{}
		appended := func() bool {
			for _, j := range allJobs {
				if _, ok := next[j]; ok {
					continue
				}
				for _, e := range f.ReadStream(j) {
					if e.At.After(at) {
						next[j] = e.At.Sub(at)
						break
					}
				}
			}
			return len(next) == len(allJobs)
		}
		during := Poll(time.Until(at.Add(2*ttl)), 100*time.Millisecond, appended)
		if !during && mode == ModeCut {
			t.Errorf("round %d: jobs appending again within the %s partition: %v", round+1, 2*ttl, next)
		}
		leaders := "one onetick leader at the end of the partition"
		if ls, err := f.Leaders(); err != nil || len(ls) != 1 {
			leaders = fmt.Sprintf("onetick leaders at the end of the partition: %v (err %v)", names(ls), err)
			if mode == ModeCut {
				t.Errorf("round %d: %s, want one", round+1, leaders)
			}
		}
		time.Sleep(time.Until(at.Add(2 * ttl)))
		c.Heal(victim)
		proxies[victim].SetMode(ModePass)
		healedAt := time.Now()
		if !during && !Poll(4*ttl, 100*time.Millisecond, appended) {
			t.Fatalf("round %d: jobs appending again within %s of the heal: %v", round+1, 4*ttl, next)
		}
		var worst time.Duration
		for _, d := range next {
			worst = max(worst, d)
		}
		nexts = append(nexts, worst)
		when := "during the partition"
		if !during {
			when = fmt.Sprintf("only after the heal (healed %s after the fault)", fmtDur(healedAt.Sub(at)))
		}
		Settle(3 * time.Second)
		if _, err := c.AwaitLeader(ctx, cl, 15*time.Second); err != nil {
			t.Errorf("round %d: after the heal: %v", round+1, err)
		}
		changed := f.LeadershipChanges() - before
		notes = append(notes, fmt.Sprintf("round %d: %s %s partitioned for %s (client traffic: %s); the majority's leader %s %s after the fault; next append %s %s, %s %s, %s %s after it, %s; %s; %v onetick leadership change(s) over the round.",
			round+1, what, c.Name(victim), fmtDur(2*ttl), mode, c.Name(now), fmtDur(elected), jobMissed, fmtDur(next[jobMissed]), jobGrace, fmtDur(next[jobGrace]),
			jobDup, fmtDur(next[jobDup]), when, leaders, changed))
		t.Log(notes[len(notes)-1])
	}
	as := f.Snapshot()
	CheckInvariants(t, as, jobDup)
	f.CheckMissedCounters(as)
	AddRow(t, &Row{Scenario: scenario, Runs: 2, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as),
		TimeLabel: "fault → every job appended again", Times: nexts, Notes: notes})
}
