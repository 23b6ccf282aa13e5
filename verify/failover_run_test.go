//go:build verify

package verify

// The scaffold that scenarios 11 (Sentinel) and 12 (Cluster) share:
// three onetick replicas on a replicated Redis topology running the
// quick jobs, a consumer of their streams, each fault injected in rounds
// with the same bookkeeping, and the report's rows. The scenarios keep
// what differs: the topology, how a fault is injected and how its end is
// recognised.

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// fault is one kind of fault a failover scenario injects.
type fault struct{ key, name string }

// faultScenario names the scenario of the fault key in faults: "<n><letter>.
// <topology>: <fault's name>, durability <mode>", the letters from first
// on in the order of faults.
func faultScenario(n, topology string, first byte, faults []fault, key, mode string) string {
	for i, f := range faults {
		if f.key == key {
			return fmt.Sprintf("%s%c. %s: %s, durability %s", n, first+byte(i), topology, f.name, mode)
		}
	}
	return n + ". " + topology + " " + key
}

// inModes runs a failover scenario in both durability modes.
func inModes(t *testing.T, run func(t *testing.T, mode string)) {
	for _, mode := range []string{"async", "replicated"} {
		t.Run(mode, func(t *testing.T) { run(t, mode) })
	}
}

// redisTopologyYAML is the configuration of a replica on a Redis
// topology: section is the redis section's topology lines (sentinel: or
// cluster:, indented under redis:).
func redisTopologyYAML(section, mode string) string {
	return "backend:\n  redis:\n" + section + fmt.Sprintf(`    prefix: %s
    durability: %s
    replicas: 1
    replication_timeout: 100ms
`, prefix, mode) + topologyLease
}

// failoverRun is one run of a failover scenario.
type failoverRun struct {
	t       *testing.T
	f       *Fleet
	cons    *consumer
	streams map[string]string // job -> stream key
	events  []*faultEvent
	// After finish: the steady state before the first fault and each
	// event's window.
	steady eventStats
	stats  []eventStats
}

// startFailoverRun starts replicas r1 to r3 of a fleet named fleet on
// yaml (client reads what they write under keyPrefix), waits for a
// leader, and starts a consumer of the quick jobs' streams (resolve or
// cc: see startConsumer) that must see ticks within 10 s. The fleet's
// renewal latency goes to the report's all-runs figure, not to one
// fault's row: the same processes live through every fault.
func startFailoverRun(t *testing.T, fleet, yaml string, client goredis.UniversalClient, keyPrefix string,
	resolve func(ctx context.Context) (string, error), cc goredis.UniversalClient) *failoverRun {
	t.Helper()
	r := &failoverRun{t: t, f: NewFleetOn(t, fleet, yaml, client, keyPrefix), streams: map[string]string{}}
	for i := 1; i <= 3; i++ {
		r.f.Start(fmt.Sprintf("r%d", i))
	}
	r.f.WaitLeader(2 * ttl)
	var keys []string
	for _, j := range quickJobs {
		r.streams[j] = keyPrefix + ":stream:" + j
		keys = append(keys, r.streams[j])
	}
	r.cons = startConsumer(keys, resolve, cc, "")
	t.Cleanup(r.cons.close)
	if _, ok := r.cons.awaitFlow(10*time.Second, time.Time{}, 8, nil); !ok {
		t.Fatalf("no ticks before the first fault; consumer errors: %v", tail(r.cons.Errors(), 5))
	}
	return r
}

// begin starts round round of the fault key on the node old: it records
// the missed counters, waits for a phase between two 250 ms slots and
// stamps the event's start. The fault is injected right after.
func (r *failoverRun) begin(key string, round int, old string) *faultEvent {
	ev := &faultEvent{Fault: key, Round: round, OldNode: old}
	r.events = append(r.events, ev)
	ev.begin(r.f)
	WaitPhase(100 * time.Millisecond)
	ev.Start = time.Now()
	return ev
}

// switched records that node took over.
func (r *failoverRun) switched(ev *faultEvent, node string) {
	ev.Switched, ev.NewNode = time.Now(), node
}

// firstTick waits up to 30 s for ticks to flow again after the fault
// (from a node accept accepts; nil: any) and records the first one.
func (r *failoverRun) firstTick(ev *faultEvent, accept func(from string) bool) {
	r.t.Helper()
	first, ok := r.cons.awaitFlow(30*time.Second, ev.Start, 2, accept)
	if !ok {
		r.t.Fatalf("%s round %d: ticks did not flow again on %s within 30s; consumer errors: %v",
			ev.Fault, ev.Round, ev.NewNode, tail(r.cons.Errors(), 5))
	}
	ev.FirstNew = first
}

// settled ends the round once the topology has settled (the scenario
// waited for that): both jobs must fire again within 15 s. It records
// the counters, the entries the consumer saw that the new primary lost
// (read reads a stream there) and note, then lets a second pass.
func (r *failoverRun) settled(ev *faultEvent, read func(ctx context.Context, stream, start string) ([]goredis.XMessage, error), note string) {
	r.t.Helper()
	if _, ok := r.cons.awaitFlow(15*time.Second, time.Now(), 2, nil); !ok {
		r.t.Fatalf("%s round %d: ticks did not flow after the topology settled", ev.Fault, ev.Round)
	}
	ev.Settled = time.Now()
	ev.end(r.f)
	ev.Lost = checkLoss(r.t, r.cons.Entries(), ev.Start.Add(-5*time.Second), r.streams, read)
	ev.Note = fmt.Sprintf("%s %s after the fault", note, fmtDur(ev.Settled.Sub(ev.Start)))
	Settle(time.Second)
}

// finish stops the consumer, scrapes the live replicas and splits the
// run into the steady state and one window per event.
func (r *failoverRun) finish() {
	end := time.Now()
	r.cons.close()
	for _, rep := range r.f.Live() {
		r.f.Scrape(rep)
	}
	r.steady, r.stats = analyzeEvents(r.f, r.cons.Entries(), r.events, end)
}

// addFaultRows adds one row per fault (FirstNew is label) to the report.
// The coordinated fault must fire nothing twice and lose nothing the
// consumer saw; amend, if set, adds to its row.
func (r *failoverRun) addFaultRows(faults []fault, scenario func(key string) string, label, coordinated string, amend func(*Row)) {
	t := r.t
	for _, fault := range faults {
		row := faultRow(t, scenario(fault.key), label, r.events, r.stats, fault.key)
		if fault.key == coordinated {
			if row.Duplicates > 0 {
				t.Errorf("%s: %d ticks seen twice across the coordinated handover, want 0", row.Scenario, row.Duplicates)
			}
			for _, e := range r.events {
				if e.Fault == fault.key && len(e.Lost) > 0 {
					t.Errorf("%s round %d: the new primary lost %d entries the consumer had seen", row.Scenario, e.Round, len(e.Lost))
				}
			}
			if amend != nil {
				amend(row)
			}
		}
		AddRow(t, row)
	}
}

// tail is the last n of s.
func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
