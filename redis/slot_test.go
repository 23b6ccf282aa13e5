package redis_test

import (
	"testing"

	"github.com/onetick/onetick/redis"
)

// The slots of keys as a real Redis Cluster computes them (CLUSTER
// KEYSLOT on redis-server 7.0.15), checked against Slot.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363,
		"foo{{bar}}zap":        4015,
		"foo{bar}{zap}":        5061,
		"onetick":              4617,
	} {
		if got := redis.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if redis.HashTagged("onetick") != "{onetick}" || redis.HashTagged("{a}:x") != "{a}:x" || redis.HashTagged("a{}") != "{a{}}" {
		t.Error("HashTagged")
	}
	if redis.Slot("{onetick}:leader") != redis.Slot("{onetick}:stream:billing") {
		t.Error("keys with one hash tag must share a slot")
	}
}
