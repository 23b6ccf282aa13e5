package redis

import (
	"context"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

var _ onetick.Layouter = (*Backend)(nil)

// layoutKey is the fleet's recorded shard count, <prefix>:shards, in the
// fleet's slot with the one-shard lease and epoch.
func (b *Backend) layoutKey() string { return b.opts.Prefix + ":shards" }

// layoutReadScript reads, at one instant, the recorded count ("" for
// none) and how many of the one-shard epoch and lease exist: KEYS shards,
// epoch, leader.
var layoutReadScript = goredis.NewScript(`
return {redis.call('GET', KEYS[1]) or '', redis.call('EXISTS', KEYS[2]) + redis.call('EXISTS', KEYS[3])}
`)

// layoutScript records a shard count only if the state Layout decided on
// is still the store's (compare and set): KEYS shards, epoch, leader;
// ARGV the count read ("" for none), whether the one-shard layout was
// used ("1"/"0"), the count to record, and the lease value and PX to hold
// the one-shard lease with ("" for none). 0: the state changed, read it
// again; 1: recorded.
var layoutScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
local used = (redis.call('EXISTS', KEYS[2]) + redis.call('EXISTS', KEYS[3])) > 0
if cur ~= ARGV[1] or used ~= (ARGV[2] == '1') then return 0 end
redis.call('SET', KEYS[1], ARGV[3])
if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5]) end
return 1
`)

// Layout implements onetick.Layouter: read the shard count and whether
// the one-shard layout had a term, let storekit.DecideLayout decide, and
// record with layoutScript, which refuses if the state changed meanwhile
// (read again then). On a store that recorded no count, a sharded layout
// also holds the one-shard lease for onetick.LayoutHolder.
func (b *Backend) Layout(ctx context.Context, shards int) error {
	if b.view {
		return onetick.ViewLayout(shards)
	}
	for range 10 {
		// One script reads the count and whether the one-shard layout was
		// used, so that both describe the same instant: a count read before
		// another replica recorded it, and a lease read after, would look
		// like a used store that records no count.
		v, err := layoutReadScript.Run(ctx, b.c, []string{b.layoutKey(), b.epoch, b.leader}).Slice()
		if err != nil {
			return fmt.Errorf("redis: shard layout on %s: %w", b.layoutKey(), err)
		}
		var st storekit.LayoutState
		raw, _ := v[0].(string)
		if raw != "" {
			n, perr := strconv.Atoi(raw)
			if perr != nil || n < 1 || n > onetick.MaxShards {
				return fmt.Errorf("redis: %s holds %q, not a shard count (1 to %d): repair it by hand", b.layoutKey(), short(raw), onetick.MaxShards)
			}
			st.Stored = n
		}
		used, _ := v[1].(int64)
		st.Used = used > 0
		record, err := storekit.DecideLayout(st, shards)
		if !record || err != nil {
			return err
		}
		usedArg, hold, px := "0", "", int64(0)
		if st.Used {
			usedArg = "1"
		}
		if st.Stored == 0 && shards > 1 {
			hold, px = onetick.Lease{Holder: onetick.LayoutHolder(shards)}.Token(), onetick.LayoutHold.Milliseconds()
		}
		ok, err := layoutScript.Run(ctx, b.c, []string{b.layoutKey(), b.epoch, b.leader}, raw, usedArg, shards, hold, px).Int()
		if err != nil {
			return fmt.Errorf("redis: shard layout on %s: %w", b.layoutKey(), err)
		}
		if ok == 1 {
			return nil
		}
	}
	return fmt.Errorf("redis: shard layout on %s: the state kept changing while it was read", b.layoutKey())
}
