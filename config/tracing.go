package config

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Tracing sends one OpenTelemetry trace per tick to an OTLP/HTTP collector
// (docs/tracing.md). Without the section nothing is traced. After Parse
// every field holds its effective value.
type Tracing struct {
	// OTLPEndpoint is the collector's OTLP/HTTP URL, http:// or https://;
	// without a path, /v1/traces. Required in the section.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// Headers are sent with every export (an API key, a tenant). They are
	// credentials: never logged nor printed.
	Headers map[string]string `yaml:"headers"`
	// SampleRatio is the share of ticks traced, 0 to 1; default 1. The
	// decision is a function of the tick id, so every replica takes the
	// same one for a tick.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the traces' service.name; default onetick. It is
	// also part of every trace id: replicas of one fleet must share it.
	ServiceName string `yaml:"service_name"`
	// Timeout bounds one export, its retries included, and the last
	// flush at shutdown. Default 10s.
	Timeout Duration `yaml:"timeout"`
	// Line is the line of the section's key (0: no section).
	Line int `yaml:"-"`
}

// Enabled reports whether the file asks for traces.
func (t Tracing) Enabled() bool { return t.OTLPEndpoint != "" }

// ExportURL is the URL the spans are posted to: OTLPEndpoint with the
// default path when it has none.
func (t Tracing) ExportURL() string {
	u, err := url.Parse(t.OTLPEndpoint)
	if err != nil {
		return t.OTLPEndpoint
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String()
}

// tracingKeys are the keys of the tracing section.
var tracingKeys = []string{"otlp_endpoint", "headers", "sample_ratio", "service_name", "timeout"}

// Defaults and bounds of the tracing section.
const (
	DefaultTraceService = "onetick"
	DefaultTraceTimeout = 10 * time.Second
	maxTraceTimeout     = 5 * time.Minute
	maxTraceHeaders     = 64
	maxTraceHeaderValue = 8 << 10
)

// tracingReserved are the headers the exporter sets itself.
var tracingReserved = map[string]bool{"Content-Type": true, "Content-Length": true, "Content-Encoding": true,
	"Host": true, "Transfer-Encoding": true, "Connection": true}

// tracing walks the tracing section.
func (p *parser) tracing(e entry) {
	const path = "tracing"
	t := &p.f.Tracing
	t.SampleRatio, t.ServiceName, t.Timeout = 1, DefaultTraceService, Duration(DefaultTraceTimeout)
	if !e.ok() {
		return
	}
	t.Line = e.line
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return
	}
	if m == nil {
		p.errorf(e.line, path, "is empty: give otlp_endpoint, the collector's OTLP/HTTP URL (http://127.0.0.1:4318), or remove the section")
		return
	}
	first := len(p.errs)
	defer func() {
		// A header value written in another field by mistake is not
		// quoted either (short values are left: they are no secrets and
		// would garble the messages).
		for _, e := range p.errs[first:] {
			for _, v := range t.Headers {
				if len(v) >= 6 {
					e.Msg = strings.ReplaceAll(e.Msg, v, "xxxxx")
				}
			}
		}
		if !t.Enabled() {
			t.Headers = nil
		}
	}()
	sec := p.fields(p.entries(m, path), path, path, tracingKeys...)
	if x, ok := sec["headers"]; ok {
		// No message of the section quotes a value (they are secrets).
		if hs, ok := p.strMap(x, path+".headers"); ok {
			p.traceHeaders(x, hs)
			t.Headers = hs
		}
	}
	if x, ok := sec["otlp_endpoint"]; ok {
		if v, ok := p.str(x, path+".otlp_endpoint"); ok {
			if msg := checkOTLPEndpoint(v); msg != "" {
				p.errorf(x.line, path+".otlp_endpoint", "%s", msg)
			} else {
				t.OTLPEndpoint = v
			}
		}
	} else {
		p.errorf(e.line, path+".otlp_endpoint", "is required: the collector's OTLP/HTTP URL, such as http://127.0.0.1:4318 (remove the section to trace nothing)")
	}
	if x, ok := sec["sample_ratio"]; ok {
		if v, ok := p.ratio(x, path+".sample_ratio"); ok {
			t.SampleRatio = v
		}
	}
	if x, ok := sec["service_name"]; ok {
		if v, ok := p.str(x, path+".service_name"); ok {
			switch {
			case v == "":
			case len(v) > 255 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
				p.errorf(x.line, path+".service_name", "must be at most 255 bytes without control characters")
			default:
				t.ServiceName = v
			}
		}
	}
	if x, ok := sec["timeout"]; ok {
		if d, ok := p.dur(x, path+".timeout"); ok {
			switch {
			case d < 0:
				p.errorf(x.line, path+".timeout", "must not be negative, got %s", d.D())
			case d == 0:
			case d.D() < 100*time.Millisecond || d.D() > maxTraceTimeout:
				p.errorf(x.line, path+".timeout", "must be between 100ms and %s, got %s", maxTraceTimeout, d.D())
			default:
				t.Timeout = d
			}
		}
	}
}

