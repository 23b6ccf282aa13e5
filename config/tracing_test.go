package config_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick/config"
)

func TestTracingSection(t *testing.T) {
	f, err := config.Parse("c.yaml", []byte("jobs: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Tracing.Enabled() {
		t.Fatalf("tracing on without the section: %+v", f.Tracing)
	}
	f, err = config.Parse("c.yaml", []byte("tracing:\n  otlp_endpoint: http://127.0.0.1:4318\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr := f.Tracing
	if !tr.Enabled() || tr.SampleRatio != 1 || tr.ServiceName != "onetick" || tr.Timeout.D() != 10*time.Second {
		t.Fatalf("defaults %+v", tr)
	}
	if got := tr.ExportURL(); got != "http://127.0.0.1:4318/v1/traces" {
		t.Fatalf("export URL %q", got)
	}
	doc := "tracing:\n  otlp_endpoint: https://otel.example.com/custom/traces\n  headers: {authorization: Bearer ${TOK}, x-tenant: a}\n" +
		"  sample_ratio: 0.25\n  service_name: billing-cron\n  timeout: 3s\n"
	t.Setenv("ONETICK_TEST_OTLP_TOKEN", "s3cret-token")
	doc = strings.ReplaceAll(doc, "${TOK}", "${ONETICK_TEST_OTLP_TOKEN}")
	f, err = config.Parse("c.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tr = f.Tracing
	if tr.SampleRatio != 0.25 || tr.ServiceName != "billing-cron" || tr.Timeout.D() != 3*time.Second ||
		!maps.Equal(tr.Headers, map[string]string{"authorization": "Bearer s3cret-token", "x-tenant": "a"}) {
		t.Fatalf("parsed %+v", tr)
	}
	if got := tr.ExportURL(); got != "https://otel.example.com/custom/traces" {
		t.Fatalf("export URL %q", got)
	}
	f, err = config.Parse("c.yaml", []byte("tracing:\n  otlp_endpoint: http://127.0.0.1:4318\n  sample_ratio: 0\n"))
	if err != nil || f.Tracing.SampleRatio != 0 {
		t.Fatalf("sample_ratio 0: %v %+v", err, f.Tracing)
	}
}

func TestTracingErrors(t *testing.T) {
	const secret = "hunter2-very-secret"
	for doc, want := range map[string]string{
		"tracing:\n":                                                                          "c.yaml:1: tracing: is empty",
		"tracing:\n  sample_ratio: 1\n":                                                       "c.yaml:1: tracing.otlp_endpoint: is required",
		"tracing:\n  otlp_endpoint: \"\"\n":                                                   "c.yaml:2: tracing.otlp_endpoint: is empty",
		"tracing:\n  otlp_endpoint: grpc://h:4317\n":                                          `c.yaml:2: tracing.otlp_endpoint: must be an http:// or https:// URL (OTLP over HTTP), got scheme "grpc"`,
		"tracing:\n  otlp_endpoint: http://:4318\n":                                           "c.yaml:2: tracing.otlp_endpoint: has no host",
		"tracing:\n  otlp_endpoint: http://h:99999\n":                                         `has an invalid port "99999"`,
		"tracing:\n  otlp_endpoint: http://h/?a=1\n":                                          "must have no query or fragment",
		"tracing:\n  otlp_endpoint: http://h\n  x: 1\n":                                       "c.yaml:3: tracing.x: unknown field",
		"tracing:\n  otlp_endpoint: http://u:" + secret + "@h:4318\n":                         "c.yaml:2: tracing.otlp_endpoint: must not hold credentials",
		"tracing:\n  otlp_endpoint: http://h\n  sample_ratio: 1.5\n":                          "c.yaml:3: tracing.sample_ratio: must be from 0 to 1, got 1.5",
		"tracing:\n  otlp_endpoint: http://h\n  sample_ratio: half\n":                         `c.yaml:3: tracing.sample_ratio: must be a number from 0 to 1, got "half"`,
		"tracing:\n  otlp_endpoint: http://h\n  sample_ratio: .nan\n":                         `must be a number from 0 to 1`,
		"tracing:\n  otlp_endpoint: http://h\n  timeout: 1ms\n":                               "c.yaml:3: tracing.timeout: must be between 100ms and 5m0s",
		"tracing:\n  otlp_endpoint: http://h\n  timeout: -1s\n":                               "c.yaml:3: tracing.timeout: must not be negative",
		"tracing:\n  otlp_endpoint: http://h\n  service_name: \"a\\nb\"\n":                    "tracing.service_name: must be at most 255 bytes without control characters",
		"tracing:\n  otlp_endpoint: http://h\n  headers: {\"bad name\": x}\n":                 `c.yaml:3: tracing.headers."bad name": is not a valid header name`,
		"tracing:\n  otlp_endpoint: http://h\n  headers: {content-type: x}\n":                 "tracing.headers.content-type: is set by the exporter itself",
		"tracing:\n  otlp_endpoint: http://h\n  headers: [a]\n":                               "tracing.headers: must be a mapping",
		"tracing:\n  otlp_endpoint: http://h\n  headers: {k: \"" + secret + "\\r\\nX: 1\"}\n": "tracing.headers.k: value holds a control character (a line break?); the value is not shown",
	} {
		_, err := config.Parse("c.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%q: the message shows the secret: %v", doc, err)
		}
	}
}

// TestTracingHeadersNeverInMessages: whatever else is wrong near them,
// the headers' values are not quoted.
func TestTracingHeadersNeverInMessages(t *testing.T) {
	const secret = "Bearer sk-live-0123456789"
	doc := "tracing:\n  otlp_endpoint: \"" + secret + "\"\n  headers: {authorization: \"" + secret + "\"}\n  sample_ratio: \"" + secret + "\"\n"
	_, err := config.Parse("c.yaml", []byte(doc))
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "sk-live") {
		t.Fatalf("the message shows the header's value: %v", err)
	}
}

func TestTracingWarnings(t *testing.T) {
	for doc, want := range map[string]string{
		"tracing:\n  otlp_endpoint: http://otel.example.com:4318\n  headers: {authorization: x}\n": "c.yaml:2: tracing.otlp_endpoint: is http:// to another host",
		"tracing:\n  otlp_endpoint: http://127.0.0.1:4318\n  headers: {authorization: x}\n":        "",
		"tracing:\n  otlp_endpoint: https://otel.example.com\n  headers: {authorization: x}\n":     "",
		"tracing:\n  otlp_endpoint: http://otel.example.com:4318\n":                                "",
	} {
		f, err := config.Parse("c.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, w := range f.Warnings() {
			if strings.HasPrefix(w.Field, "tracing") {
				got = w.Error()
			}
		}
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%q: warning %q, want %q", doc, got, want)
		}
	}
}
