package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/onetick/onetick"
)

// What `why` and `runs` show of an attempt's result (onetick.Result).

const (
	// whyOutputs is how many of a record's newest attempts `why` shows
	// the output of, and whyOutputLines how many of its last lines.
	whyOutputs     = 2
	whyOutputLines = 20
)

// resultText is an attempt's exit code or HTTP status, or "".
func resultText(r onetick.Result) string {
	var s []string
	if r.Exit != nil {
		s = append(s, fmt.Sprintf("exit %d", *r.Exit))
	}
	if r.Status != 0 {
		s = append(s, fmt.Sprintf("status %d", r.Status))
	}
	return strings.Join(s, ", ")
}

// lastResult is the result of a record's newest attempt that reported
// one, or "".
func lastResult(r onetick.Run) string {
	for i := len(r.Events) - 1; i >= 0; i-- {
		if x := resultText(r.Events[i].Result); x != "" {
			return x
		}
	}
	return ""
}

// durationText rounds d to what a reader wants: milliseconds, or
// microseconds below one.
func durationText(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// outputs prints the last lines of the output of r's newest attempts
// that kept one, oldest first, so the newest ends the screen.
func outputs(w io.Writer, r onetick.Run) {
	var idx []int
	for i := len(r.Events) - 1; i >= 0 && len(idx) < whyOutputs; i-- {
		if r.Events[i].Output != "" {
			idx = append(idx, i)
		}
	}
	for k := len(idx) - 1; k >= 0; k-- {
		e := r.Events[idx[k]]
		lines := strings.Split(strings.TrimSuffix(e.Output, "\n"), "\n")
		which := ""
		if len(lines) > whyOutputLines {
			which = fmt.Sprintf(" (last %d lines)", whyOutputLines)
			lines = lines[len(lines)-whyOutputLines:]
		}
		what := e.What
		if e.Attempt != 0 {
			what = fmt.Sprintf("attempt %d, %s", e.Attempt, e.What)
		}
		fprintf(w, "output of %s%s:\n", what, which)
		for _, l := range lines {
			fprintf(w, "  | %s\n", printable(l))
		}
	}
}
