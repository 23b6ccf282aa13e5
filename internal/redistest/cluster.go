package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ClusterOptions describe a Redis Cluster. Zero fields take the defaults
// in brackets.
type ClusterOptions struct {
	// Primaries is the number of primaries; the slots are split evenly
	// between them [3].
	Primaries int
	// ReplicasPerPrimary is the number of replicas of each primary [0].
	ReplicasPerPrimary int
	// NodeTimeout is cluster-node-timeout: how long a node may not answer
	// before the others call it failing and its replica takes over [1s].
	NodeTimeout time.Duration
	// Password, when set, is required by every node (requirepass), which
	// the replicas use to reach their primary (masterauth).
	Password string
	// NodeOptions are more options for every node (KeyspaceEvents,
	// AppendOnly, Args). TLS is not supported in a cluster.
	NodeOptions []Option
}

func (o *ClusterOptions) defaults() {
	if o.Primaries == 0 {
		o.Primaries = 3
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = time.Second
	}
}

// Cluster is a Redis Cluster on loopback, killed at the end of the test.
type Cluster struct {
	tb    testing.TB
	opts  ClusterOptions
	nodes []*ClusterNode
}

// ClusterNode is one node of a cluster. Its ID survives a Restart (the
// node keeps its nodes.conf).
type ClusterNode struct {
	*Server
	ID string
}

// Cluster slot count, fixed by Redis.
const clusterSlots = 16384

