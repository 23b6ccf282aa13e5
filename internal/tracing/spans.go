package tracing

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor"
	"github.com/onetick/onetick/worker"
)

// Attribute keys.
const (
	keyJob        = attribute.Key("onetick.job")
	keySlot       = attribute.Key("onetick.slot")
	keyTick       = attribute.Key("onetick.tick")
	keyEpoch      = attribute.Key("onetick.epoch")
	keyReplica    = attribute.Key("onetick.replica")
	keyKind       = attribute.Key("onetick.kind")
	keyAttempt    = attribute.Key("onetick.attempt")
	keyDeliveries = attribute.Key("onetick.deliveries")
	keyOutcome    = attribute.Key("onetick.outcome")
	keyExitCode   = attribute.Key("process.exit.code")
	keyHTTPStatus = attribute.Key("http.response.status_code")
)

// maxStatusMessage bounds the error text a span carries.
const maxStatusMessage = 1024

// Sink returns a Sink for the scheduler that makes a claim span for every
// tick it delivers, then passes the ticks on to next (nil: none). The
// span covers the claim call (onetick.ClaimWindow), or is an instant when
// the context has no window.
func (t *Tracer) Sink(next onetick.Sink) onetick.Sink {
	return onetick.SinkFunc(func(ctx context.Context, ticks []onetick.TickRecord) error {
		now := time.Now()
		sent, recv, ok := onetick.ClaimWindow(ctx)
		if !ok {
			sent, recv = now, now
		}
		for _, tk := range ticks {
			t.claimSpan(tk, sent, recv)
		}
		if next == nil {
			return nil
		}
		return next.Deliver(ctx, ticks)
	})
}

func (t *Tracer) claimSpan(tk onetick.TickRecord, sent, recv time.Time) {
	tid, sid := tickIDs(t.service, tk.Tick)
	ctx := context.WithValue(context.Background(), rootKey{}, rootIDs{trace: tid, span: sid})
	attrs := []attribute.KeyValue{
		str(keyJob, tk.Job), keySlot.String(tk.Slot.String()), str(keyTick, tk.Tick),
		keyEpoch.Int64(int64(tk.Epoch)), str(keyReplica, tk.Replica),
	}
	if tk.Kind != "" {
		attrs = append(attrs, str(keyKind, tk.Kind))
	}
	_, span := t.tr.Start(ctx, valid("claim "+tk.Job), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(sent), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(recv))
}

// OnAttempt is worker.Config.OnAttempt: it starts the attempt's span,
// a child of the tick's claim span, and puts it in the handler's context
// (so the executors pass its traceparent on); the span ends when the
// attempt's result is settled.
func (t *Tracer) OnAttempt(ctx context.Context, task *worker.Task) (context.Context, func(worker.AttemptEnd)) {
	tid, sid := tickIDs(t.service, task.Tick)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	ctx, span := t.tr.Start(ctx, valid("attempt "+task.Job), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(str(keyJob, task.Job), keySlot.String(task.Slot.String()), str(keyTick, task.Tick),
			keyAttempt.Int(task.Attempt), keyEpoch.Int64(int64(task.Epoch)), keyDeliveries.Int(task.Deliveries)))
	if !span.IsRecording() {
		// Not sampled: the context still carries the span's ids (with
		// the sampled flag off) for the executors to pass on.
		return ctx, nil
	}
	return ctx, func(e worker.AttemptEnd) {
		span.SetAttributes(keyOutcome.String(e.Outcome()))
		exit, status := e.Result.Exit, e.Result.Status
		var xe *executor.ExitError
		if exit == nil && errors.As(e.Err, &xe) && xe.Signal == 0 {
			exit = &xe.Code
		}
		var he *executor.HTTPError
		if status == 0 && errors.As(e.Err, &he) {
			status = he.StatusCode
		}
		if exit != nil {
			span.SetAttributes(keyExitCode.Int(*exit))
		}
		if status != 0 {
			span.SetAttributes(keyHTTPStatus.Int(status))
		}
		if e.Err != nil {
			span.SetStatus(codes.Error, statusMessage(e.Err))
		}
		span.End()
	}
}

// statusMessage is err's text cut to maxStatusMessage bytes, as valid
// UTF-8 (protobuf refuses anything else, and a command's stderr may hold
// any bytes).
func statusMessage(err error) string {
	msg := valid(err.Error())
	if len(msg) > maxStatusMessage {
		n := maxStatusMessage
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n]
	}
	return msg
}

// valid returns s as valid UTF-8: an export holding anything else fails
// whole.
func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func str(k attribute.Key, v string) attribute.KeyValue { return k.String(valid(v)) }
