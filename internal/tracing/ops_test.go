package tracing_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/tracing/otlptest"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/worker"
)

// TestTracingTriggerAndBackfill: a trigger's and a backfill's ticks get
// their claim span from Ops.Sink, and the worker's attempt spans are its
// children in the same trace.
func TestTracingTriggerAndBackfill(t *testing.T) {
	rc := otlptest.New()
	defer rc.Close()
	logs := &syncBuffer{}
	api := newTracer(t, rc, "api-1", 1, logs, nil)
	wtr := newTracer(t, rc, "worker-1", 1, logs, nil)

	b := memory.New(memory.Options{})
	defer b.Close()
	hourly, err := cron.Parse("0 * * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := &onetick.Ops{Backend: b, Jobs: []onetick.Job{{Name: "report", Schedule: hourly, Stream: "s"}}, Sink: api.Sink(nil)}
	w, err := worker.New(worker.Config{Store: b.WorkerStore(""), Consumer: "worker-1", OnAttempt: wtr.OnAttempt})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("report", worker.HandlerFunc(func(context.Context, *worker.Task) error { return nil }),
		worker.WithStream("s"), worker.WithOverlap(worker.OverlapAllow)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	tr, err := ops.Trigger(ctx, "report", "k1", "", onetick.Actor{Who: "test"})
	if err != nil || !tr.Enqueued {
		t.Fatalf("trigger: %+v %v", tr, err)
	}
	now := time.Now()
	bf, err := ops.Backfill(ctx, "report", onetick.BackfillRequest{From: now.Add(-3 * time.Hour), To: now.Add(-time.Minute)}, onetick.Actor{Who: "test"})
	if err != nil || bf.Enqueued < 2 {
		t.Fatalf("backfill: %+v %v", bf, err)
	}
	want := 1 + bf.Enqueued
	wait, cancelWait := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelWait()
	var spans []otlptest.Span
	if spans, err = rc.Await(wait, func(spans []otlptest.Span) bool {
		claims, attempts := 0, 0
		for _, s := range spans {
			switch {
			case strings.HasPrefix(s.Name, "claim "):
				claims++
			case strings.HasPrefix(s.Name, "attempt "):
				attempts++
			}
		}
		return claims == want && attempts == want
	}); err != nil {
		t.Fatalf("spans: %v (%d arrived)", err, len(rc.Spans()))
	}
	claims := map[string]otlptest.Span{}
	kinds := map[string]int{}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "claim ") {
			claims[s.Attrs["onetick.tick"].(string)] = s
			kind, _ := s.Attrs["onetick.kind"].(string)
			kinds[kind]++
		}
	}
	if kinds[onetick.KindTrigger] != 1 || kinds[onetick.KindBackfill] != bf.Enqueued {
		t.Errorf("claim spans by kind %v", kinds)
	}
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "attempt ") {
			continue
		}
		c, ok := claims[s.Attrs["onetick.tick"].(string)]
		if !ok || s.TraceID != c.TraceID || s.ParentSpanID != c.SpanID {
			t.Errorf("attempt %v: trace %s parent %s, claim %+v", s.Attrs["onetick.tick"], s.TraceID, s.ParentSpanID, c)
		}
	}
}
