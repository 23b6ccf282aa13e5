package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/testsupport/redisserver"
)

// The "shards" part's Redis topologies: the env's standalone server (one
// primary) and a Cluster of three primaries without replicas, formed
// here the way redis-cli --cluster create does (the tests' helper,
// internal/redistest, needs a testing.TB). Each primary is its own
// redis-server process, so INFO on it is that primary's work alone.

// clusterSlots is Redis Cluster's slot count.
const clusterSlots = 16384

// topology is the set of primaries a run measures, with a client for
// onetick (a cluster client on the Cluster) and one admin client per
// primary.
type topology struct {
	name    string
	client  goredis.UniversalClient // onetick's
	nodes   []*goredis.Client       // one per primary, for INFO and FLUSHALL
	servers []*redisserver.Server   // started here (the Cluster), stopped by close
	addrs   []string
}

func (t *topology) close() {
	if len(t.servers) == 0 {
		return // the env's server and clients: the env closes them
	}
	_ = t.client.Close()
	for _, n := range t.nodes {
		_ = n.Close()
	}
	for _, s := range t.servers {
		s.Stop()
	}
}

// standalone is the env's own server as a topology of one primary.
func (e *env) standalone() *topology {
	return &topology{name: "1 primary (standalone)", client: e.adm.c, nodes: []*goredis.Client{e.adm.c}, addrs: []string{e.srv.Addr()}}
}

// startCluster starts n primaries with the slots split evenly
// (primary i holds [i·16384/n, (i+1)·16384/n)) and waits until every node
// says cluster_state:ok and knows the others.
func startCluster(n int) (*topology, error) {
	t := &topology{name: fmt.Sprintf("%d-primary Cluster", n)}
	fail := func(err error) (*topology, error) {
		for _, c := range t.nodes {
			_ = c.Close()
		}
		for _, s := range t.servers {
			s.Stop()
		}
		return nil, err
	}
	for range n {
		// redisserver.Start tries again on another port when the start
		// fails (as when the bus port, port+10000, is taken).
		s, err := redisserver.Start("--cluster-enabled", "yes", "--cluster-node-timeout", "5000")
		if err != nil {
			return fail(err)
		}
		t.servers = append(t.servers, s)
		t.nodes = append(t.nodes, goredis.NewClient(&goredis.Options{Addr: s.Addr()}))
		t.addrs = append(t.addrs, s.Addr())
	}
	ctx := context.Background()
	for i, c := range t.nodes {
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fail(fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", t.addrs[i], err))
		}
		from, to := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to).Err(); err != nil {
			return fail(fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE: %w", t.addrs[i], err))
		}
	}
	for i, a := range t.nodes {
		for _, s := range t.servers[i+1:] {
			if err := a.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.Port).Err(); err != nil {
				return fail(fmt.Errorf("%s: CLUSTER MEET: %w", t.addrs[i], err))
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, c := range t.nodes {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				ok = false
				break
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("the %d-node cluster did not become ok within 30 s", n))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.client = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: t.addrs})
	// The cluster client's view of the slots must be complete before the
	// first run.
	for _, key := range []string{"{a}", "{b}", "{c}"} {
		if err := t.client.Set(ctx, key, "x", time.Second).Err(); err != nil {
			return fail(fmt.Errorf("cluster client: %w", err))
		}
	}
	return t, nil
}

// primaryOf is the index of the primary that holds key's slot (the slot
// ranges of startCluster; 0 on a standalone server).
func (t *topology) primaryOf(slot int) int {
	n := len(t.nodes)
	for i := range n {
		if slot < (i+1)*clusterSlots/n {
			return i
		}
	}
	return n - 1
}

// flush empties every primary and resets its statistics.
func (t *topology) flush(ctx context.Context) error {
	for i, c := range t.nodes {
		if err := c.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("%s: FLUSHALL: %w", t.addrs[i], err)
		}
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("%s: CONFIG RESETSTAT: %w", t.addrs[i], err)
		}
	}
	return nil
}

// nodeStats is what one primary reports of its own work: INFO
// commandstats (calls and microseconds by command) and INFO cpu.
type nodeStats struct {
	calls, usec map[string]int64
	cpu         time.Duration // used_cpu_sys + used_cpu_user
}

// adminCommand reports the harness's own commands, left out of the work.
func adminCommand(name string) bool {
	switch name {
	case "info", "config|resetstat", "config", "flushall", "cluster|info", "cluster|slots", "cluster|shards", "cluster|nodes", "cluster", "ping":
		return true
	}
	return false
}

func readStats(ctx context.Context, c *goredis.Client) (nodeStats, error) {
	st := nodeStats{calls: map[string]int64{}, usec: map[string]int64{}}
	s, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return st, err
	}
	var cpu float64
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_cpu_sys", "used_cpu_user":
			v, _ := strconv.ParseFloat(rest, 64)
			cpu += v
			continue
		}
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls[cmd] = n
			case "usec":
				st.usec[cmd] = n
			}
		}
	}
	st.cpu = time.Duration(cpu * float64(time.Second))
	return st, nil
}

// work is after − before: the primary's work in between, the harness's
// own commands left out.
type work struct {
	// calls: every command, those run inside scripts included (Redis
	// counts them apart); their time is inside the script's, so
	// scriptUsec is the time of everything onetick's scripts did.
	calls       int64
	scriptCalls int64 // evalsha + eval + fcall
	scriptUsec  int64
	cpu         time.Duration // used_cpu_sys + used_cpu_user: all of it, I/O included
}

func diffStats(before, after nodeStats) work {
	w := work{cpu: after.cpu - before.cpu}
	for cmd, c := range after.calls {
		if adminCommand(cmd) {
			continue
		}
		dc, du := c-before.calls[cmd], after.usec[cmd]-before.usec[cmd]
		if dc == 0 {
			continue
		}
		switch cmd {
		case "evalsha", "eval", "fcall", "evalsha_ro", "eval_ro", "fcall_ro":
			w.scriptCalls += dc
			w.scriptUsec += du
		}
		w.calls += dc
	}
	return w
}

// snapshot reads every primary's statistics.
func (t *topology) snapshot(ctx context.Context) ([]nodeStats, error) {
	out := make([]nodeStats, len(t.nodes))
	for i, c := range t.nodes {
		st, err := readStats(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("%s: INFO: %w", t.addrs[i], err)
		}
		out[i] = st
	}
	return out, nil
}
