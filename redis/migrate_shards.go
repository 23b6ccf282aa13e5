package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// Changing the fleet's shard count (docs/shards.md, "Migration between
// shard counts"), offline: every replica stopped. Each layout of a Redis
// store has its own keys (ShardPrefix), so what decides a job's next
// slot is copied from its shard's view under the stored count to its
// shard's view under the new one: its last-fired slot, its pause
// intervals and who paused (an absent field is deleted, so the new view
// ends equal to the old). Tick and trigger records, the run ledger,
// control logs and default streams are not copied. The old views are
// left as they are: a migration interrupted before its commit is run
// again, and copies the same.
//
// The commit is one script on the fleet's keys: the stored count, and the
// one-shard lease <prefix>:leader, held for onetick.LayoutHolder(N) for
// onetick.LayoutHold when N > 1 (a replica of a version without shards
// knows only that lease: it stays standby), removed when N = 1 (the
// layout of one shard is that version's own). A replica of this version
// refuses any other count than the stored one at start.
//
// During the copy the old layout's leases are held by the migration
// (migrateHolder, for migrateTTL, renewed between batches), so that no
// replica started meanwhile leads under the old layout; they are released
// after the commit (the one-shard lease, with one old shard, becomes the
// tombstone). A migration interrupted leaves them to expire within
// migrateTTL.

// migrateHolder is the holder of the old layout's leases while a
// migration to shards shards copies.
func migrateHolder(shards int) string { return "onetick-shards-migrate:" + strconv.Itoa(shards) }

// migrateTTL is how long the migration's leases last without a renewal.
const migrateTTL = 30 * time.Second

// migrateBatch is how many jobs one round of reads and writes copies.
const migrateBatch = 1000

// ShardMove is one job whose keys change with the shard count.
type ShardMove struct {
	Job                  string
	From, To             int    // its shard under the stored and the new count
	FromPrefix, ToPrefix string // the views' key prefixes
	// What the old view holds for it (read in the plan too): a last-fired
	// slot, pause intervals.
	Last, Paused bool
}

// ShardMigration is a migration's plan, and with Applied what was done.
type ShardMigration struct {
	// From is the stored count (1 when the store records none), To the new.
	From, To int
	// Moves are the jobs whose keys change, by job name; Stayed counts the
	// jobs whose shard keeps its prefix (nothing to copy).
	Moves  []ShardMove
	Stayed int
	// Applied: the count was written (the commit point).
	Applied bool
}

// ShardsBusyError is a migration refused because the fleet is not
// stopped: a lease of the layout is held, or a replica is live.
type ShardsBusyError struct {
	What string // the lease or membership, with its key
	By   string // the holder or replica
	Left time.Duration
}

func (e *ShardsBusyError) Error() string {
	msg := fmt.Sprintf("%s is held by %q for another %s", e.What, e.By, e.Left.Round(time.Millisecond))
	if strings.HasPrefix(e.By, "onetick-shards-migrate:") {
		return msg + ": a migration was interrupted (or runs elsewhere); its lease expires by itself, then run the migration again"
	}
	return msg + ": the migration is offline; stop every replica of the fleet, then run it again"
}

// MigrateShards plans, and with apply performs, the change of the stored
// shard count to shards for jobs (the configuration's and the run-time
// ones). b is the store, not a view. A fleet that is not stopped is a
// *ShardsBusyError (with apply nothing is written; without, the plan is
// returned with it).
func (b *Backend) MigrateShards(ctx context.Context, jobs []string, shards int, apply bool) (*ShardMigration, error) {
	if b.view {
		return nil, errors.New("redis: MigrateShards of a shard's view: ask the store")
	}
	if err := onetick.CheckShard(0, shards); err != nil {
		return nil, err
	}
	raw, from, err := b.storedShards(ctx)
	if err != nil {
		return nil, err
	}
	m := &ShardMigration{From: from, To: shards}
	if from == shards {
		return m, nil
	}
	jobs = uniqueSorted(jobs)
	for _, j := range jobs {
		mv := ShardMove{Job: j, From: onetick.ShardOf(j, from), To: onetick.ShardOf(j, shards)}
		mv.FromPrefix = ShardPrefix(b.opts.Prefix, mv.From, from)
		mv.ToPrefix = ShardPrefix(b.opts.Prefix, mv.To, shards)
		if mv.FromPrefix == mv.ToPrefix {
			m.Stayed++
			continue
		}
		m.Moves = append(m.Moves, mv)
	}
	busy := b.migrationBusy(ctx, from)
	if busy != nil && !apply {
		var be *ShardsBusyError
		if !errors.As(busy, &be) {
			return nil, busy
		}
	}
	if !apply {
		if err := b.readMoves(ctx, m.Moves, nil); err != nil {
			return nil, err
		}
		return m, busy
	}
	if busy != nil {
		return nil, busy
	}
	held, err := b.holdOld(ctx, from, shards)
	if err != nil {
		return nil, err
	}
	defer held.release(context.WithoutCancel(ctx))
	if err := b.readMoves(ctx, m.Moves, func(batch []ShardMove, st []movedState) error {
		if err := held.renew(ctx); err != nil {
			return err
		}
		return b.writeMoves(ctx, batch, st)
	}); err != nil {
		return nil, err
	}
	if err := held.renew(ctx); err != nil {
		return nil, err
	}
	if err := b.commitShards(ctx, raw, from, shards); err != nil {
		return nil, err
	}
	if from == 1 {
		held.leases = nil // the one-shard lease is the tombstone now
	}
	m.Applied = true
	return m, nil
}

