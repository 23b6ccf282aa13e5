package backendtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// MembersStore is a store that keeps the fleet's membership, with the
// clock that judges it.
type MembersStore interface {
	onetick.Members
	Time(ctx context.Context) (time.Time, error)
	Close() error
}

// MembersHarness adapts a store to the Members suite.
type MembersHarness struct {
	// New returns a store with no members; the suite closes it.
	New func(t *testing.T) MembersStore
	// Advance, if set, moves the clock of the store New returned last
	// forward by d (a store on a fake clock). Without it the suite waits
	// for TTLs to pass on the store's own clock, and judges an
	// expiry only when the store's times, read around each call, make
	// the outcome certain (on a slow machine it retries with a longer
	// TTL).
	Advance func(t *testing.T, d time.Duration)
}

// Members runs the membership suite: the live set (me included, in name
// order), expiry after the TTL by the store's clock, a heartbeat that
// extends the entry, several holders with their own TTLs, refused
// arguments, and a leave that drops the entry at once.
func Members(t *testing.T, h MembersHarness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, m *membersRun)
	}{
		{"LiveSet", testMembersLive},
		{"ExpiryByTTL", testMembersExpiry},
		{"RefreshExtends", testMembersRefresh},
		{"BadArguments", testMembersBadArguments},
		{"Leave", testMembersLeave},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, &membersRun{t: t, h: h}) })
	}
}

// membersRun is one case's store and its clock.
type membersRun struct {
	t  *testing.T
	h  MembersHarness
	st MembersStore
}

// fresh replaces the run's store with a new empty one.
func (m *membersRun) fresh() {
	st := m.h.New(m.t)
	m.t.Cleanup(func() { _ = st.Close() })
	m.st = st
}

func (m *membersRun) now() time.Time {
	m.t.Helper()
	now, err := m.st.Time(ctxT(m.t))
	if err != nil {
		m.t.Fatalf("store time: %v", err)
	}
	return now
}

// passTo returns once the store's clock has passed target.
func (m *membersRun) passTo(target time.Time) {
	m.t.Helper()
	for {
		now := m.now()
		if now.After(target) {
			return
		}
		if m.h.Advance != nil {
			m.h.Advance(m.t, target.Sub(now)+time.Millisecond)
			continue
		}
		select {
		case <-time.After(target.Sub(now) + time.Millisecond):
		case <-ctxT(m.t).Done():
			m.t.Fatal("the store's clock did not reach the TTL's end")
		}
	}
}

func (m *membersRun) beat(holder string, ttl time.Duration) []string {
	m.t.Helper()
	live, err := m.st.Heartbeat(ctxT(m.t), holder, ttl)
	if err != nil {
		m.t.Fatalf("heartbeat %s: %v", holder, err)
	}
	return live
}

func (m *membersRun) want(what string, got []string, want ...string) {
	m.t.Helper()
	if !slices.Equal(got, want) {
		m.t.Fatalf("%s: live %q, want %q", what, got, want)
	}
}

// tryTTLs runs one attempt of a timing case per TTL, longer each time,
// until one is conclusive: on a store with Advance, the first always is.
func (m *membersRun) tryTTLs(attempt func(ttl time.Duration) bool) {
	m.t.Helper()
	for ttl := 400 * time.Millisecond; ttl <= 6400*time.Millisecond; ttl *= 2 {
		m.fresh()
		if attempt(ttl) {
			return
		}
		m.t.Logf("ttl %s: the store's calls took too long to judge; longer", ttl)
	}
	m.t.Fatal("no attempt was conclusive")
}

const memberLong = time.Hour

func testMembersLive(t *testing.T, m *membersRun) {
	m.fresh()
	m.want("b alone", m.beat("b", memberLong), "b")
	m.want("a joins", m.beat("a", memberLong), "a", "b")
	m.want("b again", m.beat("b", memberLong), "a", "b")
	// The shortest TTL still counts its own heartbeat.
	m.want("c with 1ms", m.beat("c", time.Millisecond), "a", "b", "c")
	m.passTo(m.now().Add(time.Millisecond))
	m.want("c gone", m.beat("a", memberLong), "a", "b")
}

