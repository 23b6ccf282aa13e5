package executor

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context of the attempt: when ctx carries a valid
// OpenTelemetry span (onetick's attempt span when tracing is configured,
// or a Go handler's own), an HTTP call carries it in the traceparent and
// tracestate headers, and a command in the TRACEPARENT and TRACESTATE
// variables (the OpenTelemetry convention for environment carriers), so
// that what the tick runs joins the tick's trace. Without a span nothing
// is added.

var traceContext propagation.TraceContext

// setTraceHeaders sets traceparent (and tracestate) on h from the span of
// ctx; it replaces a configured header of the same name.
func setTraceHeaders(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}

// traceEnv returns TRACEPARENT (and TRACESTATE) from the span of ctx.
func traceEnv(ctx context.Context) []string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	var env []string
	if v := c.Get("traceparent"); v != "" {
		env = append(env, "TRACEPARENT="+v)
	}
	if v := c.Get("tracestate"); v != "" {
		env = append(env, "TRACESTATE="+v)
	}
	return env
}
