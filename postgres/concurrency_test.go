package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Requests that enqueue the same triggers at the same time enqueue each
// once: the tick record's unique key decides, and the losers answer
// Duplicate.
func TestConcurrentEnqueueOnce(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	const writers, keys = 6, 20
	var ticks []onetick.Tick
	for k := range keys {
		ticks = append(ticks, onetick.Tick{Job: "j", Key: fmt.Sprintf("k%d", k), Stream: "ce", Payload: "{}", Retention: time.Hour})
	}
	claimed := make([]int, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		other := reopen(t, b) // a pool of its own, as another replica
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := other.Enqueue(ctx, ticks, onetick.Actor{Who: fmt.Sprint("w", w)})
			if err != nil {
				t.Errorf("enqueue %d: %v", w, err)
				return
			}
			for _, o := range res.Outcomes {
				if o == onetick.Claimed {
					claimed[w]++
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	total := 0
	for _, n := range claimed {
		total += n
	}
	recs, err := b.ReadStream(ctx, "ce", 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != keys || len(recs) != keys {
		t.Fatalf("%d answered claimed (%v), %d entries; want %d of each", total, claimed, len(recs), keys)
	}
}

// Entries appended by many concurrent transactions while consumers fetch
// are each delivered once, none skipped: appends make their ids visible
// in id order, so a group's cursor never passes an entry that commits
// later.
func TestFetchDuringConcurrentAppends(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	const appenders, each = 4, 40
	var wg sync.WaitGroup
	for a := range appenders {
		other := reopen(t, b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tk := onetick.Tick{Job: "j", Key: fmt.Sprintf("a%d-%d", a, i), Stream: "cf", Payload: "{}", Retention: time.Hour}
				if _, err := other.Enqueue(ctx, []onetick.Tick{tk}, onetick.Actor{Who: "t"}); err != nil {
					t.Errorf("enqueue: %v", err)
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var fw sync.WaitGroup
	for c := range 2 {
		s := reopen(t, b).WorkerStore("")
		fw.Add(1)
		go func() {
			defer fw.Done()
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n >= appenders*each {
					return
				}
				ds, err := s.Fetch(ctx, fmt.Sprint("c", c), []string{"cf"}, 7, 50*time.Millisecond)
				if err != nil {
					t.Errorf("fetch: %v", err)
					return
				}
				mu.Lock()
				for _, d := range ds {
					seen[d.Tick]++
				}
				mu.Unlock()
				settle(t, s, fmt.Sprint("c", c), ds)
			}
		}()
	}
	wg.Wait()
	fw.Wait()
	if len(seen) != appenders*each {
		t.Fatalf("%d of %d entries delivered", len(seen), appenders*each)
	}
	for tick, n := range seen {
		if n != 1 {
			t.Fatalf("tick %s delivered %d times", tick, n)
		}
	}
}

// settle runs and finishes deliveries as a worker would.
func settle(t *testing.T, s worker.Store, consumer string, ds []*worker.Delivery) {
	if len(ds) == 0 {
		return
	}
	starts := make([]worker.Start, len(ds))
	fs := make([]worker.Finish, len(ds))
	for i, d := range ds {
		starts[i] = worker.Start{D: d, Overlap: worker.OverlapAllow}
		fs[i] = worker.Finish{D: d, Kind: worker.FinishDone, Retention: time.Hour}
	}
	if _, err := s.Begin(ctxT(t), consumer, time.Minute, starts); err != nil {
		t.Errorf("begin: %v", err)
	}
	if _, err := s.Finish(ctxT(t), consumer, fs); err != nil {
		t.Errorf("finish: %v", err)
	}
}
