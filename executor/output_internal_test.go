package executor

import (
	"strings"
	"testing"
)

// The tail buffer keeps the last max bytes of whatever was written, never
// more than twice that in memory, whatever the sizes of the writes.
func TestTailBufferBounded(t *testing.T) {
	const max = 64
	tb := newTailBuffer(max)
	var all strings.Builder
	for i := range 5000 {
		p := strings.Repeat(string(rune('a'+i%26)), i%(3*max))
		if i%7 == 0 {
			tb.writeLine(p)
			p += "\n"
		} else {
			tb.Write([]byte(p))
		}
		all.WriteString(p)
		if cap(tb.b) > 2*max {
			t.Fatalf("after %d writes: %d bytes held", i+1, cap(tb.b))
		}
		want := all.String()
		if len(want) > max {
			want = want[len(want)-max:]
		}
		if got := tb.String(); got != want {
			t.Fatalf("after %d writes: %q, want %q", i+1, got, want)
		}
	}
	tb = newTailBuffer(4)
	tb.Write([]byte("é"))
	tb.Write([]byte("abc")) // the last 4 bytes start inside "é"
	if got := tb.String(); got != "abc" {
		t.Fatalf("a tail starting inside a rune: %q, want %q", got, "abc")
	}
}
