package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// Durability modes.
const (
	// DurabilityAsync (the default): a write is acknowledged when the
	// primary has applied it; replication is asynchronous.
	DurabilityAsync = "async"
	// DurabilityReplicated: acquire, renew and claim are followed, on the
	// same connection, by WAIT for Options.Replicas replicas within
	// Options.ReplicationTimeout. A renewal that too few replicas
	// acknowledged does not extend the leader's trust; an acquisition that
	// too few acknowledged is released and retried; a claim that too few
	// acknowledged makes the leader step down. WAIT narrows the window in
	// which a failover loses an acknowledged write; it does not close it
	// (see the README).
	DurabilityReplicated = "replicated"
)

// write runs s and, in the replicated mode, WAIT on the same connection.
// The script's own result is in cmd; rerr is non-nil (wrapping
// onetick.ErrNotReplicated) when too few replicas acknowledged it in time.
func (b *Backend) write(ctx context.Context, s *goredis.Script, keys []string, args ...any) (cmd *goredis.Cmd, rerr error) {
	if b.opts.Durability != DurabilityReplicated {
		return s.Run(ctx, b.c, keys, args...), nil
	}
	// A pipeline runs on one connection, so WAIT counts this write. In a
	// cluster, the node that owns the keys' hash tag.
	var c goredis.Cmdable = b.c
	if cc, ok := b.c.(*goredis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			cmd = goredis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd, nil
		}
		c = node
	}
	for attempt := 0; ; attempt++ {
		var ev *goredis.Cmd
		var wait *goredis.Cmd
		_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			ev = p.EvalSha(ctx, s.Hash(), keys, args...)
			wait = p.Do(ctx, "WAIT", b.opts.Replicas, b.opts.ReplicationTimeout.Milliseconds())
			return nil
		})
		if err := ev.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") && attempt == 0 {
			// A new primary after a failover has no script cache.
			if err := s.Load(ctx, c).Err(); err != nil {
				return ev, nil
			}
			continue
		}
		if ev.Err() != nil {
			return ev, nil
		}
		n, err := wait.Int64()
		switch {
		case err != nil:
			return ev, fmt.Errorf("%w: WAIT: %v", onetick.ErrNotReplicated, err)
		case n < int64(b.opts.Replicas):
			return ev, fmt.Errorf("%w: %d of %d replicas acknowledged within %s", onetick.ErrNotReplicated, n, b.opts.Replicas, b.opts.ReplicationTimeout)
		}
		return ev, nil
	}
}

// isNotReplicated reports whether err says too few replicas acknowledged.
func isNotReplicated(err error) bool { return errors.Is(err, onetick.ErrNotReplicated) }

// defaultReplicationTimeout bounds WAIT in the replicated mode.
const defaultReplicationTimeout = 100 * time.Millisecond
