package executor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"
)

const (
	// MaxLineBytes bounds one logged output line; the rest of a longer line
	// is dropped and the entry marked truncated.
	MaxLineBytes = 8 << 10
	// stderrTailLines and stderrTailBytes bound what of the command's
	// standard error goes into the error message of a failed attempt.
	stderrTailLines = 5
	stderrTailBytes = 300
)

// lineLogger is the io.Writer a command's stdout or stderr is copied into:
// it logs every line with the run's attributes and, for stderr, keeps the
// last few lines for the error message. exec.Cmd calls Write from one
// goroutine per stream; the mutex covers reading the tail afterwards.
type lineLogger struct {
	log    *slog.Logger
	stream string
	keep   bool // keep a tail (stderr)
	// out receives every line, both streams' lines in the order they
	// came: the output's tail that the attempt reports.
	out *tailBuffer

	mu        sync.Mutex
	buf       []byte // the current line, up to MaxLineBytes
	truncated bool   // the current line lost bytes past MaxLineBytes
	tail      []string
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := MaxLineBytes - len(l.buf); len(chunk) > room {
			l.buf = append(l.buf, chunk[:room]...)
			l.truncated = true
		} else {
			l.buf = append(l.buf, chunk...)
		}
		if i < 0 {
			break
		}
		l.emit()
		p = p[i+1:]
	}
	return n, nil
}

// flush logs a last line that had no newline.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 || l.truncated {
		l.emit()
	}
}

func (l *lineLogger) emit() {
	line := strings.TrimSuffix(string(l.buf), "\r")
	attrs := []slog.Attr{slog.String("stream", l.stream), slog.String("line", line)}
	if l.truncated {
		attrs = append(attrs, slog.Bool("truncated", true))
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "output", attrs...)
	if l.out != nil {
		l.out.writeLine(line)
	}
	if l.keep {
		if len(line) > stderrTailBytes {
			line = line[:stderrTailBytes] + "…"
		}
		l.tail = append(l.tail, line)
		if len(l.tail) > stderrTailLines {
			l.tail = l.tail[1:]
		}
	}
	l.buf, l.truncated = l.buf[:0], false
}

func (l *lineLogger) lastLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.tail...)
}

// tailBuffer keeps the last max bytes written to it, in at most 2*max
// bytes of memory however much is written: the output a command's
// attempt reports, the end of an HTTP response body.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer {
	return &tailBuffer{max: max, b: make([]byte, 0, 2*max)}
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	addTail(t, p)
	return len(p), nil
}

// writeLine writes line and a newline, together.
func (t *tailBuffer) writeLine(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	addTail(t, line)
	addTail(t, "\n")
}

// addTail appends p to t's buffer, dropping its front as needed.
func addTail[B string | []byte](t *tailBuffer, p B) {
	if len(p) >= t.max {
		t.b = append(t.b[:0], p[len(p)-t.max:]...)
		return
	}
	if len(t.b)+len(p) > 2*t.max {
		// Slide: keep what, with p, makes the last max bytes.
		keep := t.max - len(p)
		t.b = t.b[:copy(t.b, t.b[len(t.b)-keep:])]
	}
	t.b = append(t.b, p...)
}

// String returns the last max bytes written, from a rune boundary.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tailString(string(t.b), t.max)
}

// tailString is the end of s, at most n bytes, starting on a rune
// boundary.
func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
