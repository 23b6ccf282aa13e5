package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// TestLedgerCountsMigrated: a file of schema version 6 (the ledger without
// its counts) is migrated with each job's count, the triggers keep it as
// records come and go, and a claim's count trim drops the oldest records.
func TestLedgerCountsMigrated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v6.db")
	if err := create(path, Options{}, 6); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	base := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Minute))
	for i := 0; i < 5; i++ {
		slot := base + onetick.Slot(i)*60000
		if _, err := db.Exec(`INSERT INTO runs (job, tick, slot, newest, fate, doc) VALUES ('j', ?, ?, ?, 'enqueued', '{}')`,
			onetick.TickID("j", slot), int64(slot), int64(slot)); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()

	b, err := Open(path, Options{Ledger: onetick.LedgerRetention{MaxPerJob: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	count := func() int64 {
		t.Helper()
		var n int64
		if err := b.db.QueryRow("SELECT n FROM run_counts WHERE job = 'j'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 5 {
		t.Fatalf("count after the migration: %d, want 5", n)
	}
	ctx := context.Background()
	l, err := b.Acquire(ctx, "r", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	next := base + 5*60000
	if _, err := b.Claim(ctx, l.Lease, []onetick.Tick{{Job: "j", Slot: next, Stream: "s", Payload: "{}"}}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 3 {
		t.Fatalf("count after a claim with max_per_job 3: %d, want 3", n)
	}
	rows, err := b.db.Query("SELECT tick FROM runs WHERE job = 'j' ORDER BY slot DESC")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var tick string
		if err := rows.Scan(&tick); err != nil {
			t.Fatal(err)
		}
		got = append(got, tick)
	}
	want := []string{onetick.TickID("j", next), onetick.TickID("j", base+4*60000), onetick.TickID("j", base+3*60000)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v, want the newest three %v", got, want)
	}
}
