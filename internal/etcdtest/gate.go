package etcdtest

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
)

// peerGate is an HTTP proxy in front of one member's peer port: the
// member advertises the gate's URL, so every peer request to it (raft
// streams its peers dial, pipeline posts, lease forwarding) passes the
// gate. A partitioned member's traffic is refused both ways: requests
// to it at its own gate, its requests to the others at theirs (etcd
// names the sender in the X-Server-From header), and the requests in
// flight are ended when the partition begins.
type peerGate struct {
	c      *Cluster
	member int
	ln     net.Listener
	srv    *http.Server
	proxy  *httputil.ReverseProxy

	mu     sync.Mutex
	active map[*gateReq]struct{}
}

type gateReq struct {
	from   string
	cancel context.CancelFunc
}

func newPeerGate(c *Cluster, member int, target string) (*peerGate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(target)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	g := &peerGate{c: c, member: member, ln: ln, active: map[*gateReq]struct{}{}}
	g.proxy = httputil.NewSingleHostReverseProxy(u)
	g.proxy.FlushInterval = -1 // raft streams
	g.proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	g.srv = &http.Server{Handler: g}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *peerGate) url() string { return "http://" + g.ln.Addr().String() }

func (g *peerGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from := r.Header.Get("X-Server-From")
	if g.c.cut(g.member, from) {
		http.Error(w, "partitioned", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	q := &gateReq{from: from, cancel: cancel}
	g.mu.Lock()
	g.active[q] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.active, q)
		g.mu.Unlock()
	}()
	g.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// end ends the requests in flight that match.
func (g *peerGate) end(match func(from string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for q := range g.active {
		if match(q.from) {
			q.cancel()
		}
	}
}

func (g *peerGate) close() { _ = g.srv.Close() }

// cut reports whether a request from the member named from (hex id, or
// "" when unnamed) to member to is refused.
func (c *Cluster) cut(to int, from string) bool {
	c.partMu.Lock()
	defer c.partMu.Unlock()
	if c.parted[to] {
		return true
	}
	for i, p := range c.parted {
		if p && from != "" && from == c.ids[i] {
			return true
		}
	}
	return false
}

// Partition cuts member i's peer traffic both ways (the cluster must have
// been started with StartPartitionableCluster); its client traffic is the
// caller's to cut (clients through a proxy). Heal undoes it.
func (c *Cluster) Partition(i int) {
	c.partMu.Lock()
	c.parted[i] = true
	id := c.ids[i]
	c.partMu.Unlock()
	for k, g := range c.gates {
		if k == i {
			g.end(func(string) bool { return true })
			continue
		}
		g.end(func(from string) bool { return from == id })
	}
}

// Heal ends member i's partition.
func (c *Cluster) Heal(i int) {
	c.partMu.Lock()
	c.parted[i] = false
	c.partMu.Unlock()
}

func hexID(id uint64) string { return strconv.FormatUint(id, 16) }
