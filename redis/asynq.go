package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// The asynq relay (issue 21): a job whose Relay is of kind asynq has its
// ticks written as asynq tasks on the same Redis, by the claim's script
// itself (and by Enqueue's, for triggers and backfills), instead of being
// appended to the job's stream. So a tick is in asynq's queue if and only
// if it is claimed: a fenced claim writes nothing, a duplicate tick
// writes nothing, a retried claim writes nothing twice, and a task id
// asynq already holds is not pushed again.
//
// The task: id the tick's id (TickID or TriggerID), type Relay.Type or the
// job's name, queue Relay.Queue, MaxRetry Relay.MaxAttempts-1 (asynq's
// default 25 when 0), Timeout asynq's default 30 minutes, Retention
// Relay.Retention or the tick record's retention (whole seconds, rounded
// up), payload a RelayedTick as JSON.

// RelayedTick is the payload (JSON) of an asynq task a relay wrote.
type RelayedTick struct {
	Job string `json:"job"`
	// Slot is the scheduled time in Unix milliseconds; 0 (absent) for a
	// trigger, which has no slot but a Key.
	Slot int64  `json:"slot,omitempty"`
	Tick string `json:"tick"`
	Key  string `json:"key,omitempty"`
	// Kind is "" for a scheduled slot, onetick.KindTrigger or
	// onetick.KindBackfill.
	Kind    string `json:"kind,omitempty"`
	Version string `json:"version,omitempty"`
	// Payload is the job's payload.
	Payload string `json:"payload"`
}

// asynqDefaultMaxRetry and asynqDefaultTimeout are asynq v0.26.0's client
// defaults (client.go).
const (
	asynqDefaultMaxRetry = 25
	asynqDefaultTimeout  = 30 * time.Minute
)

// ErrRelayCluster is CanRelay's answer on Redis Cluster.
var ErrRelayCluster = errors.New("redis: the asynq relay does not run on Redis Cluster: " +
	"asynq's keys carry their own hash tag ({queue}), so one script cannot write both onetick's tick record and asynq's task")

var _ onetick.Relayer = (*Backend)(nil)

// CanRelay implements onetick.Relayer: asynq only, not on Redis Cluster,
// and asynq's keys of r's queue must be in the layout of asynq v0.26.0.
// asynq writes no layout version in Redis, so what is checked is the
// shape: asynq:queues a set, asynq:servers a sorted set, the queue's
// pending list a list, and its newest pending tasks hashes whose msg is a
// TaskMessage with only the fields v0.26.0 knows and whose state is one
// v0.26.0 writes. A field v0.26.0 does not know is refused as a newer
// layout.
func (b *Backend) CanRelay(ctx context.Context, r onetick.Relay) error {
	if r.Kind != onetick.RelayAsynq {
		return fmt.Errorf("redis: cannot relay ticks to %s (this store relays to %s on the same Redis)", r.Kind, onetick.RelayAsynq)
	}
	if _, ok := b.c.(*goredis.ClusterClient); ok {
		return ErrRelayCluster
	}
	// A user whose ACL denies INFO is not refused for it: on a cluster
	// node its claims would fail anyway (CROSSSLOT), writing nothing.
	info, err := b.c.Info(ctx, "cluster").Result()
	if err != nil && !strings.HasPrefix(err.Error(), "NOPERM") {
		return fmt.Errorf("redis: asynq relay: %w", err)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return ErrRelayCluster
	}
	q := relayQueue(r)
	pending := asynqPendingKey(q)
	for key, want := range map[string]string{asynqQueues: "set", "asynq:servers": "zset", pending: "list"} {
		typ, err := b.c.Type(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("redis: asynq relay: %w", err)
		}
		if typ != "none" && typ != want {
			return fmt.Errorf("redis: asynq relay: %s holds a %s, not a %s as in asynq %s's layout", key, typ, want, AsynqLayout)
		}
	}
	ids, err := b.c.LRange(ctx, pending, 0, 7).Result()
	if err != nil {
		return fmt.Errorf("redis: asynq relay: %w", err)
	}
	for _, id := range ids {
		key := asynqTaskKey(q, id)
		v, err := b.c.HMGet(ctx, key, "msg", "state").Result()
		if err != nil {
			if isWrongType(err) {
				return fmt.Errorf("redis: asynq relay: %s is not a hash as in asynq %s's layout", key, AsynqLayout)
			}
			return fmt.Errorf("redis: asynq relay: %w", err)
		}
		msg, _ := v[0].(string)
		state, _ := v[1].(string)
		if msg == "" && state == "" {
			continue // taken since LRANGE
		}
		if err := checkAsynqMsg([]byte(msg)); err != nil {
			return fmt.Errorf("redis: asynq relay: %s: %v; refused", key, err)
		}
		switch state {
		case "pending", "active", "scheduled", "retry", "archived", "completed", "aggregating":
		default:
			return fmt.Errorf("redis: asynq relay: %s has state %q, which asynq %s does not write (a newer asynq layout?); refused",
				key, short(state), AsynqLayout)
		}
	}
	return nil
}