// StartCluster starts the nodes and forms the cluster the way redis-cli
// --cluster create does, without its one-second sleeps: distinct config
// epochs, the slots split evenly between the first Primaries nodes, every
// node introduced to every other (CLUSTER MEET), then each replica
// attached to its primary (CLUSTER REPLICATE). It returns once every node
// says cluster_state:ok, every node sees the same roles and every replica
// receives its primary's stream.
func StartCluster(tb testing.TB, o ClusterOptions) *Cluster {
	tb.Helper()
	o.defaults()
	c := &Cluster{tb: tb, opts: o}
	var nodeOpts []Option
	nodeOpts = append(nodeOpts, Args("--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
	if o.Password != "" {
		nodeOpts = append(nodeOpts, RequirePass(o.Password), Args("--masterauth", o.Password))
	}
	nodeOpts = append(nodeOpts, o.NodeOptions...)
	n := o.Primaries * (1 + o.ReplicasPerPrimary)
	var servers []*Server
	for i := 0; i < n; i++ {
		cfg := config{cluster: true}
		for _, opt := range nodeOpts {
			opt(&cfg)
		}
		if cfg.tls != nil {
			tb.Fatalf("redistest: TLS is not supported in a cluster")
		}
		s := newServer(tb, &cfg)
		servers = append(servers, s)
		c.nodes = append(c.nodes, &ClusterNode{Server: s})
	}
	if err := startAll(servers); err != nil {
		tb.Fatalf("redistest: cluster nodes: %v", err)
	}
	if err := c.form(); err != nil {
		tb.Fatalf("redistest: cluster: %v", err)
	}
	return c
}

func (c *Cluster) form() error {
	ctx := context.Background()
	o := c.opts
	for i, n := range c.nodes {
		id, err := n.do(ctx, "CLUSTER", "MYID")
		if err != nil {
			return err
		}
		n.ID = id.(string)
		// Distinct epochs spare the nodes the collision resolution that
		// would otherwise hand them out one at a time.
		if _, err := n.do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return err
		}
	}
	for i, p := range c.nodes[:o.Primaries] {
		from, to := i*clusterSlots/o.Primaries, (i+1)*clusterSlots/o.Primaries-1
		if _, err := p.do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to); err != nil {
			return err
		}
	}
	// Every pair meets directly, in one direction only (two handshakes
	// between the same pair would have to be merged), rather than
	// waiting for gossip to spread the news.
	for i, a := range c.nodes {
		for _, b := range c.nodes[i+1:] {
			if _, err := a.do(ctx, "CLUSTER", "MEET", "127.0.0.1", b.Port, b.BusPort); err != nil {
				return err
			}
		}
	}
	err := poll(20*time.Second, func(ctx context.Context) error {
		for _, n := range c.nodes {
			view, err := n.clusterNodes(ctx)
			if err != nil {
				return err
			}
			if len(view) != len(c.nodes) {
				return fmt.Errorf("node %s knows %d nodes", n.Addr(), len(view))
			}
			for _, v := range view {
				if v.has("handshake") || v.has("noaddr") || v.ID == "" {
					return fmt.Errorf("node %s sees %s as %v", n.Addr(), v.Addr, v.Flags)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := 0; i < o.Primaries; i++ {
		for k := 0; k < o.ReplicasPerPrimary; k++ {
			r := c.nodes[o.Primaries+i*o.ReplicasPerPrimary+k]
			if _, err := r.do(ctx, "CLUSTER", "REPLICATE", c.nodes[i].ID); err != nil {
				return fmt.Errorf("%s: CLUSTER REPLICATE: %w", r.Addr(), err)
			}
		}
	}
	return c.WaitHealthy(20 * time.Second)
}

// clusterView is one line of CLUSTER NODES: how one node sees another.
type clusterView struct {
	ID, Addr, Primary string
	Flags             []string
	Connected         bool
}

func (v clusterView) has(flag string) bool {
	for _, f := range v.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// role is "master" or "slave" as the view says.
func (v clusterView) role() string {
	if v.has("master") {
		return "master"
	}
	if v.has("slave") {
		return "slave"
	}
	return ""
}

// clusterNodes is the node's CLUSTER NODES, by node ID.
func (s *Server) clusterNodes(ctx context.Context) (map[string]clusterView, error) {
	out, err := s.do(ctx, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	m := map[string]clusterView{}
	for _, line := range strings.Split(strings.TrimSpace(out.(string)), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		v := clusterView{ID: f[0], Addr: addr, Flags: strings.Split(f[2], ","), Connected: f[7] == "connected"}
		if f[3] != "-" {
			v.Primary = f[3]
		}
		m[v.ID] = v
	}
	return m, nil
}

// clusterInfo is the node's CLUSTER INFO.
func (s *Server) clusterInfo(ctx context.Context) (map[string]string, error) {
	out, err := s.do(ctx, "CLUSTER", "INFO")
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER INFO: %w", s.Addr(), err)
	}
	return parseInfo(out.(string)), nil
}

// reachable says whether the harness can ask the node anything.
func (n *ClusterNode) reachable() bool { return n.Running() && !n.Paused() }

// Addrs are the addresses of all nodes, for a client's seed list.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr()
	}
	return a
}

// Nodes are all nodes, in the order started: the first Primaries were
// started as primaries, then the replicas of each in turn.
func (c *Cluster) Nodes() []*ClusterNode { return append([]*ClusterNode(nil), c.nodes...) }

// Password is the nodes' password ("" when none).
func (c *Cluster) Password() string { return c.opts.Password }

func (c *Cluster) byID(id string) *ClusterNode {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

func (c *Cluster) byAddr(addr string) *ClusterNode {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// view is CLUSTER NODES from the first node that answers.
func (c *Cluster) view(ctx context.Context) (map[string]clusterView, *ClusterNode, error) {
	var errs []error
	for _, n := range c.nodes {
		if !n.reachable() {
			continue
		}
		v, err := n.clusterNodes(ctx)
		if err == nil {
			return v, n, nil
		}
		errs = append(errs, err)
	}
	return nil, nil, fmt.Errorf("no node answers: %w", errors.Join(errs...))
}

// Role is the node's role in the cluster as it sees itself: "master" or
// "slave".
func (n *ClusterNode) Role(ctx context.Context) (string, error) {
	r, err := n.Server.Role(ctx)
	return r.Role, err
}

// Primaries are the nodes that the first reachable node sees as
// primaries now (failing ones included).
func (c *Cluster) Primaries() []*ClusterNode {
	c.tb.Helper()
	v, _, err := c.view(context.Background())
	if err != nil {
		c.tb.Fatalf("redistest: %v", err)
	}
	var ps []*ClusterNode
	for _, n := range c.nodes {
		if v[n.ID].role() == "master" {
			ps = append(ps, n)
		}
	}
	return ps
}

// ReplicasOf are the nodes that the first reachable node sees as
// replicas of p now.
func (c *Cluster) ReplicasOf(p *ClusterNode) []*ClusterNode {
	c.tb.Helper()
	v, _, err := c.view(context.Background())
	if err != nil {
		c.tb.Fatalf("redistest: %v", err)
	}
	var rs []*ClusterNode
	for _, n := range c.nodes {
		if w := v[n.ID]; w.role() == "slave" && w.Primary == p.ID {
			rs = append(rs, n)
		}
	}
	return rs
}

// PrimaryFor is the node that serves key now, by CLUSTER KEYSLOT and
// CLUSTER SLOTS asked of the first reachable node.
func (c *Cluster) PrimaryFor(key string) *ClusterNode {
	c.tb.Helper()
	n, err := c.primaryFor(context.Background(), key)
	if err != nil {
		c.tb.Fatalf("redistest: primary for %q: %v", key, err)
	}
	return n
}

func (c *Cluster) primaryFor(ctx context.Context, key string) (*ClusterNode, error) {
	var errs []error
	for _, n := range c.nodes {
		if !n.reachable() {
			continue
		}
		p := n.probe()
		slot, err := p.ClusterKeySlot(ctx, key).Result()
		var slots []goredis.ClusterSlot
		if err == nil {
			slots, err = p.ClusterSlots(ctx).Result()
		}
		p.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Addr(), err))
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				if owner := c.byAddr(s.Nodes[0].Addr); owner != nil {
					return owner, nil
				}
				return nil, fmt.Errorf("slot %d is served by %s, no node of this cluster", slot, s.Nodes[0].Addr)
			}
		}
		return nil, fmt.Errorf("slot %d is served by no node (per %s)", slot, n.Addr())
	}
	return nil, fmt.Errorf("no node answers: %w", errors.Join(errs...))
}

// FailoverMode is how CLUSTER FAILOVER hands over.
type FailoverMode string

const (
	// Coordinated: the replica asks its primary to stop its clients,
	// catches up, and takes over; nothing acknowledged is lost. The
	// primary must be reachable.
	Coordinated FailoverMode = ""
	// Force: the replica takes over without its primary (which may be
	// down), with the agreement of the other primaries.
	Force FailoverMode = "FORCE"
	// Takeover: the replica takes over on its own, without agreement.
	Takeover FailoverMode = "TAKEOVER"
)

// FailoverReplicaOf sends CLUSTER FAILOVER (in the mode given) to a
// replica of primary whose link is up, and returns that replica. It does
// not wait: WaitRole(replica, "master", ...) does.
func (c *Cluster) FailoverReplicaOf(ctx context.Context, primary *ClusterNode, mode FailoverMode) (*ClusterNode, error) {
	for _, r := range c.ReplicasOf(primary) {
		if !r.reachable() {
			continue
		}
		args := []any{"CLUSTER", "FAILOVER"}
		if mode != Coordinated {
			args = append(args, string(mode))
		}
		if _, err := r.do(ctx, args...); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Addr(), err)
		}
		return r, nil
	}
	return nil, fmt.Errorf("primary %s has no reachable replica", primary.Addr())
}

