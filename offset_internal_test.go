package onetick

import (
	"testing"
	"time"
)

// A congested round trip does not drag the clock-offset estimate by half
// its length; a fresh precise sample replaces an old one.
func TestClockOffsetPrefersPreciseSamples(t *testing.T) {
	m, _ := NewMetrics(nil)
	e := &Elector{cfg: ElectorConfig{Metrics: m}}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// Store 50ms ahead, measured over a 2ms round trip.
	e.observeStoreTime(t0.Add(1*time.Millisecond+50*time.Millisecond), t0, t0.Add(2*time.Millisecond))
	if got := e.ClockOffset(); got != 50*time.Millisecond {
		t.Fatalf("offset %s, want 50ms", got)
	}
	// A lopsided 800ms round trip (the request took 790ms) says 445ms.
	t1 := t0.Add(time.Second)
	e.observeStoreTime(t1.Add(790*time.Millisecond+50*time.Millisecond), t1, t1.Add(800*time.Millisecond))
	if got := e.ClockOffset(); got != 50*time.Millisecond {
		t.Fatalf("offset %s after a congested sample, want 50ms still", got)
	}
	// The store's clock is stepped: 10s later, precise samples say 300ms.
	t2 := t0.Add(10 * time.Second)
	e.observeStoreTime(t2.Add(1*time.Millisecond+300*time.Millisecond), t2, t2.Add(2*time.Millisecond))
	if got := e.ClockOffset(); got != 300*time.Millisecond {
		t.Fatalf("offset %s after a precise new sample, want 300ms", got)
	}
}
