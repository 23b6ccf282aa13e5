package onetick_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

var planNow = time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC)

// held is a lease of shard s to holder, valid for another 10s.
func held(s int, holder string) onetick.ShardLease {
	return onetick.ShardLease{Shard: s, Holder: holder, Expires: planNow.Add(10 * time.Second)}
}

// expired is a lease of shard s to holder that expired a second ago.
func expired(s int, holder string) onetick.ShardLease {
	return onetick.ShardLease{Shard: s, Holder: holder, Expires: planNow.Add(-time.Second)}
}

func TestPlanShards(t *testing.T) {
	for _, c := range []struct {
		name          string
		shards        int
		me            string
		mine          []int
		leases        []onetick.ShardLease
		live          []string
		take, release []int
	}{
		{name: "one shard, alone: take it", shards: 1, me: "a", take: []int{0}},
		{name: "one shard, held by another", shards: 1, me: "b", live: []string{"a", "b"},
			leases: []onetick.ShardLease{held(0, "a")}},
		{name: "one shard, its holder died", shards: 1, me: "b", live: []string{"b"},
			leases: []onetick.ShardLease{expired(0, "a")}, take: []int{0}},
		{name: "one shard, mine: keep it", shards: 1, me: "a", mine: []int{0}, live: []string{"a", "b"},
			leases: []onetick.ShardLease{held(0, "a")}},
		{name: "first of a fleet: take all", shards: 4, me: "a", take: []int{0, 1, 2, 3}},
		{name: "not yet in the live list: counts itself", shards: 4, me: "b", live: []string{"a"},
			take: []int{1, 3}},
		{name: "cold start of two: first deal", shards: 4, me: "a", live: []string{"a", "b"}, take: []int{0, 2}},
		{name: "cold start of two: second deal", shards: 4, me: "b", live: []string{"a", "b"}, take: []int{1, 3}},
		{name: "a joins b who leads all: nothing free yet", shards: 4, me: "a", live: []string{"a", "b"},
			leases: []onetick.ShardLease{held(0, "b"), held(1, "b"), held(2, "b"), held(3, "b")}},
		{name: "b sees a join: releases its highest", shards: 4, me: "b", mine: []int{0, 1, 2, 3}, live: []string{"a", "b"},
			leases: []onetick.ShardLease{held(0, "b"), held(1, "b"), held(2, "b"), held(3, "b")}, release: []int{3}},
		{name: "a takes the released shard", shards: 4, me: "a", live: []string{"a", "b"},
			leases: []onetick.ShardLease{held(0, "b"), held(1, "b"), held(2, "b")}, take: []int{3}},
		{name: "balanced: nothing to do", shards: 4, me: "a", mine: []int{2, 3}, live: []string{"a", "b"},
			leases: []onetick.ShardLease{held(0, "b"), held(1, "b"), held(2, "a"), held(3, "a")}},
		{name: "uneven: 4 on 3, the one with most keeps the extra", shards: 4, me: "a", mine: []int{0, 1}, live: []string{"a", "b", "c"},
			leases: []onetick.ShardLease{held(0, "a"), held(1, "a"), held(2, "b"), held(3, "b")}},
		{name: "uneven: 4 on 3, the tie's second releases", shards: 4, me: "b", mine: []int{2, 3}, live: []string{"a", "b", "c"},
			leases: []onetick.ShardLease{held(0, "a"), held(1, "a"), held(2, "b"), held(3, "b")}, release: []int{3}},
		{name: "uneven: 4 on 3, the joiner takes what was released", shards: 4, me: "c", live: []string{"a", "b", "c"},
			leases: []onetick.ShardLease{held(0, "a"), held(1, "a"), held(2, "b")}, take: []int{3}},
		{name: "over share by many: still one at a time", shards: 6, me: "a", mine: []int{0, 1, 2, 3, 4, 5}, live: []string{"a", "b", "c"},
			leases: []onetick.ShardLease{held(0, "a"), held(1, "a"), held(2, "a"), held(3, "a"), held(4, "a"), held(5, "a")}, release: []int{5}},
		{name: "a death: survivors split its shards", shards: 6, me: "b", mine: []int{2, 3}, live: []string{"b", "c"},
			leases: []onetick.ShardLease{expired(0, "a"), expired(1, "a"), held(2, "b"), held(3, "b"), held(4, "c"), held(5, "c")}, take: []int{0}},
		{name: "a death: the other survivor's deal", shards: 6, me: "c", mine: []int{4, 5}, live: []string{"b", "c"},
			leases: []onetick.ShardLease{expired(0, "a"), expired(1, "a"), held(2, "b"), held(3, "b"), held(4, "c"), held(5, "c")}, take: []int{1}},
		{name: "a holder gone from the live list keeps its lease until it expires", shards: 2, me: "b", live: []string{"b"},
			leases: []onetick.ShardLease{held(0, "a")}, take: []int{1}},
		{name: "a lease expiring exactly now is free", shards: 1, me: "b", live: []string{"b"},
			leases: []onetick.ShardLease{{Shard: 0, Holder: "a", Expires: planNow}}, take: []int{0}},
		{name: "a shard just acquired, missing from the snapshot, is not taken again", shards: 2, me: "a", mine: []int{0}, live: []string{"a"},
			take: []int{1}},
		{name: "leases out of range are ignored", shards: 2, me: "a", live: []string{"a"},
			leases: []onetick.ShardLease{held(7, "b"), held(-1, "b")}, take: []int{0, 1}},
		{name: "more replicas than shards: the spare ones wait", shards: 2, me: "c", live: []string{"a", "b", "c"},
			leases: []onetick.ShardLease{held(0, "a"), held(1, "b")}},
		{name: "no shards", shards: 0, me: "a"},
		{name: "no name", shards: 3, me: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			take, release := onetick.PlanShards(c.mine, c.leases, c.live, c.me, c.shards, planNow)
			if !slices.Equal(take, c.take) || !slices.Equal(release, c.release) {
				t.Errorf("take %v release %v, want take %v release %v", take, release, c.take, c.release)
			}
		})
	}
}