// storedShards reads the stored count: raw "" and 1 when none.
func (b *Backend) storedShards(ctx context.Context) (raw string, n int, err error) {
	raw, err = b.c.Get(ctx, b.layoutKey()).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return "", 1, nil
	case err != nil:
		return "", 0, fmt.Errorf("redis: shard layout on %s: %w", b.layoutKey(), err)
	}
	n, perr := strconv.Atoi(raw)
	if perr != nil || n < 1 || n > onetick.MaxShards {
		return "", 0, fmt.Errorf("redis: %s holds %q, not a shard count (1 to %d): repair it by hand", b.layoutKey(), short(raw), onetick.MaxShards)
	}
	return raw, n, nil
}

// migrationBusy says whether the fleet runs: a live member, the one-shard
// lease held by another than the layout's tombstone, or a lease of one of
// the stored layout's shards held.
func (b *Backend) migrationBusy(ctx context.Context, from int) error {
	now, err := b.c.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("redis: time: %w", err)
	}
	live, err := b.c.ZRangeByScoreWithScores(ctx, b.membersKey(), &goredis.ZRangeBy{
		Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil && !isWrongType(err) {
		return fmt.Errorf("redis: members on %s: %w", b.membersKey(), err)
	}
	if len(live) > 0 {
		by, _ := live[0].Member.(string)
		left := time.Duration(int64(live[0].Score)-now.UnixMilli()) * time.Millisecond
		return &ShardsBusyError{What: "the fleet's membership (" + b.membersKey() + ", a live replica)", By: by, Left: left}
	}
	one, err := b.Leader(ctx)
	if err != nil {
		return fmt.Errorf("redis: the one-shard lease %s: %w", b.leader, err)
	}
	if one.Held && (from == 1 || one.Lease.Holder != onetick.LayoutHolder(from)) {
		return &ShardsBusyError{What: "the one-shard lease (" + b.leader + ")", By: one.Lease.Holder, Left: one.TTL}
	}
	if from == 1 {
		return nil
	}
	for n := range from {
		v := b.shardView(n, from)
		li, err := v.Leader(ctx)
		if err != nil {
			return fmt.Errorf("redis: shard %d of %d's lease %s: %w", n, from, v.leader, err)
		}
		if li.Held {
			return &ShardsBusyError{What: fmt.Sprintf("shard %d of %d's lease (%s)", n, from, v.leader), By: li.Lease.Holder, Left: li.TTL}
		}
	}
	return nil
}

// shardView is shard n of shards as a *Backend (b itself with one).
func (b *Backend) shardView(n, shards int) *Backend {
	v, err := b.Shard(n, shards)
	if err != nil {
		panic("redis: shardView: " + err.Error()) // n and shards are checked
	}
	return v.(*Backend)
}

// heldLeases are the old layout's leases the migration holds.
type heldLeases struct {
	views  []*Backend
	leases []onetick.Lease
}

// holdOld acquires every lease of the stored layout of from shards for
// migrateHolder(to); a lease held meanwhile is a *ShardsBusyError (those
// acquired are released).
func (b *Backend) holdOld(ctx context.Context, from, to int) (*heldLeases, error) {
	h := &heldLeases{}
	for n := range from {
		v := b.shardView(n, from)
		g, err := v.Acquire(ctx, migrateHolder(to), migrateTTL)
		if err != nil {
			h.release(context.WithoutCancel(ctx))
			var he *onetick.HeldError
			if errors.As(err, &he) {
				return nil, &ShardsBusyError{What: fmt.Sprintf("shard %d of %d's lease (%s)", n, from, v.leader),
					By: he.Leader.Lease.Holder, Left: he.Leader.TTL}
			}
			return nil, fmt.Errorf("redis: holding shard %d of %d's lease %s for the migration: %w", n, from, v.leader, err)
		}
		h.views = append(h.views, v)
		h.leases = append(h.leases, g.Lease)
	}
	return h, nil
}

// renew extends every held lease; a lost one ends the migration.
func (h *heldLeases) renew(ctx context.Context) error {
	for i, l := range h.leases {
		if _, err := h.views[i].Renew(ctx, l, migrateTTL); err != nil {
			return fmt.Errorf("redis: the migration's lease %s: %w (nothing was committed; run the migration again)", h.views[i].leader, err)
		}
	}
	return nil
}

// release gives the held leases back (best effort: they expire anyway).
func (h *heldLeases) release(ctx context.Context) {
	for i, l := range h.leases {
		_ = h.views[i].Release(ctx, l)
	}
	h.leases = nil
}

// movedState is what an old view holds for a moved job: "" for absent.
type movedState struct{ last, paused, control string }

// readMoves reads the old views' state of moves in batches (Last and
// Paused set on each move) and gives each batch to write, if not nil.
func (b *Backend) readMoves(ctx context.Context, moves []ShardMove, write func([]ShardMove, []movedState) error) error {
	for i := 0; i < len(moves); i += migrateBatch {
		batch := moves[i:min(i+migrateBatch, len(moves))]
		st := make([]movedState, len(batch))
		pipe := b.c.Pipeline()
		cmds := make([][3]*goredis.StringCmd, len(batch))
		for k, mv := range batch {
			p := mv.FromPrefix
			cmds[k] = [3]*goredis.StringCmd{pipe.HGet(ctx, p+":last", mv.Job), pipe.HGet(ctx, p+":paused", mv.Job), pipe.HGet(ctx, p+":control", mv.Job)}
		}
		_, _ = pipe.Exec(ctx)
		for k := range batch {
			vals := [3]string{}
			for f, c := range cmds[k] {
				v, err := c.Result()
				if err != nil && !errors.Is(err, goredis.Nil) {
					return fmt.Errorf("redis: reading job %s's state in %s: %w", batch[k].Job, batch[k].FromPrefix, err)
				}
				vals[f] = v
			}
			st[k] = movedState{last: vals[0], paused: vals[1], control: vals[2]}
			batch[k].Last, batch[k].Paused = st[k].last != "", st[k].paused != ""
		}
		if write != nil {
			if err := write(batch, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeMoves makes each moved job's fields in its new view equal to st,
// and bumps the controls' version of every new view whose controls it
// wrote. Each command touches one view's key: one slot on a Cluster.
func (b *Backend) writeMoves(ctx context.Context, batch []ShardMove, st []movedState) error {
	pipe := b.c.Pipeline()
	bumped := map[string]bool{}
	set := func(key, job, v string) {
		if v == "" {
			pipe.HDel(ctx, key, job)
		} else {
			pipe.HSet(ctx, key, job, v)
		}
	}
	for k, mv := range batch {
		p := mv.ToPrefix
		set(p+":last", mv.Job, st[k].last)
		set(p+":paused", mv.Job, st[k].paused)
		set(p+":control", mv.Job, st[k].control)
		bumped[p] = true
	}
	prefixes := make([]string, 0, len(bumped))
	for p := range bumped {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	for _, p := range prefixes {
		pipe.Incr(ctx, p+":controls:version")
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		for _, c := range cmds {
			if c.Err() != nil {
				return fmt.Errorf("redis: writing the migrated state (%s): %w", strings.Join(cmdKeys(c), " "), c.Err())
			}
		}
		return fmt.Errorf("redis: writing the migrated state: %w", err)
	}
	return nil
}

func cmdKeys(c goredis.Cmder) []string {
	var out []string
	for _, a := range c.Args() {
		if s, ok := a.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// commitScript: KEYS shards, leader; ARGV the count read ("" for none),
// the new count, the tombstone's value and PX ("" to remove a tombstone),
// the value the one-shard lease may hold to be removed. 1: committed; 0:
// the count changed meanwhile.
var commitScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
elseif redis.call('GET', KEYS[2]) == ARGV[5] then
  redis.call('DEL', KEYS[2])
end
return 1
`)

// commitShards writes the new count and the one-shard lease's tombstone
// (the commit point).
func (b *Backend) commitShards(ctx context.Context, raw string, from, to int) error {
	tomb, px := "", int64(0)
	if to > 1 {
		tomb, px = onetick.Lease{Holder: onetick.LayoutHolder(to)}.Token(), onetick.LayoutHold.Milliseconds()
	}
	old := onetick.Lease{Holder: onetick.LayoutHolder(from)}.Token()
	ok, err := commitScript.Run(ctx, b.c, []string{b.layoutKey(), b.leader}, raw, to, tomb, px, old).Int()
	if err != nil {
		return fmt.Errorf("redis: writing the shard count to %s: %w (nothing was committed; run the migration again)", b.layoutKey(), err)
	}
	if ok != 1 {
		return fmt.Errorf("redis: %s changed during the migration: nothing was committed; run the migration again", b.layoutKey())
	}
	return nil
}

func uniqueSorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	k := 0
	for i, s := range out {
		if i == 0 || s != out[k-1] {
			out[k] = s
			k++
		}
	}
	return out[:k]
}
