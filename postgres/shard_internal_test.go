package postgres

import "testing"

// A view's Watch matches the lease channel's payloads of its own shard
// only; the store is shard 0.
func TestLeasePayloadPerShard(t *testing.T) {
	b := &Backend{shards: 1}
	v1 := &Backend{shard: 1, shards: 4, root: b}
	v2 := &Backend{shard: 2, shards: 4, root: b}
	for _, c := range []struct {
		who     *Backend
		payload string
		want    bool
	}{
		{v1, v1.leasePayload("released"), true},
		{v1, v1.leasePayload("acquired"), true},
		{v1, v2.leasePayload("released"), false},
		{v1, b.leasePayload("released"), false},
		{b, b.leasePayload("released"), true},
		{b, v1.leasePayload("acquired"), false},
		{v2, "released", false},
	} {
		if got := c.who.myLease(c.payload); got != c.want {
			t.Errorf("shard %d, payload %q: %v, want %v", c.who.shard, c.payload, got, c.want)
		}
	}
	if b.acquireLock() == v1.acquireLock() || v1.acquireLock() == v2.acquireLock() {
		t.Errorf("acquire locks shared: %q %q %q", b.acquireLock(), v1.acquireLock(), v2.acquireLock())
	}
}
