package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// PauseReplicas stops (SIGSTOP) every data node but the current primary
// and breaks their replication links, so that nothing the primary
// acknowledges from now on reaches a replica: a stopped process still
// receives the stream into its socket buffers, and would apply it when
// resumed. It returns the paused nodes; Resume each (they reconnect to
// whichever node they then follow), or let the cleanup kill them.
func (t *Sentinel) PauseReplicas() []*Server {
	t.tb.Helper()
	p := t.Primary()
	rs := t.Replicas()
	for _, r := range rs {
		r.Pause()
	}
	if _, err := p.do(context.Background(), "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.tb.Fatalf("redistest: cut the replication links of %s: %v", p.Addr(), err)
	}
	return rs
}

// Failover asks a Sentinel to fail the primary over now (SENTINEL
// FAILOVER), as if it were down, without asking the others. It returns
// once the Sentinel accepted; the switch follows (WaitPrimaryChange).
func (t *Sentinel) Failover(ctx context.Context) error {
	var errs []error
	for _, s := range t.sentinels {
		if !s.Running() || s.Paused() {
			continue
		}
		sc := t.sentinelClient(s)
		err := sc.Failover(ctx, t.opts.MasterName).Err()
		sc.Close()
		if err == nil {
			return nil
		}
		// A refusal (INPROG, NOGOODSLAVE) is the topology's answer; only
		// an unreachable Sentinel is worth asking another.
		if strings.HasPrefix(err.Error(), "INPROG") || strings.HasPrefix(err.Error(), "NOGOODSLAVE") {
			return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", s.Addr(), err))
	}
	return fmt.Errorf("no sentinel took the failover: %w", errors.Join(errs...))
}

// CoordinatedFailover sends the FAILOVER command to the current primary:
// it pauses its writers, waits for a replica to catch up and hands over
// to it, so no acknowledged write is lost. Sentinel 7.0 does not follow
// this command: it keeps naming the old primary (which now refuses
// writes with READONLY) until it calls that node down, about
// down-after + 30 s later, and then fails over to a replica of its own
// choosing. Switchover is the handover that works with Sentinel.
func (t *Sentinel) CoordinatedFailover(ctx context.Context, timeout time.Duration) error {
	t.tb.Helper()
	p := t.Primary()
	_, err := p.do(ctx, "FAILOVER", "TIMEOUT", timeout.Milliseconds())
	return err
}

// Switchover hands the primary role to a replica through the Sentinels
// without losing an acknowledged write, the way an operator can with
// Sentinel 7.0, which has no coordinated failover of its own:
//
//  1. CLIENT PAUSE WRITE on the primary, so nothing more is acknowledged
//     there (writers wait; reads go on);
//  2. wait until every replica has the primary's whole stream;
//  3. SENTINEL FAILOVER, and wait until the Sentinels name the new one;
//  4. turn the old primary into a replica of the new one and disconnect
//     its clients (what Sentinel itself does only some 10 s later, a
//     window in which the old primary would take writes and lose them),
//     then lift the pause.
//
// The waiting writers are disconnected before they run and retry on the
// new primary. timeout bounds the whole handover and the pause; when it
// fails, the pause is lifted and the old primary may still be primary.
func (t *Sentinel) Switchover(ctx context.Context, timeout time.Duration) (*Server, error) {
	old := t.Primary()
	deadline := time.Now().Add(timeout)
	// Offsets compared below are those the replicas acknowledged, which
	// says nothing while a replica waits to receive the stream at all.
	if err := poll(timeout, func(ctx context.Context) error { return old.replicasAcked(ctx, 1) }); err != nil {
		return nil, err
	}
	if _, err := old.do(ctx, "CLIENT", "PAUSE", timeout.Milliseconds(), "WRITE"); err != nil {
		return nil, fmt.Errorf("pause %s: %w", old.Addr(), err)
	}
	unpause := func() { _, _ = old.do(context.WithoutCancel(ctx), "CLIENT", "UNPAUSE") }
	err := poll(time.Until(deadline), func(ctx context.Context) error {
		m, err := old.info(ctx, "replication")
		if err != nil {
			return err
		}
		want := m["master_repl_offset"]
		n, _ := strconv.Atoi(m["connected_slaves"])
		if n == 0 {
			return fmt.Errorf("primary %s has no replica", old.Addr())
		}
		for i := 0; i < n; i++ {
			// slaveN:ip=...,port=...,state=online,offset=...,lag=...
			f := map[string]string{}
			for _, kv := range strings.Split(m["slave"+strconv.Itoa(i)], ",") {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			if f["state"] != "online" || f["offset"] != want {
				return fmt.Errorf("replica %s:%s at %s, primary at %s", f["ip"], f["port"], f["offset"], want)
			}
		}
		return nil
	})
	if err == nil {
		err = t.Failover(ctx)
	}
	var now *Server
	if err == nil {
		now, err = t.WaitPrimaryChange(old, time.Until(deadline))
	}
	if err != nil {
		unpause()
		return nil, err
	}
	pipe := old.probe()
	defer pipe.Close()
	_, err = pipe.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.SlaveOf(ctx, "127.0.0.1", strconv.Itoa(now.Port))
		p.Do(ctx, "CLIENT", "KILL", "TYPE", "normal")
		p.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub")
		p.Do(ctx, "CONFIG", "REWRITE") // a Restart comes back a replica
		return nil
	})
	unpause()
	if err != nil {
		return now, fmt.Errorf("demote %s: %w", old.Addr(), err)
	}
	return now, nil
}

