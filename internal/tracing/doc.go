// Package tracing sends one OpenTelemetry trace per tick to an OTLP/HTTP
// collector: the leader's claim span and every worker's attempt spans of
// the same tick land in one trace, across processes, without any context
// passed through the store.
//
// # One trace per tick, by construction
//
// A tick's trace id is derived from its identity: the first 16 bytes of
// SHA-256(service name, 0, tick id). The claim span's id is the next 8
// bytes of the same hash. So the leader that enqueues the tick (Sink) and
// each worker that runs an attempt of it (OnAttempt), on whatever replica
// and however late (a retry, a takeover, a dead letter replayed days
// later), compute the same trace id, and each attempt span names the
// claim span as its parent. Replicas of one fleet must share the service
// name: it is part of the hash, so two fleets that both run a job named
// backup do not share traces.
//
// Sampling is the ratio sampler over the trace id (sdktrace's
// TraceIDRatioBased): every replica takes the same decision for a tick
// with no coordination, so a tick is traced whole or not at all.
//
// # Spans
//
//	claim JOB     leader, kind producer: the claim call that enqueued the tick
//	              (from its sending to its answer); attributes onetick.job,
//	              onetick.slot, onetick.tick, onetick.epoch, onetick.replica,
//	              onetick.kind
//	attempt JOB   worker, kind consumer, child of the claim span: one attempt,
//	              from its handler's start to its result recorded in the store;
//	              attributes onetick.job, onetick.slot, onetick.tick,
//	              onetick.attempt, onetick.epoch, onetick.deliveries,
//	              onetick.outcome (succeeded, retried, dead, released, lost),
//	              process.exit.code or http.response.status_code when known;
//	              status Error with the attempt's error when it failed
//
// The attempt span is in the handler's context, so the command executor
// passes it on as TRACEPARENT and the HTTP executor as the traceparent
// header (package executor).
//
// Not covered: ticks enqueued by onetick trigger and onetick backfill have
// no claim span (their attempts name a parent the collector never
// receives); a claim span is made only for ticks the scheduler claimed.
//
// # Export
//
// Spans are batched (the SDK's batch processor: at most 2048 waiting) and
// posted as OTLP/HTTP protobuf, gzip-compressed, with the configured
// headers. A span that finds 2048 spans waiting is dropped, not queued: a
// collector that is down never slows the scheduler. tracing_spans_total
// {result="exported"|"dropped"} counts the spans the collector took and
// those lost (export failed after its retries, or the queue was full). The
// first failure is logged at WARN, and the recovery at INFO; the header
// values are never logged.
package tracing
