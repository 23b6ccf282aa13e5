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

var clusterFaults = []struct{ key, name string }{
	{"coordinated", "CLUSTER FAILOVER (coordinated)"},
	{"kill", "kill -9 of the primary of onetick's slot"},
}

const clusterRounds = 2

func TestClusterFailovers(t *testing.T) {
	for _, mode := range []string{"async", "replicated"} {
		t.Run(mode, func(t *testing.T) { clusterRun(t, mode) })
	}
}

func clusterScenario(key, mode string) string {
	if key == "steady" {
		return "12a. Cluster: steady state, durability " + mode
	}
	for i, f := range clusterFaults {
		if f.key == key {
			return fmt.Sprintf("12%c. Cluster: %s, durability %s", 'b'+i, f.name, mode)
		}
	}
	return "12. Cluster " + key
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
	yaml := fmt.Sprintf(`backend:
  redis:
    cluster:
      addrs: [%s]
    prefix: %s
    durability: %s
    replicas: 1
    replication_timeout: 100ms
`, strings.Join(cl.Addrs(), ", "), prefix, mode) + topologyLease
	newClient := func() *goredis.ClusterClient {
		co := cl.ClusterOptions()
		co.ClusterStateReloadInterval = time.Second // as onetick's own client
		return goredis.NewClusterClient(co)
	}
	// Renewal latency: to the all-runs figure (see s11).
	f := NewFleetOn(t, "12. Cluster fleet, durability "+mode, yaml, newClient(), tagged)
	for i := 1; i <= 3; i++ {
		f.Start(fmt.Sprintf("r%d", i))
	}
	f.WaitLeader(2 * ttl)
	streams := map[string]string{}
	var keys []string
	for _, j := range quickJobs {
		streams[j] = tagged + ":stream:" + j
		keys = append(keys, streams[j])
	}
	cc := newClient()
	defer cc.Close()
	cons := startConsumer(keys, nil, cc, "")
	defer cons.close()
	if _, ok := cons.awaitFlow(10*time.Second, time.Time{}, 8, nil); !ok {
		t.Fatalf("no ticks; consumer errors: %v", tail(cons.Errors(), 5))
	}
	steadyFrom := time.Now()
	Settle(8 * time.Second)

	ctx := context.Background()
	var events []*faultEvent
	for _, fault := range clusterFaults {
		for round := 1; round <= clusterRounds; round++ {
			old := cl.PrimaryFor(tagged)
			ev := &faultEvent{Fault: fault.key, Round: round, OldNode: old.Addr()}
			events = append(events, ev)
			ev.begin(f)
			WaitPhase(100 * time.Millisecond)
			ev.Start = time.Now()
			var repl *redistest.ClusterNode
			switch fault.key {
			case "coordinated":
				r, err := cl.FailoverReplicaOf(ctx, old, redistest.Coordinated)
				if err != nil {
					t.Fatalf("%s round %d: %v", fault.key, round, err)
				}
				repl = r
			case "kill":
				repl = cl.ReplicasOf(old)[0]
				old.Kill()
			}
			if _, err := cl.WaitRole(repl, "master", 60*time.Second); err != nil {
				t.Fatalf("%s round %d: the replica %s did not take over: %v", fault.key, round, repl.Addr(), err)
			}
			ev.Switched, ev.NewNode = time.Now(), repl.Addr()
			if fault.key == "kill" {
				old.Restart() // keeps its nodes.conf: rejoins, as a replica of the new primary
			}
			if _, err := cl.WaitRole(old, "slave", 60*time.Second); err != nil {
				t.Fatalf("%s round %d: the old primary %s did not become a replica: %v", fault.key, round, old.Addr(), err)
			}
			if err := cl.WaitHealthy(60 * time.Second); err != nil {
				t.Fatalf("%s round %d: the cluster did not heal: %v", fault.key, round, err)
			}
			first, ok := cons.awaitFlow(30*time.Second, ev.Start, 2, nil)
			if !ok {
				t.Fatalf("%s round %d: ticks did not flow again within 30s; consumer errors: %v", fault.key, round, tail(cons.Errors(), 5))
			}
			ev.FirstNew = first
			settled := time.Now()
			if _, ok := cons.awaitFlow(15*time.Second, settled, 2, nil); !ok {
				t.Fatalf("%s round %d: ticks did not flow after the cluster healed", fault.key, round)
			}
			ev.Settled = time.Now()
			ev.end(f)
			ev.Lost = checkLoss(t, cons.Entries(), ev.Start.Add(-5*time.Second), streams, func(ctx context.Context, s, start string) ([]goredis.XMessage, error) {
				return cc.XRange(ctx, s, start, "+").Result()
			})
			ev.Note = fmt.Sprintf("healed (old primary a replica, ticks flowing) %s after the fault", fmtDur(ev.Settled.Sub(ev.Start)))
			Settle(time.Second)
		}
	}
	end := time.Now()
	cons.close()
	for _, r := range f.Live() {
		f.Scrape(r)
	}
	steady, stats := analyzeEvents(f, cons.Entries(), events, end)
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
	for _, fault := range clusterFaults {
		row := faultRow(t, clusterScenario(fault.key, mode), "first tick after it", events, stats, fault.key)
		if fault.key == "coordinated" {
			if row.Duplicates > 0 {
				t.Errorf("%s: %d ticks seen twice across CLUSTER FAILOVER, want 0", row.Scenario, row.Duplicates)
			}
			for _, e := range events {
				if e.Fault == fault.key && len(e.Lost) > 0 {
					t.Errorf("%s round %d: the new primary lost %d entries the consumer had seen", row.Scenario, e.Round, len(e.Lost))
				}
			}
		}
		AddRow(t, row)
	}
}
