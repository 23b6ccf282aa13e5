package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// TestKitClaimCases sets the file's rows up for each of the kit's claim
// cases and runs the real Claim. The schema holds no damage: the cases
// that need some are skipped.
func TestKitClaimCases(t *testing.T) {
	ctx := context.Background()
	for _, c := range storekit.ClaimCases() {
		if c.JobDamaged || c.StreamDamaged || c.RecordDamaged {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			b, err := Open(filepath.Join(t.TempDir(), "kit.db"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			lease, tick, err := c.Start(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			own, slot := lease.Token(), tick.Slot
			err = b.write(ctx, func(o *op) error {
				if c.Record != storekit.NoRecord {
					if err := o.exec("INSERT INTO tick_records (tick, token, expires_ms) VALUES (?, ?, ?)",
						tick.ID(), c.Record.Token(own), o.ms+time.Hour.Milliseconds()); err != nil {
						return err
					}
				}
				if c.HasLast {
					if err := o.exec("INSERT INTO last_fired (job, slot) VALUES ('j', ?)", int64(slot+c.LastDelta)); err != nil {
						return err
					}
				}
				if c.Paused {
					return o.exec("INSERT INTO pauses (job, since_ms) VALUES ('j', ?)", int64(slot)-1000)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := b.Claim(ctx, lease, []onetick.Tick{tick})
			if err != nil {
				t.Fatal(err)
			}
			got := storekit.Got{Outcome: res.Outcomes[0]}
			var last int64
			err = b.read(ctx, func(o *op) error {
				if err := o.row("SELECT token FROM tick_records WHERE tick = ?", tick.ID()).Scan(&got.Record); err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
				if err := o.row("SELECT slot FROM last_fired WHERE job = 'j'").Scan(&last); err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
				return o.row("SELECT count(*) FROM entries WHERE stream = 's'").Scan(&got.Appended)
			})
			if err != nil {
				t.Fatal(err)
			}
			got.Moved = c.Moved(tick, onetick.Slot(last), last != 0)
			if err := c.Check(own, got); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestKitPauseCases runs the kit's pause cases through the file's Pause
// and Resume, a millisecond apart (in one millisecond, a pause after a
// resume reopens that empty interval: the table's key is the job and the
// start).
func TestKitPauseCases(t *testing.T) {
	for _, pc := range storekit.PauseCases() {
		t.Run(pc.Name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			b, err := Open(filepath.Join(t.TempDir(), "kit.db"), Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := pc.Verify(context.Background(), b, func() { clock.Advance(time.Millisecond) }); err != nil {
				t.Error(err)
			}
		})
	}
}