// world is a store's shard leases and each replica's own shards, kept
// consistent: a replica's mine is what the snapshot says it holds.
type world struct {
	shards int
	leases []onetick.ShardLease // by shard; Holder "" when free
	live   []string
}

func (w *world) mine(r string) []int {
	var out []int
	for _, l := range w.leases {
		if l.Holder == r && planNow.Before(l.Expires) {
			out = append(out, l.Shard)
		}
	}
	return out
}

// randomWorld: up to 64 shards, up to 8 live replicas; each shard free,
// expired, held by a live replica or held by one that is no longer live.
func randomWorld(rng *rand.Rand) *world {
	w := &world{shards: 1 + rng.IntN(64)}
	n := 1 + rng.IntN(8)
	for i := 0; i < n; i++ {
		w.live = append(w.live, fmt.Sprintf("r%d", i))
	}
	for s := 0; s < w.shards; s++ {
		switch rng.IntN(4) {
		case 0:
			w.leases = append(w.leases, onetick.ShardLease{Shard: s})
		case 1:
			w.leases = append(w.leases, expired(s, w.live[rng.IntN(n)]))
		case 2:
			w.leases = append(w.leases, held(s, w.live[rng.IntN(n)]))
		default:
			w.leases = append(w.leases, held(s, "gone"))
		}
	}
	return w
}

