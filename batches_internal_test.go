package onetick

import "testing"

// Batches may run concurrently, so one job's ticks (a catch-up run) must
// never be split between two of them.
func TestBatchesKeepAJobsTicksTogether(t *testing.T) {
	s := &Scheduler{cfg: Config{ClaimBatch: 3}}
	a, b, c := &jobState{}, &jobState{}, &jobState{}
	owners := []*jobState{a, a, b, b, b, b, c, c}
	ticks := make([]Tick, len(owners))
	for i := range ticks {
		ticks[i].Slot = Slot(i)
	}
	got := s.batches(ticks, owners)
	var sizes []int
	total := 0
	for _, c := range got {
		sizes = append(sizes, len(c.ticks))
		for i := range c.ticks {
			if c.ticks[i].Slot != Slot(total+i) || c.owners[i] != owners[total+i] {
				t.Fatalf("batch contents out of order: %+v", c)
			}
		}
		total += len(c.ticks)
		last := c.owners[len(c.owners)-1]
		if total < len(owners) && owners[total] == last {
			t.Fatalf("a job's ticks are split at %d: batch sizes %v", total, sizes)
		}
	}
	if total != len(ticks) || len(sizes) != 2 || sizes[0] != 6 || sizes[1] != 2 {
		t.Fatalf("batch sizes %v, want [6 2]", sizes)
	}
}
