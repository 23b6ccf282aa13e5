package redis

import (
	"context"
	"fmt"
	"sort"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

var _ onetick.Members = (*Backend)(nil)

// membersScript: KEYS members; ARGV holder, ttl ms.
//
// The members key is a sorted set, member = holder, score = its expiry in
// Unix ms by Redis's clock. One step: add or move the holder to now + ttl,
// drop the entries whose expiry has passed, let the key itself expire with
// its last entry (a fleet that stopped leaves nothing behind), and return
// {1, holders}; {-1, key, reason, kind, value} when the key holds another
// type (nothing written).
var membersScript = goredis.NewScript(luaPrelude + `
local t = keytype(KEYS[1])
if t ~= 'zset' and t ~= 'none' then
  return {-1, KEYS[1], wrongtype(KEYS[1], 'a sorted set'), 'type', ''}
end
local now = now_ms()
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], fmtint(tonumber(last[2])))
return {1, redis.call('ZRANGE', KEYS[1], 0, -1)}
`)

// membersKey is the fleet's membership, <prefix>:members: under the
// store's own prefix, so on a Cluster (prefix "{t}") in the fleet's slot.
// A shard's view has another prefix; the balancer heartbeats on the store.
func (b *Backend) membersKey() string { return b.opts.Prefix + ":members" }

// Heartbeat implements onetick.Members with one script on <prefix>:members.
func (b *Backend) Heartbeat(ctx context.Context, holder string, ttl time.Duration) ([]string, error) {
	if err := onetick.CheckHeartbeat(holder, ttl); err != nil {
		return nil, err
	}
	key := b.membersKey()
	v, err := membersScript.Run(ctx, b.c, []string{key}, holder, ttl.Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis: heartbeat on %s: %w", key, err)
	}
	if v[0].(int64) == -1 {
		return nil, b.damageOf(v)
	}
	raw, _ := v[1].([]any)
	live := make([]string, 0, len(raw))
	for _, x := range raw {
		s, _ := x.(string)
		live = append(live, s)
	}
	sort.Strings(live)
	return live, nil
}

// leaveScript: KEYS members; ARGV holder. Removes the holder's entry
// (ZREM; the key goes with its last entry) and returns {1}; {-1, key,
// reason, kind, value} when the key holds another type (nothing written).
var leaveScript = goredis.NewScript(luaPrelude + `
local t = keytype(KEYS[1])
if t ~= 'zset' and t ~= 'none' then
  return {-1, KEYS[1], wrongtype(KEYS[1], 'a sorted set'), 'type', ''}
end
if t == 'zset' then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return {1}
`)

// Leave implements onetick.Members: one script removes holder from
// <prefix>:members.
func (b *Backend) Leave(ctx context.Context, holder string) error {
	if err := onetick.CheckLeave(holder); err != nil {
		return err
	}
	key := b.membersKey()
	v, err := leaveScript.Run(ctx, b.c, []string{key}, holder).Slice()
	if err != nil {
		return fmt.Errorf("redis: leave on %s: %w", key, err)
	}
	if v[0].(int64) == -1 {
		return b.damageOf(v)
	}
	return nil
}
