package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SentinelOptions describe a Sentinel topology. Zero fields take the
// defaults in brackets.
type SentinelOptions struct {
	// MasterName is the name the Sentinels monitor the primary under
	// ["onetick"].
	MasterName string
	// Replicas is the number of replicas of the primary [2].
	Replicas int
	// Sentinels is the number of Sentinels [3].
	Sentinels int
	// Quorum is how many Sentinels must agree that the primary is down
	// [a majority of Sentinels].
	Quorum int
	// DownAfter is down-after-milliseconds: how long the primary may not
	// answer before a Sentinel thinks it is down [1s].
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout [3s]. It also bounds how soon a
	// Sentinel tries again after a failed failover (twice this) and how
	// long a promotion may take, so Redis's default of 3 minutes would
	// stall a test that exercises a failure.
	FailoverTimeout time.Duration
	// Password, when set, is required by the data nodes (requirepass);
	// they use it between themselves (masterauth) and the Sentinels use it
	// to reach them (sentinel auth-pass).
	Password string
	// SentinelPassword, when set, is required by the Sentinels
	// (requirepass), which use it between themselves (sentinel-pass).
	SentinelPassword string
	// MinReplicasToWrite and MinReplicasMaxLag set min-replicas-to-write
	// and min-replicas-max-lag (whole seconds) on every data node, so that
	// whichever is primary refuses writes (NOREPLICAS) without enough
	// replicas that acknowledged recently.
	MinReplicasToWrite int
	MinReplicasMaxLag  time.Duration
	// InfoPeriod, when set, replaces the 10 s at which a Sentinel asks
	// the data nodes for INFO (SENTINEL DEBUG info-period). Shorter, the
	// Sentinels notice role changes sooner: an old primary that comes
	// back, or stays up after a forced failover, is turned into a replica
	// sooner. Leave it zero to measure what production does.
	InfoPeriod time.Duration
	// NodeOptions are more options for every data node (KeyspaceEvents,
	// AppendOnly, Args). TLS is not supported in a Sentinel topology.
	NodeOptions []Option
}

func (o *SentinelOptions) defaults() {
	if o.MasterName == "" {
		o.MasterName = "onetick"
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.Quorum == 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 3 * time.Second
	}
}

// Sentinel is a primary with replicas, monitored by Sentinels, all on
// loopback, all killed at the end of the test. Which node is primary
// changes with failovers; ask Primary.
type Sentinel struct {
	tb        testing.TB
	opts      SentinelOptions
	nodes     []*Server
	sentinels []*Server
}

