// Package otlptest is an in-process OpenTelemetry collector for tests: an
// OTLP/HTTP receiver that decodes what an exporter posts (protobuf,
// gzip or not) with the OTLP protocol's own types and keeps every span.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	TraceID, SpanID, ParentSpanID string // hex
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Start, End                    time.Time
	// Attrs holds string, int64, float64 and bool values.
	Attrs map[string]any
	// Resource holds the resource's attributes (service.name ...).
	Resource      map[string]any
	StatusCode    tracepb.Status_StatusCode
	StatusMessage string
}

// Receiver is an OTLP/HTTP collector on a loopback port.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests []http.Header
	fail     int
	failBody string
	changed  chan struct{} // closed and replaced at each request
}

// New starts a Receiver; Close stops it.
func New() *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// URL is the export URL (…/v1/traces).
func (r *Receiver) URL() string { return r.srv.URL + "/v1/traces" }

// Endpoint is the base URL, without the path.
func (r *Receiver) Endpoint() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// FailWith makes the receiver answer every later export with status and
// body (0: accept again).
func (r *Receiver) FailWith(status int, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail, r.failBody = status, body
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests returns the headers of every export request so far.
func (r *Receiver) Requests() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.requests...)
}

// Await waits until done holds for the spans received, and returns them;
// it returns an error when ctx ends first.
func (r *Receiver) Await(ctx context.Context, done func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return spans, fmt.Errorf("otlptest: %w; %d spans received", ctx.Err(), len(spans))
		}
	}
}

// AwaitRequests waits for at least n export requests.
func (r *Receiver) AwaitRequests(ctx context.Context, n int) ([]http.Header, error) {
	for {
		r.mu.Lock()
		reqs, changed := append([]http.Header(nil), r.requests...), r.changed
		r.mu.Unlock()
		if len(reqs) >= n {
			return reqs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return reqs, fmt.Errorf("otlptest: %w; %d requests received", ctx.Err(), len(reqs))
		}
	}
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "unsupported content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	data, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, "bad protobuf: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer func() {
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}()
	r.requests = append(r.requests, req.Header.Clone())
	if r.fail != 0 {
		http.Error(w, r.failBody, r.fail)
		return
	}
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attrs: attrs(s.GetAttributes()), Resource: res,
					StatusCode: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
				})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = v.GetIntValue()
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.GetDoubleValue()
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = v.GetBoolValue()
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}
