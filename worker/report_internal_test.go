package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// Reports add up field by field; Output is cut to its tail; the worker's
// measure stands in for a Duration no report set; nothing counts after
// the attempt ended or outside a handler's context.
func TestReportMerges(t *testing.T) {
	Report(context.Background(), onetick.Result{Status: 200}) // no attempt: ignored
	ctx, rep := withReporter(context.Background())
	one, two := 1, 2
	Report(ctx, onetick.Result{Exit: &one, Output: "early"})
	one = 9 // Report copied the value
	Report(ctx, onetick.Result{Status: 503, Output: strings.Repeat("é", onetick.MaxEventOutput) + "end"})
	r := rep.close(time.Second)
	Report(ctx, onetick.Result{Exit: &two}) // after the attempt: ignored
	if r.Exit == nil || *r.Exit != 1 || r.Status != 503 || r.Duration != time.Second {
		t.Fatalf("result %+v", r)
	}
	if len(r.Output) > onetick.MaxEventOutput || !strings.HasSuffix(r.Output, "éend") || !strings.HasPrefix(r.Output, "é") {
		t.Fatalf("output of %d bytes: %q...", len(r.Output), r.Output[:8])
	}
	if got := rep.close(time.Minute); *got.Exit != 1 {
		t.Fatalf("a report after the end changed the result: %+v", got)
	}
	ctx, rep = withReporter(context.Background())
	Report(ctx, onetick.Result{Duration: time.Millisecond})
	if r := rep.close(time.Second); r.Duration != time.Millisecond {
		t.Fatalf("a reported duration: %s", r.Duration)
	}
}
