package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/onetick/onetick"
)

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag (the part between the first { and the next }, when not empty) or of
// the whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// HashTagged returns prefix with a hash tag: unchanged when it has one,
// else "{prefix}", so that every key under it lands in one cluster slot.
func HashTagged(prefix string) string {
	if i := strings.IndexByte(prefix, '{'); i >= 0 && strings.IndexByte(prefix[i+1:], '}') > 0 {
		return prefix
	}
	return "{" + prefix + "}"
}

// ShardPrefix returns the key prefix of shard n of shards under prefix
// (docs/shards.md, decision 4 and "Cluster slots"):
//
//   - shards = 1: prefix itself, today's keys;
//   - prefix without a hash tag: "prefix:NN" (n in decimal, two digits or
//     more);
//   - prefix with a hash tag {t}: the tag becomes {t:NN}, or {t:NN.k}
//     with the smallest k ≥ 1 that puts the tag's slot in the n-th of
//     shards equal slot ranges, [n·16384/shards, (n+1)·16384/shards).
//     With the slots split evenly over P primaries, each primary then
//     holds shards/P shards when P divides shards (else one more or
//     fewer where a range straddles two primaries), where plain {t:NN}
//     tags bunch up (for 3 shards, slots 206, 4335 and 8332: none on the
//     third of three primaries).
//
// The search takes k ≤ 477 tries for 256 shards and fewer than 2,000 for
// any count up to onetick.MaxShards (TestShardPrefixSpread): computed
// once per view, it costs microseconds. Arguments that
// onetick.CheckShard refuses panic, as an index out of range does: the
// callers (Backend.Shard) check first.
func ShardPrefix(prefix string, n, shards int) string {
	if err := onetick.CheckShard(n, shards); err != nil {
		panic("redis.ShardPrefix: " + err.Error())
	}
	if shards == 1 {
		return prefix
	}
	nn := fmt.Sprintf("%02d", n)
	i := strings.IndexByte(prefix, '{')
	j := -1
	if i >= 0 {
		j = strings.IndexByte(prefix[i+1:], '}')
	}
	if j <= 0 {
		return prefix + ":" + nn
	}
	head, tag, tail := prefix[:i+1], prefix[i+1:i+1+j], prefix[i+1+j:]
	lo, hi := n*slots/shards, (n+1)*slots/shards
	t := tag + ":" + nn
	for k := 1; ; k++ {
		if s := Slot("{" + t + "}"); s >= lo && s < hi {
			return head + t + tail
		}
		t = tag + ":" + nn + "." + strconv.Itoa(k)
	}
}

// slots is the number of Redis Cluster hash slots.
const slots = 16384
