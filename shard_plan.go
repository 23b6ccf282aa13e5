package onetick

import (
	"cmp"
	"slices"
	"time"
)

// ShardLease is one shard's lease as a replica read it from the store.
// A shard with no ShardLease, an empty Holder, or an Expires not after
// the time of the plan is free.
type ShardLease struct {
	Shard   int
	Holder  string
	Expires time.Time // by the store's clock
}

// held reports whether l is held at now.
func (l ShardLease) held(now time.Time) bool { return l.Holder != "" && now.Before(l.Expires) }

// PlanShards is one balancing round of replica me (docs/shards.md,
// "Balancing"): which free shards to try to acquire (take) and which of
// its own shards to release, from a snapshot of the shards' leases, the
// live replicas (their membership in the store) and the shards it leads
// with trust (mine). now is the store's time as the replica estimates it.
//
// Every replica with the same snapshot computes the same targets: of the
// live replicas (me included), sorted by the number of shards they hold,
// most first, then by name, the first shards%live lead FairShare(shards,
// live) shards and the others one fewer, so that the targets add up to
// shards and a replica that already leads more keeps it (the fewest
// handovers). A replica over its target releases one shard, its highest
// numbered, and takes nothing; under it, it takes free shards, which are
// dealt in ascending order to the replicas with the largest remaining
// deficit (ties: by name). Hence two replicas planning from one snapshot
// never both want one shard; from different snapshots they may, and the
// store's lease (Acquire is atomic) decides, as it does today.
//
// A shard held by a replica that is not live (its membership lapsed, its
// lease not yet) is neither free nor counted: it becomes free when its
// lease expires. The plan is advice for liveness and balance; safety (one
// trusted leader per shard) rests on the lease and the claim's fencing,
// unchanged. take and release are ascending; release has at most one
// shard, and is empty when take is not.
func PlanShards(mine []int, leases []ShardLease, live []string, me string, shards int, now time.Time) (take, release []int) {
	if shards < 1 || me == "" {
		return nil, nil
	}
	// The snapshot: who holds each shard.
	holder := make([]string, shards)
	for _, l := range leases {
		if l.Shard >= 0 && l.Shard < shards && l.held(now) {
			holder[l.Shard] = l.Holder
		}
	}
	own := make([]bool, shards) // mine, by the replica's own account
	nMine := 0
	for _, s := range mine {
		if s >= 0 && s < shards && !own[s] {
			own[s] = true
			nMine++
		}
	}

	// The live replicas, me included, each with what it holds.
	type member struct {
		name         string
		held, target int
	}
	idx := make(map[string]int, len(live)+1)
	var ms []member
	for _, n := range append(slices.Clone(live), me) {
		if _, ok := idx[n]; !ok && n != "" {
			idx[n] = len(ms)
			ms = append(ms, member{name: n})
		}
	}
	for _, h := range holder {
		if i, ok := idx[h]; ok {
			ms[i].held++
		}
	}
	slices.SortFunc(ms, func(a, b member) int {
		return cmp.Or(cmp.Compare(b.held, a.held), cmp.Compare(a.name, b.name))
	})
	q, r := shards/len(ms), shards%len(ms)
	meAt := -1
	for i := range ms {
		ms[i].target = q
		if i < r {
			ms[i].target++
		}
		if ms[i].name == me {
			meAt = i
		}
	}
	// My own count is what I lead, or what the snapshot says, the larger:
	// a shard just acquired may be missing from an older snapshot.
	myHeld := max(nMine, ms[meAt].held)
	if myHeld > ms[meAt].target {
		if nMine == 0 {
			return nil, nil
		}
		for s := shards - 1; s >= 0; s-- {
			if own[s] {
				return nil, []int{s}
			}
		}
	}

	// Deal the free shards, ascending, to the largest remaining deficit.
	def := make([]int, len(ms))
	for i, m := range ms {
		def[i] = max(m.target-m.held, 0)
	}
	def[meAt] = max(ms[meAt].target-myHeld, 0)
	for s := 0; s < shards; s++ {
		if holder[s] != "" || own[s] {
			continue
		}
		best := -1
		for i := range ms {
			if def[i] > 0 && (best < 0 || def[i] > def[best] || def[i] == def[best] && ms[i].name < ms[best].name) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		def[best]--
		if best == meAt {
			take = append(take, s)
		}
	}
	return take, nil
}
