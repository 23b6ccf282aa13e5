package redis

import (
	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

var _ onetick.Sharder = (*Backend)(nil)

// Shard implements onetick.Sharder: shard n of shards is a Backend on the
// same client whose prefix is ShardPrefix(prefix, n, shards), with the
// same options. Shard 0 of 1 is b itself. The view does not own the
// client: its Close does nothing, b's closes. The Lua scripts are the
// same; they get the view's keys.
//
// On a Cluster (a hash-tagged prefix) the view's keys are in one slot of
// the shard's range (ShardPrefix), so a claim is still one script on one
// node; a job's own stream must carry the view's tag.
func (b *Backend) Shard(n, shards int) (onetick.Backend, error) {
	return storekit.Shard("redis", b.view, n, shards, b, func() onetick.Backend {
		o := b.opts
		o.Prefix = ShardPrefix(b.opts.Prefix, n, shards)
		v := New(b.c, o)
		v.view = true
		return v
	})
}
