package backendtest

import (
	"context"
	"testing"

	"github.com/onetick/onetick"
)

// checkSkipLedger: when b keeps a run ledger, the ranges of job's slots
// the scheduler skipped are recorded there, with reason, in the claims
// that followed them: each range lies between the seeded slot s0 and the
// newest fired slot, holds no fired slot, and together they count at
// least one and at most missed slots (a range still waiting for the
// job's next claim when the run ended, or dropped with a lost lease and
// decided again by the next term, is not recorded twice).
func checkSkipLedger(t *testing.T, b onetick.Backend, job string, s0 onetick.Slot, fired []onetick.Slot, missed float64, reason string) {
	t.Helper()
	lg, ok := b.(onetick.Ledger)
	if !ok {
		return
	}
	ctx := context.Background()
	firedSet := map[onetick.Slot]bool{}
	for _, s := range fired {
		firedSet[s] = true
	}
	var n int64
	q := onetick.RunQuery{Job: job, Fate: onetick.FateSkipped, Limit: onetick.MaxRunLimit}
	for {
		p, err := lg.Runs(ctx, q)
		if err != nil {
			t.Fatalf("ledger of %s: %v", job, err)
		}
		for _, r := range p.Runs {
			if r.Count == 0 {
				continue // a slot skipped by a worker, not by the leader
			}
			if r.Reason != reason || r.Slot <= s0 || r.Through < r.Slot || r.Through >= fired[len(fired)-1] {
				t.Fatalf("skipped range %+v of %s: want reason %s, within (%s, %s)", r, job, reason, s0, fired[len(fired)-1])
			}
			for _, s := range fired {
				if s >= r.Slot && s <= r.Through {
					t.Fatalf("skipped range %s .. %s of %s holds the fired slot %s", r.Slot, r.Through, job, s)
				}
			}
			n += r.Count
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if n < 1 || float64(n) > missed {
		t.Fatalf("the ledger of %s records %d skipped slots, want 1 .. %v (the missed counter)", job, n, missed)
	}
}
