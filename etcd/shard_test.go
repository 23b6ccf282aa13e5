package etcd_test

import (
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/internal/etcdtest"
)

// TestShards: views (a key prefix per shard) are isolated, shard 0 of 1
// is the store, and shard 3 of 8 lives under <prefix>shard/03/. (The whole
// suite on a view runs on memory and Redis; on etcd a view is the same
// code under another prefix.)
func TestShards(t *testing.T) {
	h := harness(etcdtest.Start(t))
	backendtest.Shards(t, h)
	b := h.New(t)
	t.Cleanup(func() { _ = b.Close() })
	v, err := b.(onetick.Sharder).Shard(3, 8)
	if err != nil {
		t.Fatal(err)
	}
	if p := v.(*etcd.Backend).Prefix(); p != b.(*etcd.Backend).Prefix()+"shard/03/" {
		t.Fatalf("view prefix %q", p)
	}
}
