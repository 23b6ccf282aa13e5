package storekit_test

import (
	"strings"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/memory"
)

// TestShard: the one rule of Sharder.Shard every store follows.
func TestShard(t *testing.T) {
	self := memory.New(memory.Options{})
	defer self.Close()
	other := memory.New(memory.Options{})
	defer other.Close()
	made := 0
	view := func() onetick.Backend { made++; return other }
	if b, err := storekit.Shard("s", false, 0, 1, self, view); err != nil || b != self || made != 0 {
		t.Fatalf("shard 0 of 1: %v, %v, made %d; want the store itself", b, err, made)
	}
	if b, err := storekit.Shard("s", false, 2, 4, self, view); err != nil || b != other || made != 1 {
		t.Fatalf("shard 2 of 4: %v, %v, made %d; want the view", b, err, made)
	}
	if _, err := storekit.Shard("s", true, 2, 4, self, view); err == nil || !strings.Contains(err.Error(), "ask the store") {
		t.Fatalf("a view sharded again: %v", err)
	}
	for _, c := range [][2]int{{4, 4}, {-1, 4}, {0, 0}, {0, onetick.MaxShards + 1}} {
		if _, err := storekit.Shard("s", false, c[0], c[1], self, view); err == nil {
			t.Fatalf("Shard(%d, %d): no error", c[0], c[1])
		}
	}
	if made != 1 {
		t.Fatalf("view made %d times, want 1", made)
	}
}
