//go:build verify

package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The cluster failover tests behind the verify tag: a cluster client
// appends to a list under one hash tag every 5 ms while the primary of
// that slot fails; they assert that a replica takes over and the client
// follows, and log what the client saw and what was lost.

type clusterRun struct {
	cl      *Cluster
	w       *writer
	old, r  *ClusterNode
	t0      time.Time
	promote time.Duration
}

// startClusterRun starts a cluster and a writer through a client that
// reloads the slot map every reload (go-redis's default, 60 s, when 0).
func startClusterRun(t *testing.T, reload time.Duration) *clusterRun {
	t.Helper()
	cl := StartCluster(t, ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	run := &clusterRun{cl: cl, old: cl.PrimaryFor("{job}")}
	run.r = cl.ReplicasOf(run.old)[0]
	o := cl.ClusterOptions()
	o.ClusterStateReloadInterval = reload
	c := goredis.NewClusterClient(o)
	t.Cleanup(func() { _ = c.Close() })
	run.w = startWriter(c, "{job}:seq", 5*time.Millisecond)
	t.Cleanup(func() { run.w.stop() })
	if err := run.w.waitServedBy(run.old.Port, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	run.t0 = time.Now()
	return run
}

// promoted waits for the replica to be primary everywhere and the client
// to write to it.
func (run *clusterRun) promoted(t *testing.T) {
	t.Helper()
	if _, err := run.cl.WaitRole(run.r, "master", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s is primary everywhere %v after the fault", run.r.Addr(), time.Since(run.t0).Round(time.Millisecond))
	if err := run.w.waitServedBy(run.r.Port, 90*time.Second); err != nil {
		t.Fatalf("%v; client: %s", err, report(run.w.stop(), run.t0, nil))
	}
	t.Logf("the client writes to it %v after the fault", time.Since(run.t0).Round(time.Millisecond))
}

// finish waits for the old primary to replicate the new one and the
// cluster to be healthy, and logs the client's writes.
func (run *clusterRun) finish(t *testing.T) {
	t.Helper()
	at := time.Now()
	if _, err := run.cl.WaitRole(run.old, "slave", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("the old primary %s is a replica %v later", run.old.Addr(), time.Since(at).Round(time.Millisecond))
	if err := run.cl.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	writes := run.w.stop()
	have, err := run.r.Client().LRange(context.Background(), "{job}:seq", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client: %s", report(writes, run.t0, have))
}

func TestClusterVerifyKillPrimary(t *testing.T) {
	checkStopped(t)
	run := startClusterRun(t, time.Second)
	run.old.Kill()
	run.promoted(t)
	run.old.Restart()
	run.finish(t)
}

// TestClusterVerifyKillPrimaryDefaultReload shows why a cluster client
// must reload its slot map more often than go-redis's default: a refused
// connection to a dead primary does not make it reload, so it keeps
// dialling the dead node until the 60 s reload interval has passed,
// long after a replica took over.
func TestClusterVerifyKillPrimaryDefaultReload(t *testing.T) {
	checkStopped(t)
	run := startClusterRun(t, 0)
	run.old.Kill()
	run.promoted(t)
	run.old.Restart()
	run.finish(t)
}

func TestClusterVerifyPausedPrimary(t *testing.T) {
	checkStopped(t)
	run := startClusterRun(t, time.Second)
	run.old.Pause()
	run.promoted(t)
	run.old.Resume()
	run.finish(t)
}

func TestClusterVerifyFailoverModes(t *testing.T) {
	for _, mode := range []FailoverMode{Coordinated, Force, Takeover} {
		t.Run(fmt.Sprintf("%q", mode), func(t *testing.T) {
			checkStopped(t)
			run := startClusterRun(t, time.Second)
			if _, err := run.cl.FailoverReplicaOf(context.Background(), run.old, mode); err != nil {
				t.Fatal(err)
			}
			run.promoted(t)
			run.finish(t)
		})
	}
}