// WaitRole waits until n says it has role ("master" or "slave") and every
// reachable node sees it so, and returns the time that took.
func (c *Cluster) WaitRole(n *ClusterNode, role string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	err := poll(timeout, func(ctx context.Context) error {
		own, err := n.Role(ctx)
		if err != nil {
			return err
		}
		if own != role {
			return fmt.Errorf("%s says %s", n.Addr(), own)
		}
		for _, o := range c.nodes {
			if !o.reachable() {
				continue
			}
			v, err := o.clusterNodes(ctx)
			if err != nil {
				return err
			}
			if r := v[n.ID].role(); r != role {
				return fmt.Errorf("%s sees %s as %q", o.Addr(), n.Addr(), r)
			}
		}
		return nil
	})
	return time.Since(start), err
}

// WaitHealthy waits until every reachable node says cluster_state:ok,
// all of them agree on every node's role and primary, none sees a
// reachable node failing, and every primary's reachable replicas receive
// its stream.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	return poll(timeout, func(ctx context.Context) error {
		var first map[string]clusterView
		var firstAt *ClusterNode
		for _, n := range c.nodes {
			if !n.reachable() {
				continue
			}
			info, err := n.clusterInfo(ctx)
			if err != nil {
				return err
			}
			if info["cluster_state"] != "ok" {
				return fmt.Errorf("%s: cluster_state:%s", n.Addr(), info["cluster_state"])
			}
			v, err := n.clusterNodes(ctx)
			if err != nil {
				return err
			}
			for _, m := range c.nodes {
				w := v[m.ID]
				if m.reachable() && (w.has("fail") || w.has("fail?")) {
					return fmt.Errorf("%s sees %s as %v", n.Addr(), m.Addr(), w.Flags)
				}
				if first != nil && (w.role() != first[m.ID].role() || w.Primary != first[m.ID].Primary) {
					return fmt.Errorf("%s and %s disagree on %s", n.Addr(), firstAt.Addr(), m.Addr())
				}
			}
			if first == nil {
				first, firstAt = v, n
			}
		}
		if first == nil {
			return errors.New("no node answers")
		}
		for _, p := range c.nodes {
			if !p.reachable() || first[p.ID].role() != "master" {
				continue
			}
			want := 0
			for _, r := range c.nodes {
				if w := first[r.ID]; r.reachable() && w.role() == "slave" && w.Primary == p.ID {
					role, err := r.Server.Role(ctx)
					if err != nil {
						return err
					}
					if role.Primary != p.Addr() || !role.LinkUp {
						return fmt.Errorf("replica %s: %+v, want a link to %s", r.Addr(), role, p.Addr())
					}
					want++
				}
			}
			if want > 0 {
				if err := p.replicasAcked(ctx, want); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ClusterOptions are go-redis options for a client of the cluster.
func (c *Cluster) ClusterOptions() *goredis.ClusterOptions {
	return &goredis.ClusterOptions{Addrs: c.Addrs(), Password: c.opts.Password}
}

// Client is a cluster client, closed at the end of the test.
func (c *Cluster) Client() *goredis.ClusterClient {
	cl := goredis.NewClusterClient(c.ClusterOptions())
	c.tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Flush empties every reachable primary.
func (c *Cluster) Flush(ctx context.Context) error {
	var errs []error
	for _, p := range c.Primaries() {
		if p.reachable() {
			errs = append(errs, p.Flush(ctx))
		}
	}
	return errors.Join(errs...)
}
