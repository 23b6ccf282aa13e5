package redis_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness runs every subtest on a flushed server with keyspace events on.
func harness(t *testing.T, srv *redistest.Server) backendtest.Harness {
	return backendtest.Harness{
		New: func(t *testing.T) onetick.Backend {
			if err := srv.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := redis.Open(srv.URL(), redis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Expire: func(t *testing.T, b onetick.Backend) { expire(t, b.(*redis.Backend)) },
		Stream: readStream,
		Damage: func(t *testing.T, b onetick.Backend, d backendtest.Damage) bool {
			damage(t, b.(*redis.Backend), d)
			return true
		},
		Fix: func(t *testing.T, b onetick.Backend, d backendtest.Damage) { fix(t, b.(*redis.Backend), d) },
		NewRetained: func(t *testing.T, r onetick.LedgerRetention) onetick.Backend {
			if err := srv.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := redis.Open(srv.URL(), redis.Options{Ledger: r})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
}

// readStream reads a stream; while damage keeps the stream's entries
// aside (see damage), it reads them there.
func readStream(t *testing.T, ob onetick.Backend, key string) []onetick.TickRecord {
	b := ob.(*redis.Backend)
	ctx := context.Background()
	if typ, _ := b.Client().Type(ctx, key).Result(); typ != "stream" && typ != "none" {
		key += ":aside"
	}
	recs, err := b.ReadStream(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// expire lets the lease run out now, as if its holder had paused past the
// TTL, and waits until Redis has expired it.
func expire(t *testing.T, b *redis.Backend) {
	t.Helper()
	ctx := context.Background()
	key := b.Prefix() + ":leader"
	if err := b.Client().PExpire(ctx, key, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		n, err := b.Client().Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("lease did not expire")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.KeyspaceEvents())
	backendtest.Exercise(t, harness(t, srv))
}

// FuzzClaimDamage drives the claim path against a real redis-server with
// random batches, damage between claims and superseded leaders
// (backendtest.ClaimFuzz), from the fuzzer's seed.
func FuzzClaimDamage(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1 << 40} {
		f.Add(s)
	}
	srv := redistest.Start(f)
	h := harness(nil, srv)
	f.Fuzz(func(t *testing.T, seed uint64) {
		b := h.New(t)
		defer b.Close()
		backendtest.ClaimFuzz(t, h, b, seed, 40)
	})
}
