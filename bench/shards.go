package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The "shards" part (issue 23, docs/shards.md "Measurements"): what
// sharding the fleet's jobs takes off each Redis primary and each replica.
// The machine has 2 cores, so a Cluster's primaries share them and
// wall-clock throughput cannot show scale-out here; what can is each
// primary's own work for the same burst (INFO commandstats and INFO cpu
// of its process), the share of ticks each primary and each replica
// handles, and from these a model of a Cluster on separate machines.
//
//  1. Claim work per primary: k jobs due together, 1, 3 and 6 shards, one
//     replica, on one standalone primary and on a Cluster of three.
//  2. Share per replica: three replicas over 6 shards on the Cluster.
//  3. Memory: memJobs jobs over three replicas, each its own process.

func shardBurstJobs() int {
	if quick {
		return 20_000
	}
	return 200_000
}

func shardMemJobs() int {
	if quick {
		return 300_000
	}
	return 3_000_000
}

// shardPeriod is the jobs' period in seconds: a burst must be over well
// before the next one.
func shardPeriod() int {
	if quick {
		return 10
	}
	return 20
}

// shardRounds is how many times every case runs: the machine is shared,
// and two rounds show how much a figure moves with the load.
func shardRounds() int {
	if quick {
		return 1
	}
	return 2
}

type shardCase struct {
	cluster          bool
	shards, replicas int
}

var shardCases = []shardCase{
	{false, 1, 1}, {false, 3, 1}, {false, 6, 1},
	{true, 1, 1}, {true, 3, 1}, {true, 6, 1},
	{true, 6, 3},
}

// shardsSection runs the part and returns its markdown.
func (e *env) shardsSection(ctx context.Context) (string, error) {
	started := time.Now()
	loadStart := loadAvg()
	progress("shards: starting a Cluster of three primaries")
	cl, err := startCluster(3)
	if err != nil {
		return "", err
	}
	defer cl.close()
	if memoryOnly() {
		return e.shardMemorySection(ctx, cl, loadStart, started), nil
	}
	sa := e.standalone()
	k := shardBurstJobs()
	var bursts []shardBurst
	for round := 1; round <= shardRounds(); round++ {
		for _, c := range shardCases {
			t := sa
			if c.cluster {
				t = cl
			}
			progress("shards: round %d, %d jobs due together, %s, %d shards, %d replicas", round, k, t.name, c.shards, c.replicas)
			b := e.shardBurstRun(ctx, t, k, c.shards, c.replicas, shardPeriod())
			b.round = round
			if b.err != nil {
				progress("shards: %v", b.err)
			}
			bursts = append(bursts, b)
		}
	}
	loadBursts := loadAvg()
	n := shardMemJobs()
	progress("shards: memory, %d jobs over 3 replica processes, 6 shards, %s", n, cl.name)
	mem := e.shardMemoryRun(ctx, cl, n, 6, 3, 30*time.Second)
	if mem.err != nil {
		progress("shards: memory: %v", mem.err)
	}
	var out strings.Builder
	out.WriteString(shardsMarkdown(bursts, mem, k, loadStart, loadBursts, loadAvg(), time.Since(started)))
	return out.String(), nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " / ")
}

func pctOf(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*a/b)
}

