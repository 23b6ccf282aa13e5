package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/sqlite"
)

func TestMain(m *testing.M) {
	// A test that re-executes this binary as a helper process runs the
	// helper here, never the tests.
	runHelperIfAsked()
	goleak.VerifyTestMain(m)
}

// open opens a store in a fresh file of the test's own directory.
func open(t *testing.T) (*sqlite.Backend, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "onetick.db")
	b, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, path
}

// operator runs SQL on the file through a connection of its own, as an
// operator with the sqlite3 shell would.
func operator(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func harness() backendtest.Harness {
	return backendtest.Harness{
		New: func(t *testing.T) onetick.Backend {
			b, err := sqlite.Open(filepath.Join(t.TempDir(), "onetick.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Expire: func(t *testing.T, b onetick.Backend) {
			operator(t, b.(*sqlite.Backend).Path(), "UPDATE lease SET expires_ms = min(expires_ms, ?)", time.Now().UnixMilli())
		},
		Stream: func(t *testing.T, b onetick.Backend, key string) []onetick.TickRecord {
			recs, err := b.(*sqlite.Backend).Stream(context.Background(), key)
			if err != nil {
				t.Fatalf("stream %s: %v", key, err)
			}
			return recs
		},
		Damage: damage,
		Fix:    func(*testing.T, onetick.Backend, backendtest.Damage) {},
		NewRetained: func(t *testing.T, r onetick.LedgerRetention) onetick.Backend {
			b, err := sqlite.Open(filepath.Join(t.TempDir(), "onetick.db"), sqlite.Options{Ledger: r})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
}

// damage applies the losses an operator can inflict on the file with SQL.
// The tables' types and constraints refuse the rest (a lease without an
// expiry, a slot that is not an integer, a table of another type), so
// those cases do not apply to this backend.
func damage(t *testing.T, ob onetick.Backend, d backendtest.Damage) bool {
	path := ob.(*sqlite.Backend).Path()
	switch d.Kind {
	case backendtest.EpochDeleted:
		operator(t, path, "DELETE FROM counters WHERE name = 'epoch'")
	case backendtest.EpochRolledBack:
		operator(t, path, "UPDATE counters SET value = 1 WHERE name = 'epoch'")
	case backendtest.HistoryDeleted:
		operator(t, path, "DELETE FROM terms")
	case backendtest.LastDeleted:
		operator(t, path, "DELETE FROM last_fired")
	default:
		return false
	}
	return true
}

func TestConformance(t *testing.T) {
	t.Parallel()
	backendtest.Exercise(t, harness())
}

// FuzzClaim drives the claim path with random batches, retries and
// superseded leaders (backendtest.ClaimFuzz) from the fuzzer's seed.
func FuzzClaim(f *testing.F) {
	for _, s := range []uint64{1, 7, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		b, err := sqlite.Open(filepath.Join(t.TempDir(), "onetick.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		backendtest.ClaimFuzz(t, harness(), b, seed, 40)
	})
}

var _ = os.Getenv

// BenchmarkClaim: one claim of 4 ticks, one transaction synced to disk,
// from one process.
func BenchmarkClaim(b *testing.B) {
	bk, err := sqlite.Open(filepath.Join(b.TempDir(), "onetick.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	ctx := context.Background()
	g, err := bk.Acquire(ctx, "a", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	s := onetick.Slot(1_600_000_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		batch := make([]onetick.Tick, 4)
		for k := range batch {
			batch[k] = onetick.Tick{Job: "j", Slot: s, Stream: "s", Payload: "{}", Retention: time.Hour}
			s += 1000
		}
		if _, err := bk.Claim(ctx, g.Lease, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRelayRefused(t *testing.T) {
	backendtest.RelayRefused(t, harness(), onetick.Relay{Kind: onetick.RelayRiver})
}
