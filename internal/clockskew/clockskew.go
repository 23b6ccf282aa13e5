// Package clockskew is a real clock shifted by a fixed offset, for tests of
// replicas whose clock runs ahead of or behind the store's.
package clockskew

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock is the real clock shifted by Offset; timers and tickers run at the
// real rate.
type Clock struct {
	clockwork.Clock
	Offset time.Duration
}

// New returns the real clock shifted by off (negative: behind).
func New(off time.Duration) Clock { return Clock{clockwork.NewRealClock(), off} }

// Now is the real time plus the offset.
func (c Clock) Now() time.Time { return time.Now().Add(c.Offset) }

// Since is measured on the shifted clock.
func (c Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is measured on the shifted clock.
func (c Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