func relayQueue(r onetick.Relay) string {
	if r.Queue == "" {
		return onetick.DefaultRelayQueue
	}
	return r.Queue
}

// relayTask returns the asynq task a relayed tick becomes: its queue, its
// id and its encoded TaskMessage.
func relayTask(t onetick.Tick, kind string) (queue, id string, msg []byte) {
	r := t.Relay
	queue, id = relayQueue(*r), t.ID()
	typ := r.Type
	if typ == "" {
		typ = t.Job
	}
	retry := int32(asynqDefaultMaxRetry)
	if r.MaxAttempts > 0 {
		retry = int32(min(r.MaxAttempts-1, math.MaxInt32))
	}
	ret := r.Retention
	if ret == 0 {
		ret = t.Retention
	}
	rt := RelayedTick{Job: t.Job, Tick: id, Key: t.Key, Kind: kind, Version: t.Version, Payload: t.Payload}
	if t.Key == "" {
		rt.Slot = int64(t.Slot)
	}
	payload, _ := json.Marshal(rt) // strings and an integer: cannot fail
	m := asynqMsg{Type: typ, Payload: payload, ID: id, Queue: queue, Retry: retry,
		Timeout:   int64(asynqDefaultTimeout / time.Second),
		Retention: int64(math.Ceil(ret.Seconds()))}
	return queue, id, m.encode()
}

// packRelay writes a tick's relay for the scripts: "" for none, the
// asynq task as {queue, id, msg}, or for a relay this store cannot write
// the reason, which makes the tick Broken.
func (p *packer) relay(t onetick.Tick, kind string) {
	switch {
	case t.Relay == nil:
		p.str("")
	case t.Relay.Kind != onetick.RelayAsynq:
		p.str("relay " + t.Relay.Kind + ": this store relays only to " + onetick.RelayAsynq)
	default:
		q, id, msg := relayTask(t, kind)
		p.array(3)
		p.str(q)
		p.str(id)
		p.str(string(msg))
	}
}

// luaAsynq writes a relayed tick as asynq v0.26.0's enqueueCmd does: the
// task hash (msg, state pending, pending_since in Unix ns) and its id
// LPUSHed on the queue's pending list; and the queue named in
// asynq:queues, as asynq's client does before it. r is {queue, id, msg}.
//
// asynq_check reads before anything is written: 'dup' when asynq holds
// the task id already (asynq's own enqueue refuses it too), or 'bad', key,
// reason when a key holds another type. asynq_write's HSET may fail only
// when it is the script's first write (out of memory); it returns the
// error.
const luaAsynq = `
local function asynq_keys(r)
  local p = 'asynq:{' .. r[1] .. '}:'
  return p .. 't:' .. r[2], p .. 'pending'
end
local function asynq_check(r)
  local tk, pk = asynq_keys(r)
  if redis.call('EXISTS', tk) == 1 then return 'dup' end
  local t = keytype(pk)
  if t ~= 'none' and t ~= 'list' then return 'bad', pk, 'holds a ' .. t .. ', not a list (asynq\'s pending list)' end
  t = keytype('asynq:queues')
  if t ~= 'none' and t ~= 'set' then return 'bad', 'asynq:queues', 'holds a ' .. t .. ', not a set (asynq\'s queues)' end
  return nil
end
local function asynq_write(r, now)
  local tk, pk = asynq_keys(r)
  local _, err = try('HSET', tk, 'msg', r[3], 'state', 'pending', 'pending_since', fmtint(now) .. '000000')
  if err then return err end
  redis.call('LPUSH', pk, r[2])
  redis.call('SADD', 'asynq:queues', r[1])
  return nil
end
`

// asynqRelayKeys are the asynq keys a relayed tick's script touches, to
// declare them.
func asynqRelayKeys(r onetick.Relay, id string) []string {
	q := relayQueue(r)
	return []string{asynqTaskKey(q, id), asynqPendingKey(q), asynqQueues}
}

var _ onetick.RelayBacklogger = (*Backend)(nil)

// RelayBacklog implements onetick.RelayBacklogger: the length of asynq's
// pending list of r's queue, the tasks no asynq server has taken yet
// (scheduled, retrying and active tasks are not counted).
func (b *Backend) RelayBacklog(ctx context.Context, r onetick.Relay) (int64, error) {
	if r.Kind != onetick.RelayAsynq {
		return 0, fmt.Errorf("redis: no backlog of a %s relay (this store relays to %s)", r.Kind, onetick.RelayAsynq)
	}
	key := asynqPendingKey(relayQueue(r))
	n, err := b.c.LLen(ctx, key).Result()
	if err != nil {
		if isWrongType(err) {
			return 0, fmt.Errorf("redis: %s is not a list as in asynq %s's layout", key, AsynqLayout)
		}
		return 0, fmt.Errorf("redis: asynq backlog: %w", err)
	}
	return n, nil
}
