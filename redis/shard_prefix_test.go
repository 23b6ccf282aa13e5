package redis_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/redis"
)

// The prefixes of docs/shards.md (decision 4, "Cluster slots").
func TestShardPrefixVectors(t *testing.T) {
	for _, v := range []struct {
		prefix    string
		n, shards int
		want      string
		slot      int // of the hash tag, -1 without one
	}{
		{"onetick", 0, 1, "onetick", -1},
		{"{onetick}", 0, 1, "{onetick}", -1},
		{"onetick", 0, 3, "onetick:00", -1},
		{"onetick", 2, 3, "onetick:02", -1},
		{"onetick", 7, 8, "onetick:07", -1},
		{"onetick", 123, 256, "onetick:123", -1},
		{"a{}", 1, 2, "a{}:01", -1},
		{"{onetick}", 0, 3, "{onetick:00}", 206},
		{"{onetick}", 1, 3, "{onetick:01.1}", 6065},
		{"{onetick}", 2, 3, "{onetick:02.2}", 16002},
		{"app:{onetick}:x", 1, 3, "app:{onetick:01.1}:x", 6065},
	} {
		got := redis.ShardPrefix(v.prefix, v.n, v.shards)
		if got != v.want {
			t.Errorf("ShardPrefix(%q, %d, %d) = %q, want %q", v.prefix, v.n, v.shards, got, v.want)
		}
		if v.slot >= 0 {
			if s := redis.Slot(got + ":leader"); s != v.slot {
				t.Errorf("slot of %q = %d, want %d", got, s, v.slot)
			}
		}
	}
}

// TestShardPrefixSpread: for every shard count up to onetick.MaxShards,
// shard n's tag lands in the n-th of shards equal slot ranges (so each
// range holds exactly its shard), found after a bounded number of tries;
// on the slot split redis-cli gives three primaries, each primary holds
// shards/3 of them when 3 divides shards, else within one of
// floor(shards/3) or ceil(shards/3).
func TestShardPrefixSpread(t *testing.T) {
	maxK, kOf := 0, map[int]int{}
	for shards := 2; shards <= onetick.MaxShards; shards++ {
		perRange := make([]int, shards)
		seen := map[string]bool{}
		for n := range shards {
			p := redis.ShardPrefix("{onetick}", n, shards)
			if seen[p] {
				t.Fatalf("%d shards: prefix %q twice", shards, p)
			}
			seen[p] = true
			s := redis.Slot(p + ":last")
			if s != redis.Slot(p+":stream:x") {
				t.Fatalf("%q: its keys do not share a slot", p)
			}
			r := rangeOf(s, shards)
			if r != n {
				t.Fatalf("%d shards: shard %d (%q, slot %d) is in range %d", shards, n, p, s, r)
			}
			perRange[r]++
			kOf[shards] = max(kOf[shards], suffixK(t, p))
		}
		maxK = max(maxK, kOf[shards])
		for r, c := range perRange {
			if c != 1 {
				t.Fatalf("%d shards: range %d holds %d shards", shards, r, c)
			}
		}
		// Three primaries with redis-cli's split.
		var per [3]int
		for n := range shards {
			s := redis.Slot(redis.ShardPrefix("{onetick}", n, shards))
			switch {
			case s <= 5460:
				per[0]++
			case s <= 10922:
				per[1]++
			default:
				per[2]++
			}
		}
		for _, c := range per {
			// A range that straddles a primary's first slot may land on
			// either side; when 3 divides shards no range does.
			lo, hi := shards/3-1, (shards+2)/3+1
			if shards%3 == 0 {
				lo, hi = shards/3, shards/3
			}
			if c < lo || c > hi {
				t.Fatalf("%d shards over three primaries: %v", shards, per)
			}
		}
	}
	// The figures docs/shards.md quotes, and the bound ShardPrefix's
	// comment promises.
	if kOf[3] != 2 || kOf[6] != 4 || kOf[256] != 477 || maxK > 2000 {
		t.Fatalf("largest k: %d for 3 shards, %d for 6, %d for 256, %d over 2..%d; want 2, 4, 477, at most 2000",
			kOf[3], kOf[6], kOf[256], maxK, onetick.MaxShards)
	}
}

// rangeOf is the n with slot in [n·16384/shards, (n+1)·16384/shards).
func rangeOf(slot, shards int) int {
	for n := range shards {
		if slot >= n*16384/shards && slot < (n+1)*16384/shards {
			return n
		}
	}
	return -1
}

// suffixK is the k of a tag {t:NN.k}, 0 for {t:NN}.
func suffixK(t *testing.T, p string) int {
	tag := p[strings.IndexByte(p, '{')+1 : strings.IndexByte(p, '}')]
	i := strings.LastIndexByte(tag, '.')
	if i < 0 {
		return 0
	}
	k, err := strconv.Atoi(tag[i+1:])
	if err != nil || k < 1 {
		t.Fatalf("%q: suffix %q", p, tag[i+1:])
	}
	return k
}

func TestShardPrefixRefusesBadShards(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {-1, 3}, {3, 3}, {0, onetick.MaxShards + 1}} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "shard") {
					t.Errorf("ShardPrefix(_, %d, %d): recovered %v, want a panic naming the shard", c[0], c[1], r)
				}
			}()
			redis.ShardPrefix("onetick", c[0], c[1])
		}()
	}
}
