package onetick

import (
	"reflect"
	"testing"
)

// Relays of the shards merge by kind and queue: their jobs sorted, one
// backlog (the queue is shared: the largest reading, unknown only when no
// shard's is known), the first error kept.
func TestMergeRelays(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	got := mergeRelays([][]RelayStatus{
		{{Kind: RelayAsynq, Queue: "q", Jobs: []string{"b"}, Backlog: n(2)}, {Kind: RelayRiver, Queue: "q", Jobs: []string{"x"}, Backlog: n(1)}},
		{{Kind: RelayAsynq, Queue: "q", Jobs: []string{"a"}, Backlog: n(3)}, {Kind: RelayRiver, Queue: "q", Jobs: []string{"y"}, Error: "down"}},
		{{Kind: RelayAsynq, Queue: "other", Jobs: []string{"c"}}},
	})
	want := []RelayStatus{
		{Kind: RelayAsynq, Queue: "other", Jobs: []string{"c"}},
		{Kind: RelayAsynq, Queue: "q", Jobs: []string{"a", "b"}, Backlog: n(3)},
		{Kind: RelayRiver, Queue: "q", Jobs: []string{"x", "y"}, Backlog: n(1), Error: "down"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged %+v, want %+v", got, want)
	}
}