// StartSentinel starts the data nodes (node 0 primary, the others its
// replicas, diskless sync without delay) and the Sentinels, and returns
// once every replica is in sync and every Sentinel knows the primary, the
// replicas and the other Sentinels.
//
// The Sentinels are started knowing each other and the replicas (known-
// sentinel and known-replica in their configuration, with the IDs chosen
// here), which spares the two to ten seconds they would otherwise spend
// discovering them through hello messages and INFO.
func StartSentinel(tb testing.TB, o SentinelOptions) *Sentinel {
	tb.Helper()
	o.defaults()
	t := &Sentinel{tb: tb, opts: o}

	var nodeOpts []Option
	nodeOpts = append(nodeOpts, Args("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
	if o.Password != "" {
		nodeOpts = append(nodeOpts, RequirePass(o.Password), Args("--masterauth", o.Password))
	}
	if o.MinReplicasToWrite > 0 {
		lag := int(o.MinReplicasMaxLag.Round(time.Second) / time.Second)
		nodeOpts = append(nodeOpts, Args("--min-replicas-to-write", strconv.Itoa(o.MinReplicasToWrite),
			"--min-replicas-max-lag", strconv.Itoa(max(lag, 1))))
	}
	nodeOpts = append(nodeOpts, o.NodeOptions...)
	for i := 0; i <= o.Replicas; i++ {
		var c config
		for _, opt := range nodeOpts {
			opt(&c)
		}
		if c.tls != nil {
			tb.Fatalf("redistest: TLS is not supported in a Sentinel topology")
		}
		// The replica's primary lives in its config file, which Sentinel
		// rewrites when it repoints the replica; a Restart then comes back
		// following the primary of the moment.
		c.conf = []string{"# redistest data node " + strconv.Itoa(i)}
		if i > 0 {
			c.conf = append(c.conf, "replicaof 127.0.0.1 "+strconv.Itoa(t.nodes[0].Port))
		}
		n := newServer(tb, &c)
		if i == 0 {
			if err := n.startFresh(); err != nil {
				tb.Fatalf("redistest: primary: %v", err)
			}
		}
		t.nodes = append(t.nodes, n)
	}
	if err := startAll(t.nodes[1:]); err != nil {
		tb.Fatalf("redistest: replicas: %v", err)
	}
	t.startSentinels()
	// A Sentinel reconnects at most once per ping period (1 s), and the
	// Sentinels' first attempts to reach each other race with their
	// start, so they are told to retry every 100 ms until they have met,
	// and then given Redis's period back.
	t.sentinelDebug("ping-period", "100")
	if err := poll(20*time.Second, t.formed); err != nil {
		tb.Fatalf("redistest: Sentinel topology did not form: %v", err)
	}
	t.sentinelDebug("ping-period", "1000")
	if o.InfoPeriod > 0 {
		t.sentinelDebug("info-period", strconv.FormatInt(o.InfoPeriod.Milliseconds(), 10))
	}
	return t
}

// startSentinels writes each Sentinel's configuration and starts it. The
// configurations name each other's ports, so when a port was taken
// before a Sentinel could bind it, all of them start again on new ports.
func (t *Sentinel) startSentinels() {
	o := t.opts
	bin := serverBinary(t.tb)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		for _, s := range t.sentinels {
			s.Kill()
		}
		t.sentinels = t.sentinels[:0]
		ports := make([]int, o.Sentinels)
		ids := make([]string, o.Sentinels)
		for i := range ports {
			ports[i] = freePort(t.tb)
			ids[i] = randomToken(t.tb) + randomToken(t.tb)[:8] // 40 hex digits
		}
		// Started together, each finds the others listening on its first
		// attempt; one started late would be retried only a second later.
		var waits []func() error
		for i := range ports {
			s := &Server{Port: ports[i], tb: t.tb, dir: t.tb.TempDir(), bin: bin,
				ready: "+monitor master", adminPass: o.SentinelPassword}
			s.confFile = writeFile(t.tb, s.dir, "sentinel.conf", t.sentinelConf(ports, ids, i))
			s.argv = func(int) []string { return []string{s.confFile, "--sentinel"} }
			t.tb.Cleanup(s.cleanup)
			t.sentinels = append(t.sentinels, s)
			waits = append(waits, s.launch())
		}
		err = nil
		for _, w := range waits {
			if e := w(); e != nil && err == nil {
				err = e
			}
		}
		if err == nil {
			return
		}
	}
	t.tb.Fatalf("redistest: sentinels: %v", err)
}

func (t *Sentinel) sentinelConf(ports []int, ids []string, i int) []string {
	o := t.opts
	name := o.MasterName
	lines := []string{
		"port " + strconv.Itoa(ports[i]),
		"bind 127.0.0.1",
		"daemonize no",
		`logfile ""`,
		"sentinel myid " + ids[i],
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", name, t.nodes[0].Port, o.Quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, o.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", name, o.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", name),
	}
	if o.Password != "" {
		lines = append(lines, fmt.Sprintf("sentinel auth-pass %s %s", name, o.Password))
	}
	if o.SentinelPassword != "" {
		lines = append(lines, "requirepass "+o.SentinelPassword, "sentinel sentinel-pass "+o.SentinelPassword)
	}
	for _, r := range t.nodes[1:] {
		lines = append(lines, fmt.Sprintf("sentinel known-replica %s 127.0.0.1 %d", name, r.Port))
	}
	for j := range ports {
		if j != i {
			lines = append(lines, fmt.Sprintf("sentinel known-sentinel %s 127.0.0.1 %d %s", name, ports[j], ids[j]))
		}
	}
	return lines
}

// formed says whether every replica is in sync and every Sentinel sees
// the primary up, all replicas and all other Sentinels.
func (t *Sentinel) formed(ctx context.Context) error {
	primary := t.nodes[0].Addr()
	for _, n := range t.nodes[1:] {
		r, err := n.Role(ctx)
		if err != nil {
			return err
		}
		if r.Role != "slave" || r.Primary != primary || !r.LinkUp {
			return fmt.Errorf("replica %s: %+v", n.Addr(), r)
		}
	}
	if err := t.nodes[0].replicasAcked(ctx, len(t.nodes)-1); err != nil {
		return err
	}
	for _, s := range t.sentinels {
		sc := t.sentinelClient(s)
		m, err := sc.Master(ctx, t.opts.MasterName).Result()
		if err != nil {
			sc.Close()
			return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
		}
		reps, err := sc.Replicas(ctx, t.opts.MasterName).Result()
		if err != nil {
			sc.Close()
			return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
		}
		others, err := sc.Sentinels(ctx, t.opts.MasterName).Result()
		sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
		}
		// A Sentinel that started before another failed to reach it and
		// tries again only a second later (and meanwhile may call it down):
		// a failure injected before then would find no quorum.
		for _, o := range others {
			if o["flags"] != "sentinel" {
				return fmt.Errorf("sentinel %s: sentinel %s:%s flags %q", s.Addr(), o["ip"], o["port"], o["flags"])
			}
		}
		if m["flags"] != "master" || m["num-other-sentinels"] != strconv.Itoa(len(t.sentinels)-1) {
			return fmt.Errorf("sentinel %s: master flags %q, %s other sentinels", s.Addr(), m["flags"], m["num-other-sentinels"])
		}
		if len(reps) != len(t.nodes)-1 {
			return fmt.Errorf("sentinel %s: %d replicas", s.Addr(), len(reps))
		}
		for _, r := range reps {
			if r["flags"] != "slave" {
				return fmt.Errorf("sentinel %s: replica %s:%s flags %q", s.Addr(), r["ip"], r["port"], r["flags"])
			}
		}
	}
	return nil
}

