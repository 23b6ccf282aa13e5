package onetick

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Layouter is a store that records the fleet's shard count, the layout of
// its keys or rows (docs/shards.md, "Migration between shard counts").
// Replicas configured with another count than the store's would fire the
// same jobs under two layouts, each with its own lease, last-fired slots
// and tick records: the store would not see the second claim of a slot as
// a duplicate. Layout is how every replica checks, before it leads
// anything, that the store holds its layout.
type Layouter interface {
	// Layout checks, in one atomic step, that the store holds the layout of
	// shards shards, and records it when the store can take it without
	// moving anything (storekit.DecideLayout: a store whose one-shard
	// layout never had a term, or whose layouts share every job's state
	// and no shard lease is held). A fresh store's one-shard lease is then
	// held for LayoutHolder(shards) for LayoutHold, so that a replica of a
	// version without shards stays standby instead of leading every job.
	// A store holding another layout answers a *LayoutError.
	Layout(ctx context.Context, shards int) error
}

// ViewLayout is Layout on a shard's view: a view is one shard's store,
// so it holds the layout of one shard (a scheduler given a view runs it
// as a store of its own), and no other.
func ViewLayout(shards int) error {
	if shards == 1 {
		return nil
	}
	return &LayoutError{Stored: 1, Configured: shards, Why: "a shard's view holds one shard; give the store itself"}
}

// LayoutHold is how long a sharded store's one-shard lease is held for
// LayoutHolder: in effect forever.
const LayoutHold = 100 * 365 * 24 * time.Hour

// LayoutHolder is the holder of a store's one-shard lease once it holds
// the layout of shards > 1 shards: what `onetick status` of a replica
// without shards shows as the leader.
func LayoutHolder(shards int) string { return "onetick-shards:" + strconv.Itoa(shards) }

// ErrLayout is what every *LayoutError is (errors.Is).
var ErrLayout = errors.New("the store holds another shard layout")

// LayoutError is a replica configured with Configured shards on a store
// that holds Stored (1 when it records none).
type LayoutError struct {
	Stored, Configured int
	// Why the store cannot take the configured layout as it is.
	Why string
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("shards: configured %d, but the store holds the layout of %d shard(s): %s (docs/shards.md, \"Changing the shard count\")",
		e.Configured, e.Stored, e.Why)
}

// Is makes errors.Is(err, ErrLayout) hold.
func (e *LayoutError) Is(target error) bool { return target == ErrLayout }

// CheckLayout is what Run checks first: that the store holds the layout
// of the configured shard count (recording it on a store that can take
// it). A *LayoutError (errors.Is ErrLayout) is a configuration the store
// refuses; a store that does not answer is retried until ctx ends (nil).
func (s *Scheduler) CheckLayout(ctx context.Context) error { return s.checkLayout(ctx) }

// checkLayout makes sure the store holds the layout of s's shard count
// before anything leads: a *LayoutError ends Run; another error (the store
// does not answer) is retried every renew period until ctx ends. A store
// without Layouter is accepted with one shard (New refuses more).
func (s *Scheduler) checkLayout(ctx context.Context) error {
	lay, ok := s.cfg.Backend.(Layouter)
	if !ok {
		return nil
	}
	shards := max(s.cfg.Shards, 1)
	for {
		err := lay.Layout(ctx, shards)
		if err == nil || errors.Is(err, ErrLayout) {
			return err
		}
		s.log.Warn("checking the store's shard layout failed; trying again", "err", err, "shards", shards)
		t := s.clock.NewTimer(s.lease.Renew)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.Chan():
		}
	}
}
