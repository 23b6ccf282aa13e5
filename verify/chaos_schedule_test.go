//go:build verify && chaos

package verify

import (
	"fmt"
	"testing"
)

// TestChaosScheduleReproducible: a seed draws the same schedule (fault
// kinds and their values, gaps), another seed another one, and each
// store its own from the run's seed.
func TestChaosScheduleReproducible(t *testing.T) {
	draw := func(seed int64, c *chaosRun) string {
		s := newSchedule(seed, c)
		out := ""
		for i := 0; i < 200; i++ {
			k, u := s.fault()
			out += fmt.Sprintf("%s %v %v\n", k, u, s.gap())
		}
		return out
	}
	redis := &chaosRun{target: "127.0.0.1:1", storeKill: func() {}}
	if a, b := draw(42, redis), draw(42, redis); a != b {
		t.Fatal("seed 42 drew two different schedules")
	}
	if draw(42, redis) == draw(43, redis) {
		t.Fatal("seeds 42 and 43 drew the same schedule")
	}
	if storeSeed(42, "redis") == storeSeed(42, "postgres") {
		t.Fatal("two stores share a nemesis seed")
	}
	// A store without a proxy or a store process never draws those faults.
	file := &chaosRun{}
	s := newSchedule(42, file)
	for i := 0; i < 1000; i++ {
		switch k, _ := s.fault(); k {
		case "partition", "latency", "store-kill", "failover":
			t.Fatalf("the file store drew %s", k)
		}
	}
}
