package postgres

import "testing"

// Trimming is approximate: certain after a tenth of MaxLen appended at
// once, otherwise about 10n/MaxLen of the time.
func TestTrimNow(t *testing.T) {
	for _, c := range [][2]int64{{1, 1}, {1, 10}, {100, 1000}, {5000, 1000}} {
		if !trimNow(c[0], c[1]) {
			t.Errorf("trimNow(%d, %d) = false, want true", c[0], c[1])
		}
	}
	n := 0
	for range 10000 {
		if trimNow(1, 1000) {
			n++
		}
	}
	if n < 50 || n > 200 {
		t.Errorf("trimNow(1, 1000) true %d times in 10000, want about 100", n)
	}
}
