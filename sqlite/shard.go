package sqlite

import (
	"fmt"

	"github.com/onetick/onetick"
)

var _ onetick.Sharder = (*Backend)(nil)

// Shard implements onetick.Sharder: the file store runs one replica by
// construction, so it has one shard, which is the store itself; more
// shards are refused with ErrShardsUnsupported.
func (b *Backend) Shard(n, shards int) (onetick.Backend, error) {
	if err := onetick.CheckShard(n, shards); err != nil {
		return nil, err
	}
	if shards > 1 {
		return nil, fmt.Errorf("sqlite: %d shards: the file store (%s) runs one replica and has one shard; shards need a shared store (Redis, PostgreSQL): %w",
			shards, b.path, onetick.ErrShardsUnsupported)
	}
	return b, nil
}
