package memory_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/memory"
)

// TestShards: views are isolated, shard 0 of 1 is the store.
func TestShards(t *testing.T) { backendtest.Shards(t, harness()) }

// TestLayout: the recorded shard count (onetick.Layouter).
func TestLayout(t *testing.T) { backendtest.Layout(t, harness()) }

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

// A view runs on the store's clock; closing the store closes its views.
func TestShardClockAndClose(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	b := memory.New(memory.Options{Clock: clock})
	v, err := b.Shard(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if now, err := v.Time(t.Context()); err != nil || !now.Equal(clock.Now()) {
		t.Fatalf("the view's time %v, %v; want the store's clock %v", now, err, clock.Now())
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
