package memory

import (
	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

var _ onetick.Sharder = (*Backend)(nil)

// Shard implements onetick.Sharder: shard n of shards is an inner store
// with its own lease, epoch, history, last-fired slots, records,
// controls, ledger, streams and workers, on the store's clock and
// options. Shard 0 of 1 is b itself. A view is made once per n and kept:
// Shard(n, _) returns the same view again, as a Redis view of one prefix
// reads the same keys (shard n's keys do not depend on the count on a
// server without Cluster). Closing a view does nothing; closing b closes
// every view.
func (b *Backend) Shard(n, shards int) (onetick.Backend, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	return storekit.Shard("memory", b.view, n, shards, b, func() onetick.Backend {
		v, ok := b.views[n]
		if !ok {
			v = New(b.opts)
			v.view = true
			if b.views == nil {
				b.views = map[int]*Backend{}
			}
			b.views[n] = v
		}
		return v
	})
}

// closeViewsLocked closes every view of b; b.mu is held.
func (b *Backend) closeViewsLocked() {
	for _, v := range b.views {
		v.mu.Lock()
		v.closed = true
		v.mu.Unlock()
	}
}
