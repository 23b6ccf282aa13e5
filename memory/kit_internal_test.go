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
			lease, tick, err := c.Start(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			own, slot := lease.Token(), tick.Slot
			b.mu.Lock()
			if c.Record != storekit.NoRecord {
				b.ticks[tick.ID()] = tickRecord{token: c.Record.Token(own), expires: time.Now().Add(time.Hour)}
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
			res, err := b.Claim(ctx, lease, []onetick.Tick{tick})
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
				Moved: c.Moved(tick, last, has)}
			if err := c.Check(own, got); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestKitPauseCases runs the kit's pause cases through the memory
// store's Pause and Resume.
func TestKitPauseCases(t *testing.T) {
	for _, pc := range storekit.PauseCases() {
		t.Run(pc.Name, func(t *testing.T) {
			b := New(Options{})
			defer b.Close()
			if err := pc.Verify(context.Background(), b, nil); err != nil {
				t.Error(err)
			}
		})
	}
}
