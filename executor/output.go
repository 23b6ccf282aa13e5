package executor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
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