func fmtCPU(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func shardsMarkdown(bursts []shardBurst, mem shardMem, k int, loadStart, loadBursts, loadEnd string, took time.Duration) string {
	var out strings.Builder
	fmt.Fprintf(&out, "## Shards (issue 23)\n\n")
	fmt.Fprintf(&out, "Load average (1, 5, 15 min) at the start %s, after the bursts %s, at the end %s; the part took %s.\n\n", loadStart, loadBursts, loadEnd, took.Round(time.Second))
	// The reference of each round: one primary alone (standalone, one
	// shard).
	alone := map[int]*shardBurst{}
	for i := range bursts {
		if b := &bursts[i]; b.primaries == 1 && b.shards == 1 && b.err == nil {
			alone[b.round] = b
		}
	}
	fmt.Fprintf(&out, "### Claim work per primary: %d jobs due together\n\n", k)
	fmt.Fprintf(&out, "Each run: an empty Redis, %d jobs `*/%d * * * * *` (one stream per shard, under the shard's prefix), in-process schedulers (`onetick.Config{Shards, Replica}` over `redis.New` on the topology's client), lease TTL %s; once every shard is led and the leaders have not moved for two renew periods, the next slot is measured: every primary's INFO commandstats and INFO cpu just before it and once its last tick was delivered. Values per primary are separated by /.\n\n",
		k, shardPeriod(), shLease.TTL)
	out.WriteString("| Round | Topology | Shards | Replicas | Shards per primary | Ticks per primary | Redis CPU per primary (used_cpu sys+user) | Scripts per primary: calls, time | Busiest primary / one primary alone: CPU, scripts' time | Redis CPU per tick (all primaries) | Last tick after the slot, ticks/s (wall) | Scheduler CPU per tick |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, b := range bursts {
		if b.err != nil && b.ticks == 0 {
			fmt.Fprintf(&out, "| %d | %s | %d | %d | error: %s |||||||\n", b.round, b.topo, b.shards, b.replicas, esc(b.err.Error()))
			continue
		}
		var cpus, scripts []string
		for _, w := range b.primary {
			cpus = append(cpus, fmtCPU(w.cpu))
			scripts = append(scripts, fmt.Sprintf("%d, %.2f s", w.scriptCalls, float64(w.scriptUsec)/1e6))
		}
		var shares []string
		for _, n := range b.primaryTicks {
			shares = append(shares, fmt.Sprintf("%d (%s)", n, pctOf(float64(n), float64(b.ticks))))
		}
		vs := "–"
		if a := alone[b.round]; a != nil {
			vs = fmt.Sprintf("%s, %s", pctOf(b.maxCPU().Seconds(), a.maxCPU().Seconds()), pctOf(float64(b.maxScript()), float64(a.maxScript())))
		}
		errNote := ""
		if b.err != nil {
			errNote = " (" + esc(b.err.Error()) + ")"
		}
		fmt.Fprintf(&out, "| %d | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s, %s%s | %s |\n",
			b.round, b.topo, b.shards, b.replicas, joinInts(b.primaryShards), strings.Join(shares, " / "), strings.Join(cpus, " / "),
			strings.Join(scripts, " / "), vs, fmtDur(b.totalCPU()/time.Duration(max(b.ticks, 1))),
			fmtSec(b.last), fmtRate(b.rate()), errNote, fmtDur(b.clientCPU/time.Duration(max(b.ticks, 1))))
	}
	out.WriteString("\n")
	fmt.Fprintf(&out, "### Share per replica\n\n")
	out.WriteString("| Round | Topology | Shards | Replicas | Settled after | Shards led by each replica | Ticks claimed by each replica |\n|---|---|---|---|---|---|---|\n")
	for _, b := range bursts {
		if b.replicas < 2 || b.ticks == 0 {
			continue
		}
		var ts []string
		for _, n := range b.replicaTicks {
			ts = append(ts, fmt.Sprintf("%d (%s)", n, pctOf(float64(n), float64(b.ticks))))
		}
		var ls []string
		for _, n := range b.replicaLed {
			ls = append(ls, fmt.Sprintf("%d (%s)", n, pctOf(float64(n), float64(b.shards))))
		}
		fmt.Fprintf(&out, "| %d | %s | %d | %d | %s | %s | %s |\n", b.round, b.topo, b.shards, b.replicas, fmtSec(b.settle), strings.Join(ls, " / "), strings.Join(ts, " / "))
	}
	out.WriteString("\n")
	out.WriteString(shardMemMarkdown(mem))
	out.WriteString(shardsModel(bursts, alone))
	return out.String()
}

// shardsModel: a burst of K ticks puts K·share_p ticks on primary p at
// u_p of Redis CPU each; on separate machines each primary works alone,
// so the burst lasts max_p K·share_p·u_p = max_p CPU_p and Redis allows
// K / max_p CPU_p ticks/s = min_p 1/(share_p·u_p). The schedulers bound it
// too: c of scheduler CPU per tick, replica r claiming share_r: min_r
// 1/(share_r·c).
func shardsModel(bursts []shardBurst, alone map[int]*shardBurst) string {
	var out strings.Builder
	out.WriteString("### Model\n\n")
	out.WriteString("Redis bound on separate machines: K / max over primaries of (Redis CPU of the burst) = min over primaries p of 1 / (share_p × Redis CPU per tick on p). Scheduler bound: min over replicas r of 1 / (share_r × scheduler CPU per tick). Predicted throughput: the smaller of the two (one core per primary and per replica; the network's round trips overlap with work: two claims in flight per shard).\n\n")
	out.WriteString("| Round | Topology | Shards | Replicas | Redis CPU per tick on each primary | Redis bound | Scheduler bound (each replica its own machine) | Predicted | Measured here (2 shared cores) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, b := range bursts {
		if b.err != nil || b.ticks == 0 {
			continue
		}
		var us []string
		for i, w := range b.primary {
			if b.primaryTicks[i] == 0 {
				us = append(us, "–")
				continue
			}
			us = append(us, fmtDur(w.cpu/time.Duration(b.primaryTicks[i])))
		}
		redis := float64(b.ticks) / b.maxCPU().Seconds()
		c := b.clientCPU.Seconds() / float64(b.ticks)
		maxShare := 0.0
		for _, n := range b.replicaTicks {
			maxShare = max(maxShare, float64(n)/float64(b.ticks))
		}
		sched := 1 / (maxShare * c)
		fmt.Fprintf(&out, "| %d | %s | %d | %d | %s | %s/s | %s/s | %s/s | %s/s |\n", b.round, b.topo, b.shards, b.replicas, strings.Join(us, " / "),
			fmtRate(redis), fmtRate(sched), fmtRate(min(redis, sched)), fmtRate(b.rate()))
	}
	out.WriteString("\n")
	for r := 1; r <= len(alone); r++ {
		if a := alone[r]; a != nil {
			fmt.Fprintf(&out, "One primary alone (standalone, one shard), round %d: %s of Redis CPU for %d ticks.\n", r, fmtCPU(a.maxCPU()), a.ticks)
		}
	}
	return out.String()
}
