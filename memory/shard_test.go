package memory_test

import (
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/memory"
)

// TestConformanceShardView: a shard's view obeys the whole Backend
// contract on its own.
func TestConformanceShardView(t *testing.T) {
	h := harness()
	view := func(t *testing.T, b *memory.Backend) onetick.Backend {
		t.Cleanup(func() { _ = b.Close() })
		v, err := b.Shard(3, 8)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	h.New = func(t *testing.T) onetick.Backend { return view(t, memory.New(memory.Options{})) }
	h.NewRetained = func(t *testing.T, r onetick.LedgerRetention) onetick.Backend {
		return view(t, memory.New(memory.Options{Ledger: r}))
	}
	backendtest.Exercise(t, h)
}

// Closing the store closes its views; closing a view does not close the
// store.
func TestShardClose(t *testing.T) {
	b := memory.New(memory.Options{})
	v, err := b.Shard(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Time(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.(onetick.Sharder).Shard(0, 2); err == nil {
		t.Error("a view's Shard: no error, want one (views are asked of the store)")
	}
	_ = b.Close()
	if _, err := v.Time(t.Context()); err != memory.ErrClosed {
		t.Errorf("a view after the store closed: %v, want ErrClosed", err)
	}
	if _, err := b.Shard(1, 2); err != memory.ErrClosed {
		t.Errorf("Shard after Close: %v, want ErrClosed", err)
	}
}
