package worker

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/onetick/onetick"
)

// Report tells the worker what the running attempt produced, beside its
// error: a command's exit code, an HTTP status, the tail of its output.
// ctx is the handler's context (or one derived from it). The worker puts
// the result on the attempt's outcome, and a store that keeps the run
// ledger writes it with the outcome's event in the same step (succeeded,
// retried, dead; not a release).
//
// Each call replaces the fields it sets (a non-nil Exit, a non-zero
// Status or Duration, a non-empty Output) and keeps the others, so an
// executor's report and the handler's own can add up. Output is cut to
// its last onetick.MaxEventOutput bytes. Duration, when no report sets
// it, is the handler's run time by the worker's clock. Report does
// nothing outside a handler's context and once the handler returned; it
// is safe for concurrent use.
func Report(ctx context.Context, r onetick.Result) {
	rep, _ := ctx.Value(reportKey{}).(*reporter)
	if rep == nil {
		return
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if rep.closed {
		return
	}
	if r.Exit != nil {
		x := *r.Exit
		rep.r.Exit = &x
	}
	if r.Status != 0 {
		rep.r.Status = r.Status
	}
	if r.Duration != 0 {
		rep.r.Duration = r.Duration
	}
	if r.Output != "" {
		rep.r.Output = outputTail(r.Output)
	}
}

type reportKey struct{}

// reporter collects one attempt's reports.
type reporter struct {
	mu     sync.Mutex
	r      onetick.Result
	closed bool
}

// withReporter returns ctx carrying a fresh reporter.
func withReporter(ctx context.Context) (context.Context, *reporter) {
	rep := &reporter{}
	return context.WithValue(ctx, reportKey{}, rep), rep
}

// close ends the attempt's reports and returns the result, its Duration
// set to took unless a report set it.
func (rep *reporter) close(took time.Duration) onetick.Result {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	rep.closed = true
	r := rep.r
	if r.Duration == 0 {
		r.Duration = took
	}
	return r
}

// outputTail is the end of s, at most onetick.MaxEventOutput bytes,
// starting on a rune boundary.
func outputTail(s string) string {
	if len(s) <= onetick.MaxEventOutput {
		return s
	}
	i := len(s) - onetick.MaxEventOutput
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
