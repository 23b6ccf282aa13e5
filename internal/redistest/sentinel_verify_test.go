//go:build verify

package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The failover tests behind the verify tag: each injects one fault into
// a Sentinel topology while a client that follows the Sentinels appends
// to a list every 5 ms, and logs what the client saw (which node took
// its writes and when, its errors) and which acknowledged writes the
// final primary does not have. They assert what Redis promises and log
// the rest, which is the measurement.

// sentinelFault runs one fault against a fresh topology: fault injects
// it (t0 is when) and returns the node that was primary.
func sentinelFault(t *testing.T, o SentinelOptions, fault func(t *testing.T, topo *Sentinel) (old *Server)) (topo *Sentinel, writes []write, have []string, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	topo = StartSentinel(t, o)
	w := startWriter(topo.FailoverClient(), "seq", 5*time.Millisecond)
	defer w.stop()
	if err := w.waitServedBy(topo.Primary().Port, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	old := fault(t, topo)
	now, err := topo.WaitPrimaryChange(old, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sentinels name %s after %v", now.Addr(), time.Since(t0).Round(time.Millisecond))
	if err := w.waitServedBy(now.Port, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("the client writes to %s after %v", now.Addr(), time.Since(t0).Round(time.Millisecond))
	if old.Running() && !old.Paused() {
		at := time.Now()
		if err := poll(60*time.Second, func(ctx context.Context) error {
			if r, err := old.Role(ctx); err != nil || r.Role != "slave" {
				return fmt.Errorf("old primary %s: %+v %v", old.Addr(), r, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("the old primary %s is a replica %v after the switch, %v after the fault",
			old.Addr(), time.Since(at).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	}
	if err := topo.WaitSettled(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("settled %v after the fault", time.Since(t0).Round(time.Millisecond))
	writes = w.stop()
	have, err = topo.Primary().Client().LRange(ctx, "seq", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client: %s", report(writes, t0, have))
	return topo, writes, have, t0
}

func TestSentinelVerifyForcedFailover(t *testing.T) {
	checkStopped(t)
	sentinelFault(t, SentinelOptions{}, func(t *testing.T, topo *Sentinel) *Server {
		old := topo.Primary()
		if err := topo.Failover(context.Background()); err != nil {
			t.Fatal(err)
		}
		return old
	})
}

func TestSentinelVerifyKillPrimary(t *testing.T) {
	checkStopped(t)
	var old *Server
	topo, _, _, _ := sentinelFault(t, SentinelOptions{}, func(t *testing.T, topo *Sentinel) *Server {
		old = topo.Primary()
		old.Kill()
		return old
	})
	// The killed primary comes back empty (no persistence) and, for a
	// while, a primary: the Sentinels turn it into a replica only when
	// they next read its INFO and a grace period has passed.
	at := time.Now()
	old.Restart()
	if err := poll(60*time.Second, func(ctx context.Context) error {
		if r, err := old.Role(ctx); err != nil || r.Role != "slave" || !r.LinkUp {
			return fmt.Errorf("restarted %s: %+v %v", old.Addr(), r, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the restarted old primary was a primary for %v before it replicated", time.Since(at).Round(time.Millisecond))
	if err := topo.WaitSettled(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestSentinelVerifyPausedPrimaryResumed(t *testing.T) {
	checkStopped(t)
	ctx := context.Background()
	topo := StartSentinel(t, SentinelOptions{})
	w := startWriter(topo.FailoverClient(), "seq", 5*time.Millisecond)
	defer w.stop()
	old := topo.Primary()
	if err := w.waitServedBy(old.Port, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	old.Pause()
	now, err := topo.WaitPrimaryChange(old, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGSTOP: the sentinels name %s after %v", now.Addr(), time.Since(t0).Round(time.Millisecond))
	old.Resume()
	resumed := time.Now()
	if err := w.waitServedBy(now.Port, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := poll(60*time.Second, func(ctx context.Context) error {
		if r, err := old.Role(ctx); err != nil || r.Role != "slave" {
			return fmt.Errorf("old primary %s: %+v %v", old.Addr(), r, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed, the old primary stayed a primary for %v", time.Since(resumed).Round(time.Millisecond))
	if err := topo.WaitSettled(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	writes := w.stop()
	have, err := topo.Primary().Client().LRange(ctx, "seq", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client: %s", report(writes, t0, have))
}

// TestSentinelVerifyReplicasPausedThenKill forces a loss: the replicas
// stop, the primary goes on acknowledging writes only it has, then dies;
// the Sentinels promote a replica once they are back.
func TestSentinelVerifyReplicasPausedThenKill(t *testing.T) {
	checkStopped(t)
	ctx := context.Background()
	topo := StartSentinel(t, SentinelOptions{})
	w := startWriter(topo.FailoverClient(), "seq", 5*time.Millisecond)
	defer w.stop()
	old := topo.Primary()
	if err := w.waitServedBy(old.Port, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	paused := topo.PauseReplicas()
	t0 := time.Now()
	// Let the primary acknowledge writes no replica has: wait for a few
	// of them (the writer's own progress is the signal).
	if err := poll(10*time.Second, func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := countAfter(w.writes, t0); n < 20 {
			return fmt.Errorf("%d writes since the pause", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	old.Kill()
	for _, r := range paused {
		r.Resume()
	}
	now, err := topo.WaitPrimaryChange(old, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sentinels name %s after %v", now.Addr(), time.Since(t0).Round(time.Millisecond))
	if err := w.waitServedBy(now.Port, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	writes := w.stop()
	have, err := now.Client().LRange(ctx, "seq", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client: %s", report(writes, t0, have))
	if len(lostAll(writes, set(have))) == 0 {
		t.Error("no acknowledged write was lost, yet the primary died with writes no replica had")
	}
}

// TestSentinelVerifyFailoverCommand: the FAILOVER command hands over
// without loss, but Sentinel 7.0 does not follow it: the Sentinels go on
// naming the old primary, now a replica that refuses writes, until they
// call it down and fail over themselves.
func TestSentinelVerifyFailoverCommand(t *testing.T) {
	checkStopped(t)
	_, writes, have, _ := sentinelFault(t, SentinelOptions{}, func(t *testing.T, topo *Sentinel) *Server {
		old := topo.Primary()
		if err := topo.CoordinatedFailover(context.Background(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		return old
	})
	if lost := lostAll(writes, set(have)); len(lost) > 0 {
		t.Errorf("FAILOVER lost acknowledged writes %v", lost)
	}
}

// TestSentinelVerifySwitchover: the harness's pause-catch-up-failover-
// demote sequence loses no acknowledged write.
func TestSentinelVerifySwitchover(t *testing.T) {
	checkStopped(t)
	topo, writes, have, _ := sentinelFault(t, SentinelOptions{}, func(t *testing.T, topo *Sentinel) *Server {
		old := topo.Primary()
		now, err := topo.Switchover(context.Background(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("switchover to %s returned", now.Addr())
		return old
	})
	if lost := lostAll(writes, set(have)); len(lost) > 0 {
		t.Errorf("switchover lost acknowledged writes %v", lost)
	}
	// A replica restarted now follows the new primary: Sentinel's and the
	// switchover's CONFIG REWRITE put it in the node's config file.
	p := topo.Primary()
	r := topo.Replicas()[0]
	r.Restart()
	if err := poll(30*time.Second, func(ctx context.Context) error {
		role, err := r.Role(ctx)
		if err != nil || role.Primary != p.Addr() || !role.LinkUp {
			return fmt.Errorf("restarted %s: %+v %v, want a replica of %s", r.Addr(), role, err, p.Addr())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func countAfter(ws []write, t0 time.Time) int {
	n := 0
	for _, w := range ws {
		if w.err == nil && w.at.After(t0) {
			n++
		}
	}
	return n
}
