package etcd_test

import (
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/internal/etcdtest"
)

// TestShards: views (a key prefix per shard) are isolated, shard 0 of 1
// is the store; and the whole suite on shard 3 of 8.
func TestShards(t *testing.T) {
	h := harness(etcdtest.Start(t))
	t.Run("Shards", func(t *testing.T) { backendtest.Shards(t, h) })
	t.Run("ConformanceView", func(t *testing.T) {
		vh := h
		view := func(t *testing.T, b onetick.Backend) onetick.Backend {
			t.Cleanup(func() { _ = b.Close() })
			v, err := b.(onetick.Sharder).Shard(3, 8)
			if err != nil {
				t.Fatal(err)
			}
			if p := v.(*etcd.Backend).Prefix(); p != b.(*etcd.Backend).Prefix()+"shard/03/" {
				t.Fatalf("view prefix %q", p)
			}
			return v
		}
		vh.New = func(t *testing.T) onetick.Backend { return view(t, h.New(t)) }
		vh.NewRetained = func(t *testing.T, r onetick.LedgerRetention) onetick.Backend { return view(t, h.NewRetained(t, r)) }
		backendtest.Exercise(t, vh)
	})
}
