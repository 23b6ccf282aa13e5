package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestCluster: a cluster client spreads keys over the primaries, runs a
// script whose keys share a hash tag (and is refused one whose keys do
// not), and keeps working across a coordinated failover of a primary.
func TestCluster(t *testing.T) {
	t.Parallel() // the cluster's timers, not the CPU, set the pace
	checkStopped(t)
	ctx := context.Background()
	start := time.Now()
	cl := StartCluster(t, ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	t.Logf("3 primaries with a replica each ready in %v", time.Since(start).Round(time.Millisecond))
	if n := len(cl.Primaries()); n != 3 {
		t.Fatalf("%d primaries", n)
	}
	for _, p := range cl.Primaries() {
		if rs := cl.ReplicasOf(p); len(rs) != 1 {
			t.Fatalf("primary %s has %d replicas", p.Addr(), len(rs))
		}
	}

	c := cl.Client()
	owners := map[string]bool{}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("k%d", i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		p := cl.PrimaryFor(key)
		owners[p.Addr()] = true
		// The key is where PrimaryFor says, and only there.
		if v, err := p.Client().Get(ctx, key).Result(); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("%s on %s: %q, %v", key, p.Addr(), v, err)
		}
	}
	if len(owners) != 3 {
		t.Fatalf("30 keys landed on %d primaries, want 3", len(owners))
	}

	script := goredis.NewScript(`redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])`)
	if err := script.Run(ctx, c, []string{"{job}:a", "{job}:b"}, "x").Err(); err != nil {
		t.Fatalf("script on one hash tag: %v", err)
	}
	if err := script.Run(ctx, c, []string{"job:a", "job:b"}, "x").Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("script across slots: %v, want CROSSSLOT", err)
	}

	old := cl.PrimaryFor("{job}")
	w := startWriter(c, "{job}:seq", 5*time.Millisecond)
	defer w.stop()
	if err := w.waitServedBy(old.Port, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	r, err := cl.FailoverReplicaOf(ctx, old, Coordinated)
	if err != nil {
		t.Fatal(err)
	}
	took, err := cl.WaitRole(r, "master", 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CLUSTER FAILOVER: %s is primary everywhere after %v", r.Addr(), took.Round(time.Millisecond))
	if cl.PrimaryFor("{job}") != r {
		t.Fatalf("the slot of {job} is not served by the promoted %s", r.Addr())
	}
	if err := w.waitServedBy(r.Port, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	writes := w.stop()
	have, err := r.Client().LRange(ctx, "{job}:seq", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client: %s", report(writes, at, have))
	if lost := lostAll(writes, set(have)); len(lost) > 0 {
		t.Errorf("a coordinated failover lost acknowledged writes %v", lost)
	}
	if v, err := c.Get(ctx, "{job}:a").Result(); err != nil || v != "x" {
		t.Fatalf("after the failover: %q, %v", v, err)
	}
}

func set(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// TestClusterAuth: with a password, the replica still follows its
// primary, a client with the password works and one without is refused.
func TestClusterAuth(t *testing.T) {
	t.Parallel() // the cluster's timers, not the CPU, set the pace
	checkStopped(t)
	ctx := context.Background()
	cl := StartCluster(t, ClusterOptions{Primaries: 1, ReplicasPerPrimary: 1, Password: "pw"})
	if err := cl.Client().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	o := cl.ClusterOptions()
	o.Password = ""
	o.MaxRedirects = -1
	c := goredis.NewClusterClient(o)
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("without the password: %v, want NOAUTH", err)
	}
}
