package sqlite_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/onetick/onetick"
)

// The file store has one shard, itself; it refuses more, saying why.
func TestShardRefused(t *testing.T) {
	b, path := open(t)
	v, err := b.Shard(0, 1)
	if err != nil || v != onetick.Backend(b) {
		t.Fatalf("Shard(0, 1) = %v, %v; want the store itself", v, err)
	}
	v, err = b.Shard(1, 3)
	if !errors.Is(err, onetick.ErrShardsUnsupported) || v != nil {
		t.Fatalf("Shard(1, 3) = %v, %v; want ErrShardsUnsupported", v, err)
	}
	for _, want := range []string{"3 shards", "file store", path, "shared store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := b.Shard(3, 3); err == nil || errors.Is(err, onetick.ErrShardsUnsupported) || !strings.Contains(err.Error(), "shard 3 of 3") {
		t.Errorf("Shard(3, 3): %v, want a bad shard number", err)
	}
}
