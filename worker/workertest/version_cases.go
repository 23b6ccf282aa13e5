package workertest

import (
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// A tick's definition version (jobs defined at run time) reaches the
// worker with the tick, and stays with it through a retry, so that every
// attempt runs with the definition the tick was claimed under.
func testStoreVersion(t *testing.T, env Env) {
	ctx := ctxT(t)
	job := name("ver")
	g, err := env.Backend.Acquire(ctx, "producer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Second))
	tk := onetick.Tick{Job: job, Slot: s, Stream: streamOf(job), Payload: "{}", Retention: time.Minute, Version: "v-1"}
	if res, err := env.Backend.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	if err := env.Backend.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	st := env.Store(t)
	streams := []string{streamOf(job)}
	d := fetchN(t, st, "a", streams, 1)[0]
	if d.Version != "v-1" {
		t.Fatalf("fetched %+v: version %q, want v-1", d, d.Version)
	}
	if adm := begin(t, st, "a", worker.OverlapAllow, d); adm[0] != worker.Run {
		t.Fatalf("begin: %v", adm[0])
	}
	if owned := finish(t, st, "a", worker.Finish{D: d, Kind: worker.FinishRetry, Err: "boom"}); !owned[0] {
		t.Fatal("finish: not owned")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, err := st.PromoteDue(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if p.N == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retry was not promoted within 30s")
		}
	}
	r := fetchN(t, st, "a", streams, 1)[0]
	if r.Attempt != 2 || r.Tick != d.Tick || r.Version != "v-1" {
		t.Fatalf("the retry: %+v, want attempt 2 of %s with version v-1", r, d.Tick)
	}
}
