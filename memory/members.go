package memory

import (
	"context"
	"sort"
	"time"

	"github.com/onetick/onetick"
)

var _ onetick.Members = (*Backend)(nil)

// Heartbeat implements onetick.Members: a map of holder to expiry, judged
// by the store's clock under the store's lock.
func (b *Backend) Heartbeat(ctx context.Context, holder string, ttl time.Duration) ([]string, error) {
	if err := onetick.CheckHeartbeat(holder, ttl); err != nil {
		return nil, err
	}
	now, err := b.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if b.members == nil {
		b.members = map[string]time.Time{}
	}
	b.members[holder] = now.Add(ttl)
	live := make([]string, 0, len(b.members))
	for h, exp := range b.members {
		if !now.Before(exp) {
			delete(b.members, h)
			continue
		}
		live = append(live, h)
	}
	sort.Strings(live)
	return live, nil
}

// Leave implements onetick.Members: the holder's entry is deleted under
// the store's lock.
func (b *Backend) Leave(ctx context.Context, holder string) error {
	if err := onetick.CheckLeave(holder); err != nil {
		return err
	}
	if _, err := b.lock(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	delete(b.members, holder)
	return nil
}
