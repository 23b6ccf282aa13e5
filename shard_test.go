package onetick_test

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/onetick/onetick"
)

// shardVectors pin ShardOf: the job's shard is part of the stored layout
// (docs/shards.md), so a change of the function must fail here. The
// figures came from the paper's C++ code (Lamping and Veach, "A Fast,
// Minimal Memory, Consistent Hash Algorithm", 2014) over FNV-1a 64,
// compiled with g++ on amd64, for shards 1, 2, 3, 4, 6, 8, 16, 64 and 256.
var shardVectors = []struct {
	job    string
	fnv    uint64
	shards []int
}{
	{"", 0xcbf29ce484222325, []int{0, 1, 1, 1, 1, 1, 13, 17, 90}},
	{"a", 0xaf63dc4c8601ec8c, []int{0, 1, 2, 2, 2, 2, 12, 31, 163}},
	{"nightly", 0x7e308d7680db5f8a, []int{0, 1, 1, 1, 5, 5, 12, 62, 80}},
	{"report-daily", 0xfeb16ed62042c137, []int{0, 0, 0, 3, 3, 3, 14, 14, 184}},
	{"billing:invoice-42", 0x533ea06d5d6fd2e6, []int{0, 0, 2, 2, 5, 5, 8, 35, 89}},
	{"héllo", 0xa35ff71f960240e0, []int{0, 1, 1, 3, 4, 4, 4, 52, 244}},
	{"job-0", 0xf2c2e9802008f6a9, []int{0, 0, 0, 3, 3, 3, 3, 3, 117}},
	{"job-1", 0xf2c2e8802008f4f6, []int{0, 0, 0, 0, 0, 7, 8, 8, 143}},
	{"job-999999", 0x305e179b5fc085f9, []int{0, 0, 0, 0, 0, 0, 13, 48, 196}},
}

var vectorShards = []int{1, 2, 3, 4, 6, 8, 16, 64, 256}

func TestShardOfVectors(t *testing.T) {
	for _, v := range shardVectors {
		h := fnv.New64a()
		h.Write([]byte(v.job))
		if got := h.Sum64(); got != v.fnv {
			t.Fatalf("the vector of %q: FNV-1a 64 is %#x, the table says %#x", v.job, got, v.fnv)
		}
		for i, n := range vectorShards {
			if got := onetick.ShardOf(v.job, n); got != v.shards[i] {
				t.Errorf("ShardOf(%q, %d) = %d, want %d (the stored layout changed)", v.job, n, got, v.shards[i])
			}
		}
	}
}

func TestShardOfFewShards(t *testing.T) {
	for _, n := range []int{-1, 0, 1} {
		if got := onetick.ShardOf("nightly", n); got != 0 {
			t.Errorf("ShardOf(nightly, %d) = %d, want 0", n, got)
		}
	}
}

// TestShardOfGrowth checks the consistent hash's promise, which makes a
// change of the number of shards cheap: from n to n+1 shards a job keeps
// its shard or moves to the new one, n; and every shard gets jobs.
func TestShardOfGrowth(t *testing.T) {
	const jobs = 20000
	for n := 1; n < onetick.MaxShards; n++ {
		moved := 0
		for i := 0; i < jobs; i += 7 {
			job := fmt.Sprintf("job-%d", i)
			a, b := onetick.ShardOf(job, n), onetick.ShardOf(job, n+1)
			if a < 0 || a >= n || b < 0 || b > n {
				t.Fatalf("ShardOf(%s) = %d of %d, %d of %d: out of range", job, a, n, b, n+1)
			}
			if a != b {
				if b != n {
					t.Fatalf("%s moved from shard %d to %d going from %d to %d shards: only moves to the new shard are allowed", job, a, b, n, n+1)
				}
				moved++
			}
		}
		if moved == 0 {
			t.Fatalf("no job moved to the new shard going from %d to %d shards", n, n+1)
		}
	}
}

// TestShardOfSpread: 16 shards over 16,000 jobs, each within 20 % of
// the mean (a loose bound: it fails only a badly broken hash).
func TestShardOfSpread(t *testing.T) {
	const n, jobs = 16, 16000
	count := make([]int, n)
	for i := 0; i < jobs; i++ {
		count[onetick.ShardOf(fmt.Sprintf("tenant-%d/report", i), n)]++
	}
	for s, c := range count {
		if c < jobs/n*8/10 || c > jobs/n*12/10 {
			t.Errorf("shard %d has %d jobs of %d (mean %d)", s, c, jobs, jobs/n)
		}
	}
}

func TestFairShare(t *testing.T) {
	for _, c := range []struct{ shards, live, want int }{
		{1, 1, 1}, {1, 3, 1}, {4, 1, 4}, {4, 2, 2}, {4, 3, 2}, {6, 3, 2},
		{7, 3, 3}, {256, 3, 86}, {3, 5, 1}, {5, 0, 5}, {5, -2, 5}, {0, 3, 0},
	} {
		if got := onetick.FairShare(c.shards, c.live); got != c.want {
			t.Errorf("FairShare(%d, %d) = %d, want %d", c.shards, c.live, got, c.want)
		}
	}
}

func TestCheckShard(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {0, 2}, {255, onetick.MaxShards}} {
		if err := onetick.CheckShard(c[0], c[1]); err != nil {
			t.Errorf("CheckShard(%d, %d): %v", c[0], c[1], err)
		}
	}
	for c, want := range map[[2]int]string{
		{0, 0}:                     "0 shards: want 1 to 256",
		{0, onetick.MaxShards + 1}: "257 shards: want 1 to 256",
		{-1, 3}:                    "shard -1 of 3: want 0 to 2",
		{3, 3}:                     "shard 3 of 3: want 0 to 2",
	} {
		if err := onetick.CheckShard(c[0], c[1]); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckShard(%d, %d) = %v, want %q", c[0], c[1], err, want)
		}
	}
}
