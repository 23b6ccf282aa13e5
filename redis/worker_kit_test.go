package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/worker"
)

// The Lua of Begin decides the done record and the delivery limit as
// storekit.Screen does, and dead-letters with storekit.DeliveryLimitError's
// message: one table of cases drives the script and the kit.
func TestWorkerBeginMatchesKit(t *testing.T) {
	b, err := redis.Open(redistest.Start(t).URL(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, s := context.Background(), b.WorkerStore("")
	base := onetick.SlotOf(time.Now().Add(-time.Hour))
	for i, c := range []struct {
		limit, deliveries int
	}{{0, 3}, {1, 1}, {1, 2}, {2, 2}, {2, 3}} {
		job := fmt.Sprintf("k%d", i)
		streams := []string{"onetick:stream:" + job}
		claimOne(t, b, job, base)
		ds, err := s.Fetch(ctx, "a", streams, 1, time.Second)
		if err != nil || len(ds) != 1 {
			t.Fatal(ds, err)
		}
		d := ds[0]
		for d.Deliveries < c.deliveries {
			// Idle 0: the entry is taken over again, one more delivery.
			got, err := s.Reclaim(ctx, "a", streams, 0, 1)
			if err != nil || len(got) != 1 {
				t.Fatal(got, err)
			}
			d = got[0]
		}
		st := worker.Start{D: d, Overlap: worker.OverlapAllow, MaxDeliveries: c.limit}
		res, err := s.Begin(ctx, "a", time.Minute, []worker.Start{st})
		if err != nil {
			t.Fatal(err)
		}
		want := storekit.Screen(st, c.deliveries, false)
		if want == 0 {
			want = worker.Run
		}
		if got := res.Admissions[0]; got != want {
			t.Errorf("limit %d, %d deliveries: Begin = %v, the kit says %v", c.limit, c.deliveries, got, want)
		}
	}
	dead, err := s.DeadLetters(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k2": storekit.DeliveryLimitError(2, 1), "k4": storekit.DeliveryLimitError(3, 2)}
	if len(dead) != len(want) {
		t.Fatalf("%d dead letters, want %d: %+v", len(dead), len(want), dead)
	}
	for _, dl := range dead {
		if dl.Error != want[dl.Job] {
			t.Errorf("dead letter of %s: error %q, the kit's %q", dl.Job, dl.Error, want[dl.Job])
		}
	}
}
