//go:build verify

package verify

// A Redis Cluster of three primaries with one replica each, and three
// onetick processes configured with the cluster backend (every key under
// the hash tag {verify}), jobs every 250 ms, in both durability modes. A
// consumer reads every entry through a cluster client. The steady state
// must fire every slot once; then the primary holding onetick's hash slot
// fails over, twice by kill -9 and twice by CLUSTER FAILOVER (the
// coordinated handover, which must fire nothing twice); after each the
// scheduler must fire again. The rest is measured and reported.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/internal/redistest"
	otredis "github.com/onetick/onetick/redis"
)

var clusterFaults = []fault{
	{"coordinated", "CLUSTER FAILOVER (coordinated)"},
	{"kill", "kill -9 of the primary of onetick's slot"},
}

const clusterRounds = 2

func TestClusterFailovers(t *testing.T) { inModes(t, clusterRun) }

func clusterScenario(key, mode string) string {
	if key == "steady" {
		return "12a. Cluster: steady state, durability " + mode
	}
	return faultScenario("12", "Cluster", 'b', clusterFaults, key, mode)
}

func clusterRun(t *testing.T, mode string) {
	Scenario(t, clusterScenario("steady", mode))
	for _, f := range clusterFaults {
		Scenario(t, clusterScenario(f.key, mode))
	}
	o := redistest.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1, NodeOptions: []redistest.Option{redistest.KeyspaceEvents()}}
	if mode == "replicated" {
		o.NodeOptions = append(o.NodeOptions, redistest.Args("--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"))
	}
	cl := redistest.StartCluster(t, o)
	tagged := otredis.HashTagged(prefix)
	yaml := redisTopologyYAML(fmt.Sprintf(`    cluster:
      addrs: [%s]
`, strings.Join(cl.Addrs(), ", ")), mode)
	newClient := func() *goredis.ClusterClient {
		co := cl.ClusterOptions()
		co.ClusterStateReloadInterval = time.Second // as onetick's own client
		return goredis.NewClusterClient(co)
	}
	cc := newClient()
	defer cc.Close()
	r := startFailoverRun(t, "12. Cluster fleet, durability "+mode, yaml, newClient(), tagged, nil, cc)
	steadyFrom := time.Now()
	Settle(8 * time.Second)

	ctx := context.Background()
	for _, fault := range clusterFaults {
		for round := 1; round <= clusterRounds; round++ {
			old := cl.PrimaryFor(tagged)
			ev := r.begin(fault.key, round, old.Addr())
			var repl *redistest.ClusterNode
			switch fault.key {
			case "coordinated":
				rn, err := cl.FailoverReplicaOf(ctx, old, redistest.Coordinated)
				if err != nil {
					t.Fatalf("%s round %d: %v", fault.key, round, err)
				}
				repl = rn
			case "kill":
				repl = cl.ReplicasOf(old)[0]
				old.Kill()
			}
			if _, err := cl.WaitRole(repl, "master", 60*time.Second); err != nil {
				t.Fatalf("%s round %d: the replica %s did not take over: %v", fault.key, round, repl.Addr(), err)
			}
			r.switched(ev, repl.Addr())
			if fault.key == "kill" {
				old.Restart() // keeps its nodes.conf: rejoins, as a replica of the new primary
			}
			if _, err := cl.WaitRole(old, "slave", 60*time.Second); err != nil {
				t.Fatalf("%s round %d: the old primary %s did not become a replica: %v", fault.key, round, old.Addr(), err)
			}
			if err := cl.WaitHealthy(60 * time.Second); err != nil {
				t.Fatalf("%s round %d: the cluster did not heal: %v", fault.key, round, err)
			}
			r.firstTick(ev, nil)
			r.settled(ev, func(ctx context.Context, s, start string) ([]goredis.XMessage, error) {
				return cc.XRange(ctx, s, start, "+").Result()
			}, "healed (old primary a replica, ticks flowing)")
		}
	}
	r.finish()
	events, steady, cons := r.events, r.steady, r.cons
	nSteady := 0
	for _, e := range cons.Entries() {
		if !e.At.Before(steadyFrom) && e.At.Before(events[0].Start.Add(-time.Second)) {
			nSteady++
		}
	}
	sdup := steady.Dups[jobQuickMiss] + steady.Dups[jobQuickDup]
	smiss := steady.Missed[jobQuickMiss] + steady.Missed[jobQuickDup]
	if sdup > 0 || smiss > 0 {
		t.Errorf("steady state: %d ticks seen twice, %d slots missed, want none", sdup, smiss)
	}
	if nSteady < 40 {
		t.Errorf("steady state: %d entries in %s, want about %d", nSteady, events[0].Start.Sub(steadyFrom).Round(time.Second), int(2*events[0].Start.Sub(steadyFrom)/quick))
	}
	AddRow(t, &Row{Scenario: clusterScenario("steady", mode), Runs: 1, Duplicates: sdup,
		Missed: fmt.Sprintf("%s %d, %s %d", jobQuickMiss, steady.Missed[jobQuickMiss], jobQuickDup, steady.Missed[jobQuickDup]),
		Notes: []string{fmt.Sprintf("3 primaries with a replica each; onetick's slot (%s) on one primary; %d entries read by the consumer in %s before the first fault; two replicas leading at once %s; consumer read errors over the whole run (all faults): %d.",
			tagged, nSteady, fmtDur(events[0].Start.Sub(steadyFrom).Round(time.Millisecond)), fmtDur(steady.Overlap), len(cons.Errors()))}})
	r.addFaultRows(clusterFaults, func(key string) string { return clusterScenario(key, mode) }, "first tick after it", "coordinated", nil)
}
