package storekit

import (
	"fmt"

	"github.com/onetick/onetick"
)

// Shard is how every store answers onetick.Sharder.Shard(n, shards): the
// numbers are checked (onetick.CheckShard); a view refuses to be sharded
// again (store names the store for the message); shard 0 of 1 is the
// store itself (today's keys: nothing moves for a fleet without shards);
// any other shard is the view that view returns.
func Shard(store string, isView bool, n, shards int, self onetick.Backend, view func() onetick.Backend) (onetick.Backend, error) {
	if err := onetick.CheckShard(n, shards); err != nil {
		return nil, err
	}
	if isView {
		return nil, fmt.Errorf("%s: Shard(%d, %d) of a shard's view: ask the store", store, n, shards)
	}
	if shards == 1 {
		return self, nil
	}
	return view(), nil
}
