package redistest

import (
	"context"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// pollInterval is how often the harness asks Redis processes about their
// state while it waits for a topology to form or change.
const pollInterval = 20 * time.Millisecond

// poll calls check until it returns nil or the timeout passes, and then
// returns check's last error.
//
// Waiting on a topology means waiting on decisions taken inside other
// processes (Sentinel's election, a cluster's gossip), which announce
// them, if at all, on channels a late subscriber misses (+switch-master)
// or not at all (a replica's link coming up). Asking each process for its
// state is the only reliable signal, so the harness polls, briefly apart.
func poll(timeout time.Duration, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// info returns the fields of an INFO section of a server.
func (s *Server) info(ctx context.Context, section string) (map[string]string, error) {
	c := s.probe()
	defer c.Close()
	txt, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: INFO %s: %w", s.Addr(), section, err)
	}
	return parseInfo(txt), nil
}

func parseInfo(txt string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(txt, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

// Role is a data node's replication role as it reports it.
type Role struct {
	// Role is "master" or "slave".
	Role string
	// Primary is the address of the node it replicates (replicas only).
	Primary string
	// LinkUp says that a replica's link to its primary is up.
	LinkUp bool
}

// Role asks the server for its replication role.
func (s *Server) Role(ctx context.Context) (Role, error) {
	m, err := s.info(ctx, "replication")
	if err != nil {
		return Role{}, err
	}
	r := Role{Role: m["role"]}
	if r.Role == "slave" {
		r.Primary = m["master_host"] + ":" + m["master_port"]
		r.LinkUp = m["master_link_status"] == "up"
	}
	return r, nil
}

// acked makes the primary replicate a harmless command and returns how
// many replicas acknowledged it within wait. A replica that reports its
// link up may not receive the stream yet: after a diskless sync the
// primary holds the stream back until it has reaped the fork that sent
// the snapshot and heard from the replica, up to a second later, and a
// failover in that second loses every write since the sync. The command
// is PUBLISH on a plain primary; a cluster node does not put PUBLISH in
// the replication stream, so there it is FUNCTION LOAD REPLACE of an
// empty library of the harness (no key, no keyspace event).
func (s *Server) acked(ctx context.Context, want int, wait time.Duration) (int, error) {
	c := s.probe()
	defer c.Close()
	var n *goredis.IntCmd
	_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		if s.BusPort != 0 {
			p.FunctionLoadReplace(ctx, harnessLibrary)
		} else {
			p.Publish(ctx, "__redistest__:sync", "")
		}
		n = goredis.NewIntCmd(ctx, "WAIT", want, wait.Milliseconds())
		_ = p.Process(ctx, n)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: replicated command and WAIT: %w", s.Addr(), err)
	}
	return int(n.Val()), nil
}

// harnessLibrary is the library acked loads on cluster nodes.
const harnessLibrary = "#!lua name=redistest\nredis.register_function('redistest_noop', function() return 0 end)"

// replicasAcked fails unless want replicas of the primary acknowledged a
// command replicated now.
func (s *Server) replicasAcked(ctx context.Context, want int) error {
	n, err := s.acked(ctx, want, 100*time.Millisecond)
	if err != nil {
		return err
	}
	if n < want {
		return fmt.Errorf("primary %s: %d of %d replicas acknowledge its stream", s.Addr(), n, want)
	}
	return nil
}
