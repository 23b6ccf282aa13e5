package etcd

import (
	"fmt"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

var _ onetick.Sharder = (*Backend)(nil)

// Shard implements onetick.Sharder: shard n of shards is a Backend on the
// same client under the prefix "<prefix>shard/NN/", with the same
// options. Every key of the store is under one of a few names below the
// prefix (lease, terms/, last/, s/...), none of them "shard/", so the
// store's ranges never reach a view's keys. Shard 0 of 1 is b itself. A
// view does not own the client and its Close does nothing; b's closes.
func (b *Backend) Shard(n, shards int) (onetick.Backend, error) {
	return storekit.Shard("etcd", b.view, n, shards, b, func() onetick.Backend {
		o := b.opts
		o.Prefix = fmt.Sprintf("%sshard/%02d/", b.p, n)
		v := New(b.c, o)
		v.view = true
		return v
	})
}
