package onetick

// Shards (issue 23, docs/shards.md): jobs map to a fixed, configured
// number of shards, each with its own lease, epoch, last-fired state,
// records and default stream. This file holds the pure pieces the engine
// will use: which shard a job belongs to, and each replica's fair share.
// The engine does not use them yet; with one shard (the default) every job
// is in shard 0 and nothing changes.

import (
	"fmt"
	"hash/fnv"
)

// MaxShards is the largest number of shards a fleet may be configured
// with: enough for many Redis Cluster primaries, few enough that a
// replica can watch every shard's lease.
const MaxShards = 256

// ShardOf returns the shard, in [0, shards), that job belongs to: Jump
// Consistent Hash (Lamping and Veach, 2014) of the 64-bit FNV-1a hash of
// the job's name. Shards < 2 gives 0.
//
// The function is part of the stored layout: a job's last-fired slot,
// records and default stream live under its shard's keys, so a change of
// this function moves jobs between shards as a change of the number of
// shards does, and needs the same offline migration. The tests pin fixed
// vectors for that reason. Both halves are defined on bytes and integers
// (FNV-1a by its constants, the jump by 64-bit integer and IEEE-754
// double arithmetic with no fused operation), so the answer is the same
// on every platform and Go version.
//
// The jump hash is chosen over a modulo because changing the number of
// shards from n to m > n moves only the jobs that must move (about
// (m-n)/m of them, all to the new shards), where a modulo moves about
// all of them.
func ShardOf(job string, shards int) int {
	if shards < 2 {
		return 0
	}
	return jump(fnv1a64(job), shards)
}

// fnv1a64 is the 64-bit FNV-1a hash of s.
func fnv1a64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// jump is Jump Consistent Hash: the bucket in [0, n) of key.
func jump(key uint64, n int) int {
	var b, j int64 = -1, 0
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		// Explicit conversions: each operation rounds to float64, so no
		// platform fuses them.
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// FairShare is the most shards one replica leads when live replicas share
// shards: ceil(shards / live). A live count below 1 counts as 1 (the
// replica asking is alive).
func FairShare(shards, live int) int {
	if shards < 1 {
		return 0
	}
	if live < 1 {
		live = 1
	}
	return (shards + live - 1) / live
}

// CheckShard says what is wrong with shard n of shards, or nil: shards
// from 1 to MaxShards, n from 0 to shards-1. A store's Sharder.Shard
// returns it.
func CheckShard(n, shards int) error {
	if shards < 1 || shards > MaxShards {
		return fmt.Errorf("onetick: %d shards: want 1 to %d", shards, MaxShards)
	}
	if n < 0 || n >= shards {
		return fmt.Errorf("onetick: shard %d of %d: want 0 to %d", n, shards, shards-1)
	}
	return nil
}
