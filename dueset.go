package onetick

import "container/heap"

// The due set: jobs by their next slot.

type jobHeap []*jobState

func (h jobHeap) Len() int { return len(h) }
func (h jobHeap) Less(i, k int) bool {
	return uint64(h[i].next) < uint64(h[k].next) // noSlot (-1) sorts last
}
func (h jobHeap) Swap(i, k int) {
	h[i], h[k] = h[k], h[i]
	h[i].index, h[k].index = int32(i), int32(k)
}
func (h *jobHeap) Push(x any) { j := x.(*jobState); j.index = int32(len(*h)); *h = append(*h, j) }
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	*h = old[:len(old)-1]
	return j
}

// manyDue is how many due jobs make one pass over the whole heap cheaper
// than popping (and later pushing) each: a pop costs about 2·log2(n)
// comparisons, a pass and a rebuild about 3n.
func manyDue(n int) int { return n/16 + 64 }

// popDue appends to due the jobs whose next slot is at or before now.
func popDue(h *jobHeap, now Slot, due []*jobState) []*jobState {
	limit := manyDue(len(*h))
	for len(*h) > 0 && (*h)[0].next != noSlot && (*h)[0].next <= now {
		if len(due) < limit {
			due = append(due, heap.Pop(h).(*jobState))
			continue
		}
		// Many are due (a burst): take the rest in one pass.
		rest := (*h)[:0]
		for _, j := range *h {
			if j.next != noSlot && j.next <= now {
				due = append(due, j)
			} else {
				rest = append(rest, j)
			}
		}
		clear((*h)[len(rest):])
		*h = rest
		for i, j := range *h {
			j.index = int32(i)
		}
		heap.Init(h)
		break
	}
	return due
}

// pushBack puts the jobs of popDue back.
func pushBack(h *jobHeap, due []*jobState) {
	if len(due) < manyDue(len(*h)+len(due)) {
		for _, j := range due {
			heap.Push(h, j)
		}
		return
	}
	for _, j := range due {
		j.index = int32(len(*h))
		*h = append(*h, j)
	}
	heap.Init(h)
}
