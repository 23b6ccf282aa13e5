package postgres_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a migrated backend in a fresh schema, dropped at the end of
// the test (after the backend is closed: cleanups run last first).
func open(t testing.TB) *postgres.Backend {
	t.Helper()
	return openWith(t, postgres.Options{})
}

// openWith is open with options o (its schema a fresh one).
func openWith(t testing.TB, o postgres.Options) *postgres.Backend {
	t.Helper()
	o.Schema = pgtest.Schema(t)
	b, err := postgres.Open(context.Background(), pgtest.URL(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Migrate(context.Background()); err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	return b
}

// reopen opens another backend (its own pool) on b's schema.
func reopen(t testing.TB, b *postgres.Backend) *postgres.Backend {
	t.Helper()
	o, err := postgres.Open(context.Background(), pgtest.URL(), postgres.Options{Schema: b.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

func execSQL(t testing.TB, b *postgres.Backend, sql string, args ...any) {
	t.Helper()
	if _, err := b.Pool().Exec(context.Background(), b.Q(sql), args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func harness() backendtest.Harness {
	return backendtest.Harness{
		New: func(t *testing.T) onetick.Backend { return open(t) },
		NewRetained: func(t *testing.T, r onetick.LedgerRetention) onetick.Backend {
			return openWith(t, postgres.Options{Ledger: r})
		},
		Expire: func(t *testing.T, ob onetick.Backend) {
			// The lease (of the view's shard) runs out now, as if its
			// holder had paused past its TTL.
			b := ob.(*postgres.Backend)
			execSQL(t, b, `UPDATE {s}.lease SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE shard = $1`, b.ShardNum())
		},
		Stream: func(t *testing.T, ob onetick.Backend, key string) []onetick.TickRecord {
			recs, err := ob.(*postgres.Backend).ReadStream(context.Background(), key, 0)
			if err != nil {
				t.Fatal(err)
			}
			return recs
		},
		Damage: func(t *testing.T, b onetick.Backend, d backendtest.Damage) bool {
			return damage(t, b.(*postgres.Backend), d)
		},
		Fix: func(t *testing.T, b onetick.Backend, d backendtest.Damage) { fix(t, b.(*postgres.Backend), d) },
	}
}

// The two suites use schemas of their own and wait far more than they
// compute: they run side by side.
func TestConformance(t *testing.T) {
	t.Parallel()
	backendtest.Exercise(t, harness())
}

// FuzzClaimDamage drives the claim path against a real PostgreSQL with
// random batches, damage between claims and superseded leaders
// (backendtest.ClaimFuzz), from the fuzzer's seed.
func FuzzClaimDamage(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1 << 40} {
		f.Add(s)
	}
	h := harness()
	f.Fuzz(func(t *testing.T, seed uint64) {
		b := h.New(t)
		defer b.Close()
		backendtest.ClaimFuzz(t, h, b, seed, 40)
	})
}
