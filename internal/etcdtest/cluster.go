package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/onetick/onetick/testsupport/redisserver"
)

// Cluster timings: slower than a single test server's (10ms, 100ms), so
// that three members on a small, loaded machine do not hold elections
// for nothing; leases of one second are still granted (etcd's minimum
// lease TTL is 1.5 election timeouts).
const (
	clusterHeartbeat = 50  // ms
	clusterElection  = 500 // ms
)

// Cluster is an etcd cluster of real processes: one per member, each on
// ports and in a data directory of its own, all stopped at the test's
// cleanup.
type Cluster struct {
	Members []*Server
	bin     string

	// Peer gates (StartPartitionableCluster): one per member, its member
	// id (hex) and whether it is partitioned.
	gates  []*peerGate
	ids    []string
	partMu sync.Mutex
	parted []bool
}

// StartCluster starts an n-member cluster for tb. The members start
// together (a member is ready only once a quorum runs); a failed start (a
// port taken meanwhile) is retried on new ports.
func StartCluster(tb testing.TB, n int) *Cluster { return startCluster(tb, n, false) }

// StartPartitionableCluster is StartCluster with each member's peer
// traffic through a gate of the test's, so that Partition can cut it.
func StartPartitionableCluster(tb testing.TB, n int) *Cluster { return startCluster(tb, n, true) }

func startCluster(tb testing.TB, n int, gated bool) *Cluster {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Fatal(err)
	}
	var last error
	for range 3 {
		c := &Cluster{bin: bin, parted: make([]bool, n)}
		var peers []string
		for i := range n {
			s := &Server{dir: tb.TempDir(), name: "m" + strconv.Itoa(i), heartbeat: clusterHeartbeat, election: clusterElection}
			if s.Port, err = redisserver.FreePort(); err != nil {
				tb.Fatal(err)
			}
			if s.PeerPort, err = redisserver.FreePort(); err != nil {
				tb.Fatal(err)
			}
			adv := "http://127.0.0.1:" + strconv.Itoa(s.PeerPort)
			if gated {
				g, err := newPeerGate(c, i, adv)
				if err != nil {
					tb.Fatal(err)
				}
				c.gates = append(c.gates, g)
				adv = g.url()
				s.advertise = adv
			}
			c.Members = append(c.Members, s)
			peers = append(peers, s.name+"="+adv)
		}
		for _, s := range c.Members {
			s.cluster = strings.Join(peers, ",")
		}
		if last = c.start(); last == nil {
			for _, s := range c.Members {
				tb.Cleanup(s.Kill)
			}
			for _, g := range c.gates {
				tb.Cleanup(g.close)
			}
			if gated {
				if err := c.learnIDs(); err != nil {
					tb.Fatal(err)
				}
			}
			return c
		}
		for _, g := range c.gates {
			g.close()
		}
	}
	tb.Fatalf("start an etcd cluster: %v", last)
	return nil
}

func (c *Cluster) start() error {
	procs := make([]*redisserver.Process, len(c.Members))
	var err error
	for i, s := range c.Members {
		if procs[i], err = s.launch(c.bin); err != nil {
			break
		}
	}
	for i := range procs {
		if err == nil && procs[i] != nil {
			if werr := procs[i].Wait(60 * time.Second); werr != nil {
				err = fmt.Errorf("member %s: %w", c.Members[i].name, werr)
			}
		}
	}
	if err != nil {
		for _, p := range procs {
			if p != nil {
				p.Kill()
			}
		}
		return err
	}
	for i, s := range c.Members {
		s.setProc(procs[i])
	}
	return nil
}

// learnIDs asks each member its id.
func (c *Cluster) learnIDs() error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, s := range c.Members {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := cl.Status(ctx, s.Endpoint())
		cancel()
		if err != nil {
			return fmt.Errorf("status of %s: %w", s.name, err)
		}
		c.ids = append(c.ids, hexID(st.Header.MemberId))
	}
	return nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, s := range c.Members {
		out[i] = s.Endpoint()
	}
	return out
}

// Client returns a client of every member, closed at tb's cleanup.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Leader returns the index of the member that leads, as the running
// members see it (Maintenance Status): an error when none of them knows
// a leader, or when they disagree.
func (c *Cluster) Leader(ctx context.Context, cl *clientv3.Client) (int, error) {
	leader := uint64(0)
	ids := map[uint64]int{}
	for i, s := range c.Members {
		if !s.Alive() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cl.Status(sctx, s.Endpoint())
		cancel()
		if err != nil {
			return -1, fmt.Errorf("status of %s: %w", s.name, err)
		}
		ids[st.Header.MemberId] = i
		if st.Leader == 0 {
			return -1, fmt.Errorf("%s knows no leader", s.name)
		}
		if leader != 0 && st.Leader != leader {
			return -1, fmt.Errorf("the members disagree on the leader (%x, %x)", leader, st.Leader)
		}
		leader = st.Leader
	}
	if leader == 0 {
		return -1, errors.New("no member runs")
	}
	i, ok := ids[leader]
	if !ok {
		return -1, fmt.Errorf("the leader %x is not a running member", leader)
	}
	return i, nil
}

// AwaitLeader polls Leader until the running members agree on one, for
// at most d.
func (c *Cluster) AwaitLeader(ctx context.Context, cl *clientv3.Client, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		i, err := c.Leader(ctx, cl)
		if err == nil || time.Now().After(deadline) {
			return i, err
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill kills member i (SIGKILL: no shutdown) and waits until it exited.
func (c *Cluster) Kill(i int) { c.Members[i].Kill() }

// Restart starts member i again, on its ports and data directory, and
// waits until it serves clients (it has rejoined the cluster).
func (c *Cluster) Restart(i int) error {
	s := c.Members[i]
	if s.Alive() {
		return fmt.Errorf("member %s runs", s.name)
	}
	p, err := s.launch(c.bin)
	if err != nil {
		return err
	}
	if err := p.Wait(60 * time.Second); err != nil {
		p.Kill()
		return err
	}
	s.setProc(p)
	return nil
}

// Name is member i's name.
func (c *Cluster) Name(i int) string { return c.Members[i].name }

// ID is member i's id (known for a cluster from
// StartPartitionableCluster).
func (c *Cluster) ID(i int) uint64 {
	id, _ := strconv.ParseUint(c.ids[i], 16, 64)
	return id
}
