package worker

import (
	"testing"
	"time"
)

func TestJitteredBackoff(t *testing.T) {
	for _, c := range []struct {
		attempt int
		full    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {10, 512 * time.Second}, {11, 10 * time.Minute}, {1000, 10 * time.Minute}} {
		lo, hi := jittered(time.Second, 10*time.Minute, c.attempt, 0), jittered(time.Second, 10*time.Minute, c.attempt, 0.999999)
		if lo != c.full/2 || hi <= lo || hi > c.full {
			t.Errorf("attempt %d: delay in [%s, %s], want [%s, %s]", c.attempt, lo, hi, c.full/2, c.full)
		}
	}
	for range 100 {
		if d := DefaultBackoff(3); d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("DefaultBackoff(3) = %s", d)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	if retryDelay(1) != 50*time.Millisecond || retryDelay(2) != 100*time.Millisecond || retryDelay(100) != 2*time.Second {
		t.Fatal(retryDelay(1), retryDelay(2), retryDelay(100))
	}
}
