package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestSentinelFailover: a client that follows the Sentinels writes, a
// SENTINEL FAILOVER moves the primary, and the client's writes go to the
// new primary, which has the earlier ones.
func TestSentinelFailover(t *testing.T) {
	t.Parallel() // the Sentinels' timers, not the CPU, set the pace
	checkStopped(t)
	ctx := context.Background()
	start := time.Now()
	topo := StartSentinel(t, SentinelOptions{Replicas: 2, Sentinels: 3, DownAfter: time.Second})
	t.Logf("primary, 2 replicas and 3 sentinels ready in %v", time.Since(start).Round(time.Millisecond))
	if len(topo.Nodes()) != 3 || len(topo.SentinelAddrs()) != 3 {
		t.Fatalf("%d nodes, %d sentinels", len(topo.Nodes()), len(topo.SentinelAddrs()))
	}
	old := topo.Primary()
	if old != topo.Nodes()[0] {
		t.Fatalf("primary %s, want the first node %s", old.Addr(), topo.Nodes()[0].Addr())
	}
	c := topo.FailoverClient()
	w := startWriter(c, "seq", 5*time.Millisecond)
	if err := w.waitServedBy(old.Port, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	at := time.Now()
	if err := topo.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	now, err := topo.WaitPrimaryChange(old, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SENTINEL FAILOVER: the sentinels name %s after %v", now.Addr(), time.Since(at).Round(time.Millisecond))
	// The client hears of the switch on its own subscription; wait until
	// it has acted on it.
	if err := w.waitServedBy(now.Port, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	writes := w.stop()
	t.Logf("client: %s", report(writes, at, nil))
	// Everything the old primary acknowledged before the failover began
	// is on the new one (what it took after is at risk; see the verify
	// tests).
	have, err := now.Client().LRange(ctx, "seq", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, v := range have {
		kept[v] = true
	}
	for _, wr := range writes {
		if wr.err == nil && wr.at.Before(at) && !kept[strconv.Itoa(wr.seq)] {
			t.Errorf("write %d, acknowledged by %s before the failover, is not on the new primary", wr.seq, wr.port)
		}
	}
}

// TestSentinelKillPrimary: after a kill -9 of the primary the Sentinels
// promote a replica and the client follows.
func TestSentinelKillPrimary(t *testing.T) {
	t.Parallel() // the Sentinels' timers, not the CPU, set the pace
	checkStopped(t)
	topo := StartSentinel(t, SentinelOptions{})
	old := topo.Primary()
	w := startWriter(topo.FailoverClient(), "seq", 5*time.Millisecond)
	defer w.stop()
	if err := w.waitServedBy(old.Port, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	old.Kill()
	now, err := topo.WaitPrimaryChange(old, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9: the sentinels name %s after %v", now.Addr(), time.Since(at).Round(time.Millisecond))
	if err := w.waitServedBy(now.Port, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("client: %s", report(w.stop(), at, nil))
}

// TestSentinelAuth: data nodes and Sentinels with passwords; the failover
// client given both works, a client without them is refused.
func TestSentinelAuth(t *testing.T) {
	t.Parallel() // the Sentinels' timers, not the CPU, set the pace
	checkStopped(t)
	ctx := context.Background()
	topo := StartSentinel(t, SentinelOptions{Replicas: 1, Password: "data-pw", SentinelPassword: "sentinel-pw"})
	if err := topo.FailoverClient().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{topo.SentinelAddrs()[0], topo.Primary().Addr()} {
		err := ping(&goredis.Options{Addr: addr})
		if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("%s without a password: %v, want NOAUTH", addr, err)
		}
	}
	o := topo.FailoverOptions()
	o.SentinelPassword = ""
	o.MaxRetries = -1
	c := goredis.NewFailoverClient(o)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("a failover client without the sentinel password reached the primary")
	}
}

// TestSentinelMinReplicas: with min-replicas-to-write, a primary whose
// replicas stop acknowledging refuses writes, and takes them again once
// they are back.
func TestSentinelMinReplicas(t *testing.T) {
	t.Parallel() // the Sentinels' timers, not the CPU, set the pace
	checkStopped(t)
	ctx := context.Background()
	topo := StartSentinel(t, SentinelOptions{Replicas: 2, MinReplicasToWrite: 1, MinReplicasMaxLag: time.Second,
		DownAfter: 5 * time.Second}) // no failover while the replicas are paused
	c := topo.Primary().Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Stopped, not cut off (PauseReplicas would also break their links):
	// the primary refuses once their acknowledgements are too old.
	replicas := topo.Replicas()
	for _, r := range replicas {
		r.Pause()
	}
	at := time.Now()
	err := poll(15*time.Second, func(ctx context.Context) error {
		err := c.Set(ctx, "k", "v", 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "NOREPLICAS") {
			return nil
		}
		return fmt.Errorf("write with paused replicas: %v, want NOREPLICAS", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NOREPLICAS %v after the replicas were paused", time.Since(at).Round(time.Millisecond))
	for _, r := range replicas {
		r.Resume()
	}
	if err := poll(15*time.Second, func(ctx context.Context) error { return c.Set(ctx, "k", "v", 0).Err() }); err != nil {
		t.Fatalf("writes after the replicas resumed: %v", err)
	}
}
