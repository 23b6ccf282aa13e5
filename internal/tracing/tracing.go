package tracing

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Tracer.
type Config struct {
	// URL is where spans are posted: http:// or https://, with its path
	// (config.Tracing.ExportURL). Required.
	URL string
	// Headers are sent with every export. Never logged.
	Headers map[string]string
	// SampleRatio is the share of ticks traced, 0 to 1.
	SampleRatio float64
	// ServiceName is service.name and part of every trace id. Default
	// onetick.
	ServiceName string
	// Instance is service.instance.id: the replica.
	Instance string
	// Version is service.version, if known.
	Version string
	// Timeout bounds one export with its retries. Default 10s.
	Timeout time.Duration
	// Logger gets the export failures (without headers). Default
	// slog.Default().
	Logger *slog.Logger
	// Registerer gets tracing_spans_total; nil: not registered.
	Registerer prometheus.Registerer
	// BatchDelay is the longest an ended span waits for its batch; 0:
	// the SDK's default (5s, or OTEL_BSP_SCHEDULE_DELAY).
	BatchDelay time.Duration
}

// DefaultService is the default service name.
const DefaultService = "onetick"

// maxQueue is how many ended spans may wait for export.
const maxQueue = 2048

// Tracer makes a tick's spans and exports them.
type Tracer struct {
	tp      *sdktrace.TracerProvider
	tr      trace.Tracer
	service string
	gate    *gate
	timeout time.Duration
}

// New starts a Tracer. It makes no connection: the first export does.
// It routes OpenTelemetry's own error reports (process-global) to
// cfg.Logger at DEBUG; the export failures are logged by the Tracer.
func New(cfg Config) (*Tracer, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = DefaultService
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 || cfg.SampleRatio != cfg.SampleRatio {
		return nil, fmt.Errorf("tracing: sample ratio %v is not from 0 to 1", cfg.SampleRatio)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		// The URL is not quoted: it may hold credentials.
		return nil, errors.New("tracing: the export URL must be http:// or https:// with a host and without credentials")
	}
	path := u.Path
	if path == "" || path == "/" {
		path = "/v1/traces"
	}
	// Every setting the file makes is pinned here, over the standard
	// OTEL_EXPORTER_OTLP_* variables (the URL's scheme decides TLS, not
	// OTEL_EXPORTER_OTLP_INSECURE); what the file does not set (TLS
	// certificates, headers when it has none) the variables may.
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(u.Scheme + "://" + u.Host + path),
		otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf),
		otlptracehttp.WithTimeout(cfg.Timeout),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond,
			MaxInterval: 5 * time.Second, MaxElapsedTime: cfg.Timeout}),
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	m := newMetrics(cfg.Registerer)
	g := &gate{max: maxQueue, dropped: m.dropped}
	counted := &countingExporter{SpanExporter: exp, gate: g, exported: m.exported, dropped: m.dropped,
		log: cfg.Logger, url: u.Scheme + "://" + u.Host + path}
	bopts := []sdktrace.BatchSpanProcessorOption{sdktrace.WithMaxQueueSize(maxQueue), sdktrace.WithExportTimeout(cfg.Timeout)}
	if cfg.BatchDelay > 0 {
		bopts = append(bopts, sdktrace.WithBatchTimeout(cfg.BatchDelay))
	}
	g.next = sdktrace.NewBatchSpanProcessor(counted, bopts...)

	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.Instance))
	}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(cfg.SampleRatio)),
		sdktrace.WithIDGenerator(idGenerator{}),
		sdktrace.WithSpanProcessor(g),
	)
	log := cfg.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Debug("tracing: opentelemetry reported an error", "err", err)
	}))
	otel.SetLogger(logr.FromSlogHandler(log.With("component", "opentelemetry").Handler()))
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/onetick/onetick"), service: cfg.ServiceName, gate: g,
		timeout: cfg.Timeout}, nil
}

// ForceFlush exports the spans ended so far.
func (t *Tracer) ForceFlush(ctx context.Context) error { return t.tp.ForceFlush(ctx) }

// Shutdown exports the spans ended so far, within ctx and at most the
// export timeout, and stops the Tracer: later spans are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.tp.Shutdown(ctx)
}

// TraceID is the trace id of the tick's trace in the named service: the
// first 16 bytes of SHA-256(service, 0, tick).
func TraceID(service, tick string) trace.TraceID {
	tid, _ := tickIDs(service, tick)
	return tid
}

// ClaimSpanID is the id of the tick's claim span: bytes 16 to 24 of the
// same hash.
func ClaimSpanID(service, tick string) trace.SpanID {
	_, sid := tickIDs(service, tick)
	return sid
}

func tickIDs(service, tick string) (trace.TraceID, trace.SpanID) {
	h := sha256.New()
	h.Write([]byte(service))
	h.Write([]byte{0})
	h.Write([]byte(tick))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	// An all-zero id is invalid; 2^-64 odds, but never an invalid span.
	if !tid.IsValid() {
		tid[15] = 1
	}
	if !sid.IsValid() {
		sid[7] = 1
	}
	return tid, sid
}

// rootKey marks a context whose next root span takes the given ids.
type rootKey struct{}

type rootIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// idGenerator gives a root span the ids its context names (the claim
// span), and random ids otherwise.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if r, ok := ctx.Value(rootKey{}).(rootIDs); ok {
		return r.trace, r.span
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}
