package memory

import (
	"context"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// TestKitClaimCases sets the memory store's state up for each of the
// kit's claim cases and runs the real Claim.
func TestKitClaimCases(t *testing.T) {
	ctx := context.Background()
	for _, c := range storekit.ClaimCases() {
		if c.RecordDamaged {
			continue // records in memory cannot be damaged
		}
		t.Run(c.Name, func(t *testing.T) {
			b := New(Options{})
			defer b.Close()
			g, err := b.Acquire(ctx, "me", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			own := g.Lease.Token()
			slot := onetick.SlotOf(g.StoreTime) - 10_000
			if c.Early {
				slot += onetick.Slot(time.Hour.Milliseconds())
			}
			tick := onetick.Tick{Job: "j", Slot: slot, Stream: "s", Retention: time.Hour, OutOfOrder: c.OutOfOrder}
			b.mu.Lock()
			if c.Record != storekit.NoRecord {
				b.ticks[tick.ID()] = tickRecord{token: c.Record.Token(own), expires: g.StoreTime.Add(time.Hour)}
			}
			if c.HasLast {
				b.last["j"] = slot + c.LastDelta
			}
			if c.Paused {
				b.ctl.paused = map[string]onetick.JobControl{"j": {Paused: true,
					Intervals: []onetick.PauseInterval{{Since: slot.Time().Add(-time.Second)}}}}
			}
			b.mu.Unlock()
			if c.JobDamaged {
				b.DamageLast("j")
			}
			if c.StreamDamaged {
				b.DamageStream("s")
			}
			res, err := b.Claim(ctx, g.Lease, []onetick.Tick{tick})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcomes[0] != c.Want {
				t.Fatalf("outcome %v, want %v", res.Outcomes[0], c.Want)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			last, has := b.last["j"]
			got := storekit.Got{Outcome: res.Outcomes[0], Record: b.ticks[tick.ID()].token, Appended: len(b.streams["s"]),
				Moved: has && last == slot && (!c.HasLast || c.LastDelta != 0)}
			if err := c.Check(own, got); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestKitPauseCases runs the kit's pause cases through the memory
// store's Pause and Resume.
func TestKitPauseCases(t *testing.T) {
	ctx := context.Background()
	alice := onetick.Actor{Who: "alice", Reason: "why"}
	for _, pc := range storekit.PauseCases() {
		t.Run(pc.Name, func(t *testing.T) {
			b := New(Options{})
			defer b.Close()
			c, log, err := pc.Run(ctx, b, alice, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := pc.Check(c, log); err != nil {
				t.Error(err)
			}
			if log.Who != "alice" {
				t.Errorf("logged by %q", log.Who)
			}
		})
	}
}
