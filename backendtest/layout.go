package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// Layout checks onetick.Layouter on a store that shards: a fresh store
// takes a layout once and holds its one-shard lease for the layout's
// holder; a store keeps its layout against every other count; a store
// whose one-shard layout had a term refuses a sharded one; a view
// refuses to answer for the store.
func Layout(t *testing.T, h Harness) {
	ctx := context.Background()
	layouter := func(t *testing.T) (onetick.Backend, onetick.Layouter) {
		b := fresh(t, h)
		l, ok := b.(onetick.Layouter)
		if !ok {
			t.Fatalf("%T does not implement onetick.Layouter", b)
		}
		return b, l
	}
	t.Run("OneShardLeavesTheStoreAsItIs", func(t *testing.T) {
		b, l := layouter(t)
		for range 2 {
			if err := l.Layout(ctx, 1); err != nil {
				t.Fatalf("Layout(1) of a fresh store: %v", err)
			}
		}
		if li, err := b.Leader(ctx); err != nil || li.Held {
			t.Fatalf("after Layout(1): leader %+v, %v; want none", li, err)
		}
		if _, err := b.Acquire(ctx, "a", time.Minute); err != nil {
			t.Fatalf("acquire after Layout(1): %v", err)
		}
		if err := l.Layout(ctx, 1); err != nil {
			t.Fatalf("Layout(1) of a store with a term: %v", err)
		}
	})
	t.Run("ReplicasStartTogether", func(t *testing.T) {
		// Replicas of a new fleet start at once: every one of them is
		// given the layout, whoever records it.
		_, l := layouter(t)
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() { errs <- l.Layout(ctx, 4) }()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Errorf("Layout(4) of a fresh store, eight at once: %v", err)
			}
		}
	})
	if h.SharedJobState {
		t.Run("SharedLayoutChangesWhileNoLeaseHeld", func(t *testing.T) { testLayoutShared(t, layouter) })
		return
	}
	t.Run("FreshStoreTakesShards", func(t *testing.T) {
		b, l := layouter(t)
		for range 2 {
			if err := l.Layout(ctx, 4); err != nil {
				t.Fatalf("Layout(4) of a fresh store: %v", err)
			}
		}
		li, err := b.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !li.Held || li.Lease.Holder != onetick.LayoutHolder(4) || li.TTL < 24*time.Hour {
			t.Fatalf("the one-shard lease of a 4-shard store: %+v, want held by %s for about %s", li, onetick.LayoutHolder(4), onetick.LayoutHold)
		}
		if g, err := b.Acquire(ctx, "old-version", time.Minute); !errors.Is(err, onetick.ErrLeaseHeld) {
			t.Fatalf("a replica without shards acquiring the one-shard lease of a 4-shard store: %+v, %v; want ErrLeaseHeld", g, err)
		}
		for _, n := range []int{1, 2, 8} {
			err := l.Layout(ctx, n)
			var le *onetick.LayoutError
			if !errors.As(err, &le) || !errors.Is(err, onetick.ErrLayout) || le.Stored != 4 || le.Configured != n {
				t.Fatalf("Layout(%d) of a 4-shard store: %v, want a LayoutError stored 4, configured %d", n, err, n)
			}
		}
		// A shard's view leads as it always does.
		v, err := b.(onetick.Sharder).Shard(1, 4)
		if err != nil {
			t.Fatal(err)
		}
		if g, err := v.Acquire(ctx, "a", time.Minute); err != nil {
			t.Fatalf("acquire on shard 1 of a 4-shard store: %+v, %v", g, err)
		}
		if err := v.(onetick.Layouter).Layout(ctx, 4); err == nil {
			t.Fatal("Layout of a shard's view answered for the store")
		}
	})
	t.Run("UsedOneShardRefusesShards", func(t *testing.T) {
		b, l := layouter(t)
		g, err := b.Acquire(ctx, "a", time.Minute)
		if err != nil {
			t.Fatalf("acquire: %+v, %v", g, err)
		}
		if err := b.Release(ctx, g.Lease); err != nil {
			t.Fatal(err)
		}
		err = l.Layout(ctx, 4)
		if !errors.Is(err, onetick.ErrLayout) {
			t.Fatalf("Layout(4) of a store whose one-shard layout had a term: %v, want ErrLayout", err)
		}
		if err := l.Layout(ctx, 1); err != nil {
			t.Fatalf("Layout(1) after the refusal: %v", err)
		}
	})
}

// testLayoutShared: a store whose layouts share every job's state
// (Harness.SharedJobState) holds no one-shard lease for a layout, and
// takes another count once no shard's lease is held, never while one is.
func testLayoutShared(t *testing.T, layouter func(t *testing.T) (onetick.Backend, onetick.Layouter)) {
	ctx := context.Background()
	b, l := layouter(t)
	if err := l.Layout(ctx, 4); err != nil {
		t.Fatalf("Layout(4) of a fresh store: %v", err)
	}
	if li, err := b.Leader(ctx); err != nil || li.Held {
		t.Fatalf("after Layout(4): the store's lease %+v, %v; want none held", li, err)
	}
	v, err := b.(onetick.Sharder).Shard(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var le *onetick.LayoutError
	if err := l.Layout(ctx, 1); !errors.As(err, &le) || le.Stored != 4 || le.Configured != 1 {
		t.Fatalf("Layout(1) while shard 1 of 4 is led: %v, want a LayoutError stored 4, configured 1", err)
	}
	if err := l.Layout(ctx, 4); err != nil {
		t.Fatalf("Layout(4) while shard 1 of 4 is led: %v", err)
	}
	if err := v.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	if err := l.Layout(ctx, 2); err != nil {
		t.Fatalf("Layout(2) with no lease held: %v", err)
	}
	if err := l.Layout(ctx, 2); err != nil {
		t.Fatalf("Layout(2) again: %v", err)
	}
}
