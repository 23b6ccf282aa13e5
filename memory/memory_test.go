package memory_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func harness() backendtest.Harness {
	return backendtest.Harness{
		New:    func(*testing.T) onetick.Backend { return memory.New(memory.Options{}) },
		Expire: func(_ *testing.T, b onetick.Backend) { b.(*memory.Backend).ForceExpire() },
		Stream: func(_ *testing.T, b onetick.Backend, key string) []onetick.TickRecord {
			return b.(*memory.Backend).Stream(key)
		},
		Damage: damage,
		Fix:    fix,
		NewRetained: func(_ *testing.T, r onetick.LedgerRetention) onetick.Backend {
			return memory.New(memory.Options{Ledger: r})
		},
	}
}

func TestConformance(t *testing.T) { backendtest.Exercise(t, harness()) }

// FuzzClaimDamage drives the claim path with random batches, damage and
// superseded leaders (backendtest.ClaimFuzz) from the fuzzer's seed.
func FuzzClaimDamage(f *testing.F) {
	for _, s := range []uint64{1, 7, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		b := memory.New(memory.Options{})
		defer b.Close()
		backendtest.ClaimFuzz(t, harness(), b, seed, 40)
	})
}

// damage models each kind on the memory backend's injected damage.
func damage(_ *testing.T, ob onetick.Backend, d backendtest.Damage) bool {
	b := ob.(*memory.Backend)
	switch d.Kind {
	case backendtest.LeaseWrongType:
		b.DamageLease(onetick.DamageType)
	case backendtest.LeaseGarbage:
		b.DamageLease(onetick.DamageValue)
	case backendtest.LeaseNoExpiry:
		b.DamageLease(onetick.DamageNoExpiry)
	case backendtest.EpochWrongType:
		b.DamageEpoch(onetick.DamageType)
	case backendtest.EpochGarbage:
		b.DamageEpoch(onetick.DamageValue)
	case backendtest.EpochDeleted:
		b.DeleteEpoch()
	case backendtest.EpochRolledBack:
		b.SetEpoch(1)
	case backendtest.HistoryGarbageEntry:
		b.DamageHistory(false)
	case backendtest.HistoryWrongType:
		b.DamageHistory(true)
	case backendtest.HistoryDeleted:
		b.DeleteHistory()
	case backendtest.LastWrongType:
		b.DamageLast("")
	case backendtest.LastDeleted:
		b.DeleteLast()
	case backendtest.LastFieldGarbage:
		b.DamageLast(d.Job)
	case backendtest.StreamWrongType:
		b.DamageStream(d.Stream)
	default:
		// The memory backend keeps tick records per tick, not in buckets
		// that could hold another type.
		return false
	}
	return true
}

func fix(_ *testing.T, ob onetick.Backend, d backendtest.Damage) {
	b := ob.(*memory.Backend)
	switch d.Kind {
	case backendtest.LeaseWrongType, backendtest.LeaseGarbage, backendtest.LeaseNoExpiry:
		b.Restore("leader", "")
	case backendtest.EpochWrongType, backendtest.EpochGarbage:
		b.Restore("epoch", "")
	case backendtest.HistoryGarbageEntry, backendtest.HistoryWrongType:
		b.Restore("terms", "")
	case backendtest.LastWrongType:
		b.Restore("last", "")
	case backendtest.LastFieldGarbage:
		b.Restore("last", d.Job)
	case backendtest.StreamWrongType:
		b.FixStream(d.Stream)
	}
}

func TestRelayRefused(t *testing.T) {
	backendtest.RelayRefused(t, harness(), onetick.Relay{Kind: onetick.RelayRiver})
	backendtest.RelayRefused(t, harness(), onetick.Relay{Kind: onetick.RelayAsynq})
}

// TestMembers: the membership suite on a fake clock.
func TestMembers(t *testing.T) {
	var fc *clockwork.FakeClock
	backendtest.Members(t, backendtest.MembersHarness{
		New: func(*testing.T) backendtest.MembersStore {
			fc = clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
			return memory.New(memory.Options{Clock: fc})
		},
		Advance: func(_ *testing.T, d time.Duration) { fc.Advance(d) },
	})
}