// WaitPrimaryChange waits until a quorum of Sentinels names a primary
// other than old and that node reports itself primary, and returns it.
func (t *Sentinel) WaitPrimaryChange(old *Server, timeout time.Duration) (*Server, error) {
	var now *Server
	err := poll(timeout, func(ctx context.Context) error {
		addr, err := t.PrimaryAddr(ctx)
		if err != nil {
			return err
		}
		if addr == old.Addr() {
			return fmt.Errorf("the sentinels still name %s", addr)
		}
		n := t.Node(addr)
		if n == nil {
			return fmt.Errorf("the sentinels name %s, which is no data node", addr)
		}
		r, err := n.Role(ctx)
		if err != nil {
			return err
		}
		if r.Role != "master" {
			return fmt.Errorf("the sentinels name %s, which reports %+v", addr, r)
		}
		now = n
		return nil
	})
	return now, err
}

// WaitSettled waits until the topology is whole again after a change: a
// quorum of Sentinels names a primary that reports itself primary, every
// other running data node replicates it with its link up, and every
// running Sentinel lists those replicas as reachable. A killed node does
// not count; a paused one keeps this from settling.
func (t *Sentinel) WaitSettled(timeout time.Duration) error {
	return poll(timeout, func(ctx context.Context) error {
		addr, err := t.PrimaryAddr(ctx)
		if err != nil {
			return err
		}
		var want []string
		for _, n := range t.nodes {
			if !n.Running() {
				continue
			}
			r, err := n.Role(ctx)
			if err != nil {
				return err
			}
			if n.Addr() == addr {
				if r.Role != "master" {
					return fmt.Errorf("primary %s reports %+v", addr, r)
				}
				continue
			}
			if r.Role != "slave" || r.Primary != addr || !r.LinkUp {
				return fmt.Errorf("node %s reports %+v, want a replica of %s", n.Addr(), r, addr)
			}
			want = append(want, n.Addr())
		}
		if p := t.Node(addr); len(want) > 0 {
			if err := p.replicasAcked(ctx, len(want)); err != nil {
				return err
			}
		}
		for _, s := range t.sentinels {
			if !s.Running() {
				continue
			}
			sc := t.sentinelClient(s)
			reps, err := sc.Replicas(ctx, t.opts.MasterName).Result()
			sc.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
			}
			var ok []string
			for _, r := range reps {
				if r["flags"] == "slave" {
					ok = append(ok, r["ip"]+":"+r["port"])
				}
			}
			if !containsAll(ok, want) {
				return fmt.Errorf("sentinel %s sees replicas %v, want %v", s.Addr(), ok, want)
			}
		}
		return nil
	})
}

func containsAll(have, want []string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}