// traceHeaders checks the export headers by name; a message never quotes
// a value.
func (p *parser) traceHeaders(x entry, hs map[string]string) {
	const path = "tracing.headers"
	if len(hs) > maxTraceHeaders {
		p.errorf(x.line, path, "must hold at most %d headers, got %d", maxTraceHeaders, len(hs))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(hs)) {
		v := hs[k]
		field := path + "." + keyText(k)
		switch {
		case !validToken(k):
			p.errorf(x.line, field, "is not a valid header name")
		case tracingReserved[http.CanonicalHeaderKey(k)]:
			p.errorf(x.line, field, "is set by the exporter itself")
		case len(v) > maxTraceHeaderValue:
			p.errorf(x.line, field, "value is longer than %d bytes", maxTraceHeaderValue)
		case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }):
			p.errorf(x.line, field, "value holds a control character (a line break?); the value is not shown")
		}
	}
}

// validToken reports whether s is an HTTP header name (RFC 9110 token).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// checkOTLPEndpoint returns what is wrong with an OTLP/HTTP URL, or "".
// The URL may hold no credentials (they belong in headers) and is quoted
// without them.
func checkOTLPEndpoint(v string) string {
	if v == "" {
		return "is empty: give the collector's OTLP/HTTP URL, such as http://127.0.0.1:4318"
	}
	u, err := url.Parse(v)
	if err != nil {
		return "is not a URL (the value is not shown: it may hold credentials)"
	}
	switch {
	case u.User != nil:
		return "must not hold credentials: send them in tracing.headers (for example authorization: Bearer ${OTLP_TOKEN})"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("must be an http:// or https:// URL (OTLP over HTTP), got scheme %q", short(u.Scheme))
	case u.Host == "" || u.Hostname() == "":
		return "has no host"
	case u.RawQuery != "" || u.Fragment != "":
		return "must have no query or fragment"
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("has an invalid port %q", short(port))
		}
	}
	return ""
}

// ratio reads a number from 0 to 1.
func (p *parser) ratio(e entry, path string) (float64, bool) {
	d := deref(e.val)
	if d == nil || d.Kind != yaml.ScalarNode {
		p.errorf(e.line, path, "must be a number from 0 to 1, got %s", p.kindText(d))
		return 0, false
	}
	s := p.scalar(d, path)
	var v float64
	if (s.ShortTag() != "!!float" && s.ShortTag() != "!!int") || decodeScalar(s, &v) != nil || v != v {
		p.errorf(e.line, path, "must be a number from 0 to 1, got %q", short(s.Value))
		return 0, false
	}
	if v < 0 || v > 1 {
		p.errorf(e.line, path, "must be from 0 to 1, got %v", v)
		return 0, false
	}
	return v, true
}

// tracingWarnings: headers (credentials) sent in clear text to a
// collector that is not on this host.
func (f *File) tracingWarnings() []*Error {
	t := f.Tracing
	if !t.Enabled() || len(t.Headers) == 0 {
		return nil
	}
	u, err := url.Parse(t.OTLPEndpoint)
	if err != nil || u.Scheme != "http" {
		return nil
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	const field = "tracing.otlp_endpoint"
	return []*Error{{File: f.Path, Line: f.line(field, t.Line), Field: field,
		Msg: "is http:// to another host: tracing.headers (credentials) cross the network in clear text; use https://"}}
}