// sentinelDebug sets a Sentinel timing (SENTINEL DEBUG, Redis 7.0+) on
// every Sentinel. A restarted Sentinel has Redis's timings again.
func (t *Sentinel) sentinelDebug(param, value string) {
	for _, s := range t.sentinels {
		sc := t.sentinelClient(s)
		err := sc.Process(context.Background(), goredis.NewStatusCmd(context.Background(), "SENTINEL", "DEBUG", param, value))
		sc.Close()
		if err != nil {
			t.tb.Fatalf("redistest: sentinel %s: SENTINEL DEBUG %s %s: %v", s.Addr(), param, value, err)
		}
	}
}

// sentinelClient is a probe connection to a Sentinel.
func (t *Sentinel) sentinelClient(s *Server) *goredis.SentinelClient {
	return goredis.NewSentinelClient(&goredis.Options{
		Addr: s.Addr(), Password: t.opts.SentinelPassword, MaxRetries: -1, PoolSize: 1,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
}

// MasterName is the name the Sentinels know the primary by.
func (t *Sentinel) MasterName() string { return t.opts.MasterName }

// Password is the data nodes' password ("" when none).
func (t *Sentinel) Password() string { return t.opts.Password }

// SentinelPassword is the Sentinels' password ("" when none).
func (t *Sentinel) SentinelPassword() string { return t.opts.SentinelPassword }

// SentinelAddrs are the Sentinels' addresses.
func (t *Sentinel) SentinelAddrs() []string {
	a := make([]string, len(t.sentinels))
	for i, s := range t.sentinels {
		a[i] = s.Addr()
	}
	return a
}

// Sentinels are the Sentinel processes (to kill, pause or restart one).
func (t *Sentinel) Sentinels() []*Server { return append([]*Server(nil), t.sentinels...) }

// Nodes are the data nodes, the first started as primary.
func (t *Sentinel) Nodes() []*Server { return append([]*Server(nil), t.nodes...) }

// Node is the data node at addr, nil when none is.
func (t *Sentinel) Node(addr string) *Server {
	for _, n := range t.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// FailoverOptions are go-redis options for a client that follows the
// primary through the Sentinels.
func (t *Sentinel) FailoverOptions() *goredis.FailoverOptions {
	return &goredis.FailoverOptions{
		MasterName:       t.opts.MasterName,
		SentinelAddrs:    t.SentinelAddrs(),
		SentinelPassword: t.opts.SentinelPassword,
		Password:         t.opts.Password,
	}
}

// FailoverClient is a go-redis client that follows the primary through
// the Sentinels; it is closed at the end of the test.
func (t *Sentinel) FailoverClient() *goredis.Client {
	c := goredis.NewFailoverClient(t.FailoverOptions())
	t.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// PrimaryAddr asks every reachable Sentinel which address the primary
// has and returns the answer a quorum of all Sentinels gives.
func (t *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	votes := map[string]int{}
	var errs []error
	for _, s := range t.sentinels {
		if !s.Running() || s.Paused() {
			continue
		}
		sc := t.sentinelClient(s)
		a, err := sc.GetMasterAddrByName(ctx, t.opts.MasterName).Result()
		sc.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: %w", s.Addr(), err))
			continue
		}
		votes[a[0]+":"+a[1]]++
	}
	for a, n := range votes {
		if n >= t.opts.Quorum {
			return a, nil
		}
	}
	return "", fmt.Errorf("no %d sentinels agree on the primary: %v %w", t.opts.Quorum, votes, errors.Join(errs...))
}

// Primary is the data node a quorum of Sentinels calls primary now (it
// waits up to 5 s for them to agree). Call it from the test's goroutine.
func (t *Sentinel) Primary() *Server {
	t.tb.Helper()
	var addr string
	err := poll(5*time.Second, func(ctx context.Context) (err error) {
		addr, err = t.PrimaryAddr(ctx)
		return err
	})
	if err != nil {
		t.tb.Fatalf("redistest: primary: %v", err)
	}
	n := t.Node(addr)
	if n == nil {
		t.tb.Fatalf("redistest: the sentinels name %s, which is no data node", addr)
	}
	return n
}

// Replicas are the data nodes other than the current primary.
func (t *Sentinel) Replicas() []*Server {
	t.tb.Helper()
	p := t.Primary()
	var rs []*Server
	for _, n := range t.nodes {
		if n != p {
			rs = append(rs, n)
		}
	}
	return rs
}
