package memory

import (
	"context"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

var _ onetick.Layouter = (*Backend)(nil)

// Layout implements onetick.Layouter under the store's lock: the rule is
// storekit.DecideLayout's; the one-shard layout was used when it ever had
// a term.
func (b *Backend) Layout(ctx context.Context, shards int) error {
	if b.view {
		return onetick.ViewLayout(shards)
	}
	now, err := b.lock(ctx)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	record, err := storekit.DecideLayout(storekit.LayoutState{Stored: b.shards, Used: b.epoch != 0 || b.held}, shards)
	if !record || err != nil {
		return err
	}
	if b.shards == 0 && shards > 1 {
		b.lease, b.held, b.expires = onetick.Lease{Holder: onetick.LayoutHolder(shards)}, true, now.Add(onetick.LayoutHold)
	}
	b.shards = shards
	return nil
}