// TestPlanShardsNeverBothWant: from one snapshot, no two replicas want
// one shard, nobody wants a shard someone holds, a replica releases only
// its own, one at a time, and never plans past its fair share.
func TestPlanShardsNeverBothWant(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	for round := 0; round < 5000; round++ {
		w := randomWorld(rng)
		wanted := map[int]string{}
		share := onetick.FairShare(w.shards, len(w.live))
		for _, r := range w.live {
			mine := w.mine(r)
			take, release := onetick.PlanShards(mine, w.leases, w.live, r, w.shards, planNow)
			if len(release) > 1 || len(release) > 0 && len(take) > 0 {
				t.Fatalf("round %d: %s plans take %v and release %v: at most one release, and not with a take", round, r, take, release)
			}
			for _, s := range release {
				if !slices.Contains(mine, s) {
					t.Fatalf("round %d: %s releases shard %d, which it does not lead (%v)", round, r, s, mine)
				}
			}
			for _, s := range take {
				if l := w.leases[s]; l.Holder != "" && planNow.Before(l.Expires) {
					t.Fatalf("round %d: %s wants shard %d, held by %s", round, r, s, l.Holder)
				}
				if o, ok := wanted[s]; ok {
					t.Fatalf("round %d: %s and %s both want shard %d", round, o, r, s)
				}
				wanted[s] = r
			}
			if n := len(mine) - len(release) + len(take); len(take) > 0 && n > share {
				t.Fatalf("round %d: %s would lead %d shards, past its fair share %d of %d on %d", round, r, n, share, w.shards, len(w.live))
			}
		}
	}
}

// step runs one balancing round: each live replica plans from the same
// snapshot, then releases and acquisitions are applied (an acquisition
// only of a free shard, as the store's Acquire would).
func (w *world) step() (changed bool) {
	type plan struct {
		r             string
		take, release []int
	}
	var ps []plan
	for _, r := range w.live {
		take, release := onetick.PlanShards(w.mine(r), w.leases, w.live, r, w.shards, planNow)
		ps = append(ps, plan{r, take, release})
	}
	for _, p := range ps {
		for _, s := range p.release {
			w.leases[s] = onetick.ShardLease{Shard: s}
			changed = true
		}
	}
	for _, p := range ps {
		for _, s := range p.take {
			if l := w.leases[s]; l.Holder != "" && planNow.Before(l.Expires) {
				continue // refused by the store
			}
			w.leases[s] = held(s, p.r)
			changed = true
		}
	}
	return changed
}

// balanced reports whether every shard is led by a live replica and each
// leads floor or ceil of shards/live.
func (w *world) balanced() bool {
	share := onetick.FairShare(w.shards, len(w.live))
	lo := w.shards / len(w.live)
	for _, r := range w.live {
		if n := len(w.mine(r)); n < lo || n > share {
			return false
		}
	}
	for _, l := range w.leases {
		if !slices.Contains(w.live, l.Holder) || !planNow.Before(l.Expires) {
			return false
		}
	}
	return true
}

// TestPlanShardsConverges: from random states, through joins and deaths,
// the fleet reaches a balanced assignment and stays there, within
// shards+2 rounds of each change (a release and a take per round for
// each replica over its target).
func TestPlanShardsConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2))
	settle := func(w *world, what string) {
		t.Helper()
		for i := 0; ; i++ {
			if !w.step() {
				break
			}
			if i > w.shards+2 {
				t.Fatalf("%s: %d shards on %v did not settle in %d rounds: %v", what, w.shards, w.live, i, w.leases)
			}
		}
		if !w.balanced() {
			t.Fatalf("%s: settled unbalanced: %d shards on %v: %v", what, w.shards, w.live, w.leases)
		}
	}
	next := 100
	for round := 0; round < 500; round++ {
		w := randomWorld(rng)
		// Leases of replicas that are gone expire, as they would.
		for s, l := range w.leases {
			if l.Holder == "gone" {
				w.leases[s] = expired(s, "gone")
			}
		}
		settle(w, "random start")
		for ev := 0; ev < 6; ev++ {
			if rng.IntN(2) == 0 || len(w.live) == 1 {
				next++
				w.live = append(w.live, fmt.Sprintf("r%d", next))
				settle(w, "join")
				continue
			}
			i := rng.IntN(len(w.live))
			dead := w.live[i]
			w.live = slices.Delete(w.live, i, i+1)
			for s, l := range w.leases {
				if l.Holder == dead {
					w.leases[s] = expired(s, dead)
				}
			}
			settle(w, "death of "+dead)
		}
	}
}
