package backendtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// RelayRefused checks, on a store that does not hand ticks of relay r,
// that a claim and an enqueue of a tick naming r answer it Broken,
// naming its job, and append nothing to its stream (issue 21: such a
// tick must not quietly reach a stream no consumer of the relay reads).
func RelayRefused(t *testing.T, h Harness, r onetick.Relay) {
	t.Helper()
	ctx := context.Background()
	b := h.New(t)
	defer b.Close()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stream := sk("relayed")
	s0 := onetick.SlotOf(g.StoreTime.Add(-time.Minute).Truncate(time.Second))
	tick := onetick.Tick{Job: "relayed", Slot: s0, Stream: stream, Payload: "{}", Retention: time.Hour, Relay: &r}
	res, err := b.Claim(ctx, g.Lease, []onetick.Tick{tick})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, res onetick.ClaimResult) {
		t.Helper()
		d := res.Damaged[0]
		if res.Outcomes[0] != onetick.Broken || d == nil || d.Job != "relayed" || !strings.Contains(d.Reason, r.Kind) {
			t.Fatalf("%s of a tick relayed to %s: %+v (damage %+v), want Broken naming the job and the relay", what, r.Kind, res.Outcomes, d)
		}
	}
	check("a claim", res)
	if c, ok := b.(onetick.Controller); ok {
		trig := tick
		trig.Key, trig.OutOfOrder = "k", true
		res, err := c.Enqueue(ctx, []onetick.Tick{trig}, onetick.Actor{Who: "ann"})
		if err != nil {
			t.Fatal(err)
		}
		check("an enqueue", res)
	}
	if h.Stream != nil {
		if recs := h.Stream(t, b, stream); len(recs) != 0 {
			t.Fatalf("the job's stream holds %+v, want nothing", recs)
		}
	}
}
