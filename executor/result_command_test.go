//go:build linux

package executor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor"
)

// reported runs x once and returns its error and what it reported.
func reported(t *testing.T, x executor.Executor, r executor.Run) (error, onetick.Result, int) {
	t.Helper()
	var res onetick.Result
	n := 0
	r.Report = func(got onetick.Result) { res = got; n++ }
	err := x.Execute(context.Background(), r)
	return err, res, n
}

// A command reports its exit code and the end of what it printed, both
// streams in one, once per attempt; a command killed by a signal reports
// no exit code.
func TestCommandReportsExitAndOutput(t *testing.T) {
	c, _ := newCommand(t, executor.CommandConfig{Argv: sh(`echo "to stdout"; echo "to stderr" >&2; printf 'no newline'; exit 3`)})
	err, res, n := reported(t, c, testRun())
	if err == nil || n != 1 || res.Exit == nil || *res.Exit != 3 || res.Status != 0 {
		t.Fatalf("Execute = %v; reported %d times: %+v, want exit 3 once", err, n, res)
	}
	for _, line := range []string{"to stdout\n", "to stderr\n", "no newline\n"} {
		if !strings.Contains(res.Output, line) {
			t.Errorf("output %q lacks %q", res.Output, line)
		}
	}

	c, _ = newCommand(t, executor.CommandConfig{Argv: sh(`echo fine`)})
	err, res, _ = reported(t, c, testRun())
	if err != nil || res.Exit == nil || *res.Exit != 0 || res.Output != "fine\n" {
		t.Fatalf("Execute = %v, reported %+v, want exit 0 and its line", err, res)
	}

	c, _ = newCommand(t, executor.CommandConfig{Argv: sh(`echo before; kill -USR1 $$`)})
	err, res, _ = reported(t, c, testRun())
	if err == nil || res.Exit != nil || res.Output != "before\n" {
		t.Fatalf("Execute = %v, reported %+v, want no exit code and the output", err, res)
	}
}

// A command that prints megabytes reports only the last MaxEventOutput
// bytes, ending with its last line (the buffer's bound itself is
// TestTailBufferBounded).
func TestCommandOutputTailBounded(t *testing.T) {
	c, _ := newCommand(t, executor.CommandConfig{Argv: sh(`seq 1 500000; echo last line`),
		Logger: slog.New(slog.DiscardHandler)})
	err, res, _ := reported(t, c, testRun())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) > onetick.MaxEventOutput || len(res.Output) < onetick.MaxEventOutput-16 {
		t.Fatalf("output of %d bytes, want about %d", len(res.Output), onetick.MaxEventOutput)
	}
	if !strings.HasSuffix(res.Output, "499999\n500000\nlast line\n") {
		t.Fatalf("output ends %q", res.Output[len(res.Output)-40:])
	}
}
