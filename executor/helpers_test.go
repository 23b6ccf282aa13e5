package executor_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onetick/onetick/executor"
)

func TestMain(m *testing.M) {
	// The command executor re-executes this binary as its supervisor; this
	// call turns those processes into supervisors, and lets NewCommand work.
	executor.MaybeSupervise()
	runHelperIfAsked()
	goleak.VerifyTestMain(m)
}

// entry is one captured log record, its attributes flattened to strings.
type entry struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// recorder is a slog.Handler that keeps every record and wakes waiters on
// each one, so a test waits for a log line instead of sleeping.
type recorder struct {
	mu      *sync.Mutex
	entries *[]entry
	changed *chan struct{}
	attrs   []slog.Attr
}

func newRecorder() *recorder {
	ch := make(chan struct{})
	return &recorder{mu: new(sync.Mutex), entries: new([]entry), changed: &ch}
}

func (r *recorder) Logger() *slog.Logger { return slog.New(r) }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	e := entry{Level: rec.Level, Msg: rec.Message, Attrs: map[string]string{}}
	for _, a := range r.attrs {
		e.Attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		e.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.entries = append(*r.entries, e)
	close(*r.changed)
	*r.changed = make(chan struct{})
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(append([]slog.Attr(nil), r.attrs...), as...)
	return &c
}

func (r *recorder) WithGroup(string) slog.Handler { return r } // unused by the executors

func (r *recorder) Entries() []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]entry(nil), *r.entries...)
}

// WaitFor returns the first entry satisfying match, waiting for it up to a
// generous bound (the bound only turns a hang into a failure).
func (r *recorder) WaitFor(t testing.TB, what string, match func(entry) bool) entry {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, e := range *r.entries {
			if match(e) {
				r.mu.Unlock()
				return e
			}
		}
		changed := *r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no log entry %s after 60s; got:\n%s", what, r)
		}
	}
}

// Output waits for an output line of the command (the predicate sees the
// line's text) and returns it.
func (r *recorder) Output(t testing.TB, stream string, match func(line string) bool) string {
	t.Helper()
	return r.WaitFor(t, fmt.Sprintf("on %s", stream), func(e entry) bool {
		return e.Msg == "output" && e.Attrs["stream"] == stream && match(e.Attrs["line"])
	}).Attrs["line"]
}

// Lines returns the command's output lines on stream, in order.
func (r *recorder) Lines(stream string) []string {
	var out []string
	for _, e := range r.Entries() {
		if e.Msg == "output" && e.Attrs["stream"] == stream {
			out = append(out, e.Attrs["line"])
		}
	}
	return out
}

func (r *recorder) String() string {
	var b strings.Builder
	for _, e := range r.Entries() {
		fmt.Fprintf(&b, "  %s %s %v\n", e.Level, e.Msg, e.Attrs)
	}
	return b.String()
}
