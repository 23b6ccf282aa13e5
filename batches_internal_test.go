package onetick

import (
	"container/heap"
	"io"
	"log/slog"
	"testing"
	"time"
)

// everySecond fires at every whole second (a pointer, so that the
// scheduler's memo of slot computations applies to it).
type everySecond struct{}

func (*everySecond) Next(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }

// Batches may run concurrently, so one job's ticks (a catch-up run) must
// never be split between two of them.
func TestBatchesKeepAJobsTicksTogether(t *testing.T) {
	s := &Scheduler{cfg: Config{ClaimBatch: 3}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sch := &everySecond{}
	now := Slot(100_000)
	job := func(late int) *jobState {
		return &jobState{Job: &Job{Schedule: sch}, jobOpts: &jobOpts{prefer: PreferDuplicate, maxCatchup: 100}, cursor: now - Slot(late*1000)}
	}
	a, b, c := job(2), job(4), job(2)
	due := []*jobState{a, b, c}
	var got []*claimCall
	for pos := 0; pos < len(due); {
		call := &claimCall{}
		pos = s.planBatch(call, due, pos, s.cfg.ClaimBatch, now, log)
		got = append(got, call)
	}
	owners := []*jobState{a, a, b, b, b, b, c, c}
	var sizes []int
	total := 0
	for _, call := range got {
		sizes = append(sizes, len(call.ticks))
		for i := range call.ticks {
			o := owners[total+i]
			if call.owners[i] != o {
				t.Fatalf("batch owners out of order: %+v", call)
			}
			if i > 0 && call.owners[i-1] == o && call.ticks[i].Slot <= call.ticks[i-1].Slot {
				t.Fatalf("a job's slots out of order: %+v", call.ticks)
			}
		}
		total += len(call.ticks)
		last := call.owners[len(call.owners)-1]
		if total < len(owners) && owners[total] == last {
			t.Fatalf("a job's ticks are split at %d: batch sizes %v", total, sizes)
		}
	}
	if total != len(owners) || len(sizes) != 2 || sizes[0] != 6 || sizes[1] != 2 {
		t.Fatalf("batch sizes %v, want [6 2]", sizes)
	}
	// The memo shared the plan of a and c (same schedule, same cursor)
	// without mixing it with b's.
	if got[1].ticks[0].Slot != now-1000 || got[0].ticks[2].Slot != now-3000 {
		t.Fatalf("slots %v / %v", got[0].ticks, got[1].ticks)
	}
}

// popDue and pushBack keep the heap a heap, whether few or many jobs are
// due, and take exactly the due ones.
func TestDueSet(t *testing.T) {
	for _, n := range []int{10, 1000, 5000} {
		for _, dueEvery := range []int{1, 2, 7, n + 1} {
			h := make(jobHeap, 0, n)
			for i := range n {
				next := Slot(1000 + i%50)
				if i%dueEvery == 0 {
					next = Slot(i % 10)
				}
				h = append(h, &jobState{next: next, index: int32(i)})
			}
			h[n/2].next = noSlot
			for i, j := range h {
				j.index = int32(i)
			}
			heapInit(&h)
			due := popDue(&h, 9, nil)
			want := 0
			for i := range n {
				if i%dueEvery == 0 && i != n/2 {
					want++
				}
			}
			if len(due) != want || len(h)+len(due) != n {
				t.Fatalf("n=%d every=%d: %d due, want %d; %d left", n, dueEvery, len(due), want, len(h))
			}
			for _, j := range due {
				if j.next > 9 || j.next == noSlot {
					t.Fatalf("not due: %d", j.next)
				}
			}
			checkHeap(t, h)
			for _, j := range due {
				j.next = 2000
			}
			pushBack(&h, due)
			if len(h) != n {
				t.Fatalf("%d after pushBack", len(h))
			}
			checkHeap(t, h)
		}
	}
}

func heapInit(h *jobHeap) { heap.Init(h) }

func checkHeap(t *testing.T, h jobHeap) {
	t.Helper()
	for i, j := range h {
		if int(j.index) != i {
			t.Fatalf("index %d at %d", j.index, i)
		}
		if i > 0 && h.Less(i, (i-1)/2) {
			t.Fatalf("not a heap at %d", i)
		}
	}
}
