package storekit

import (
	"fmt"

	"github.com/onetick/onetick"
)

// LayoutState is what a store read, in the step that may record a layout,
// for DecideLayout.
type LayoutState struct {
	// Stored is the recorded shard count; 0 when the store records none
	// (a store of a version without shards: one shard).
	Stored int
	// Used: the one-shard layout had a term (the store holds an epoch for
	// it), so its last-fired slots and records may hold the fleet's
	// history.
	Used bool
	// Shared: the layouts share every job's state (PostgreSQL: the job
	// tables have no shard column), so the count may change while no
	// shard lease is held; Held says one is.
	Shared, Held bool
}

// DecideLayout is the rule of onetick.Layouter.Layout, once for every
// store: record reports whether the store records shards (and, when
// going from one shard to more on a store that records none, holds its
// one-shard lease for onetick.LayoutHolder); a *onetick.LayoutError when
// it holds another layout it cannot leave as it is.
func DecideLayout(st LayoutState, shards int) (record bool, err error) {
	if err := onetick.CheckShard(0, shards); err != nil {
		return false, err
	}
	stored := max(st.Stored, 1)
	switch {
	case stored == shards:
		return false, nil
	case st.Shared && !st.Held:
		return true, nil
	case st.Shared:
		return false, &onetick.LayoutError{Stored: stored, Configured: shards,
			Why: "a shard's lease is held: stop every replica of the fleet, then start them with the new count"}
	case st.Stored == 0 && !st.Used:
		return true, nil
	case st.Stored == 0:
		return false, &onetick.LayoutError{Stored: stored, Configured: shards,
			Why: fmt.Sprintf("its one-shard layout holds the fleet's history: stop the fleet and move it with `onetick shards migrate --to %d --apply`", shards)}
	}
	return false, &onetick.LayoutError{Stored: stored, Configured: shards,
		Why: fmt.Sprintf("the layout of %d shards holds the fleet's history: configure shards: %d, or stop the fleet and move it with `onetick shards migrate --to %d --apply`", stored, stored, shards)}
}