// A holder's entry lasts its TTL from its heartbeat by the store's clock,
// then the next heartbeat of anyone drops it; it may join again.
func testMembersExpiry(t *testing.T, m *membersRun) {
	m.tryTTLs(func(ttl time.Duration) bool {
		t0 := m.now()
		m.beat("a", ttl)
		t1 := m.now() // a's entry expires within [t0, t1] + ttl
		live := m.beat("b", memberLong)
		if !m.now().Before(t0.Add(ttl)) {
			return false
		}
		m.want("within a's ttl", live, "a", "b")
		m.passTo(t1.Add(ttl))
		m.want("after a's ttl", m.beat("b", memberLong), "b")
		m.want("a rejoins", m.beat("a", ttl), "a", "b")
		return true
	})
}

// A heartbeat moves the entry's expiry to its own time + TTL: the holder
// outlives its first heartbeat's TTL, and drops out one TTL after its
// last.
func testMembersRefresh(t *testing.T, m *membersRun) {
	m.tryTTLs(func(ttl time.Duration) bool {
		t0 := m.now()
		m.beat("a", ttl)
		t1 := m.now() // first expiry within [t0, t1] + ttl
		m.passTo(t0.Add(ttl / 2))
		t2 := m.now()
		m.want("a refreshes", m.beat("a", ttl), "a")
		t3 := m.now() // second expiry within [t2, t3] + ttl
		m.passTo(t1.Add(ttl))
		live := m.beat("b", memberLong)
		if !m.now().Before(t2.Add(ttl)) {
			return false
		}
		m.want("past the first heartbeat's ttl", live, "a", "b")
		m.passTo(t3.Add(ttl))
		m.want("past the last heartbeat's ttl", m.beat("b", memberLong), "b")
		return true
	})
}

func testMembersBadArguments(t *testing.T, m *membersRun) {
	m.fresh()
	for _, c := range []struct {
		holder string
		ttl    time.Duration
	}{{"", memberLong}, {"a", 0}, {"a", -time.Second}, {"a", 500 * time.Microsecond}} {
		if live, err := m.st.Heartbeat(ctxT(t), c.holder, c.ttl); err == nil {
			t.Fatalf("heartbeat %q ttl %s: %q, want an error", c.holder, c.ttl, live)
		}
	}
	m.want("after the refusals", m.beat("b", memberLong), "b")
}

// Leave drops the holder's entry at once, long before its TTL: the next
// heartbeat of anyone no longer lists it. Leaving when absent is not an
// error; an empty holder is refused; a holder that left may join again.
func testMembersLeave(t *testing.T, m *membersRun) {
	m.fresh()
	ctx := ctxT(t)
	m.beat("a", memberLong)
	m.beat("c", memberLong)
	m.want("b joins", m.beat("b", memberLong), "a", "b", "c")
	if err := m.st.Leave(ctx, "a"); err != nil {
		t.Fatalf("leave a: %v", err)
	}
	m.want("after a left", m.beat("b", memberLong), "b", "c")
	if err := m.st.Leave(ctx, "a"); err != nil {
		t.Fatalf("leave a again: %v", err)
	}
	if err := m.st.Leave(ctx, "never-joined"); err != nil {
		t.Fatalf("leave of a holder never joined: %v", err)
	}
	if err := m.st.Leave(ctx, ""); err == nil {
		t.Fatal("leave of an empty holder: nil, want an error")
	}
	m.want("after the absent leaves", m.beat("c", memberLong), "b", "c")
	if err := m.st.Leave(ctx, "b"); err != nil {
		t.Fatalf("leave b: %v", err)
	}
	if err := m.st.Leave(ctx, "c"); err != nil {
		t.Fatalf("leave c: %v", err)
	}
	// The last one gone: an empty store, where leaving is still fine.
	if err := m.st.Leave(ctx, "c"); err != nil {
		t.Fatalf("leave on an empty membership: %v", err)
	}
	m.want("a rejoins", m.beat("a", memberLong), "a")
}
