package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHTTPSection(t *testing.T) {
	f := mustParse(t, `http:
  listen: 0.0.0.0:9464
  token: ${TOKEN}
  allowed_hosts: [onetick.internal, Proxy.Example, "[::1]", 10.0.0.5]
  tls: {cert_file: server.crt, key_file: server.key}
  read_timeout: 30s
  idle_timeout: 5s
  max_connections: 16
`, envMap(map[string]string{"TOKEN": "0123456789abcdef0123"}))
	want := HTTP{Listen: "0.0.0.0:9464", Token: "0123456789abcdef0123",
		AllowedHosts: []string{"onetick.internal", "proxy.example", "::1", "10.0.0.5"},
		TLS:          HTTPTLS{CertFile: "server.crt", KeyFile: "server.key"},
		ReadTimeout:  Duration(30 * time.Second), WriteTimeout: Duration(2 * time.Minute), IdleTimeout: Duration(5 * time.Second),
		MaxConnections: 16}
	if !reflect.DeepEqual(f.HTTP, want) {
		t.Fatalf("got  %+v\nwant %+v", f.HTTP, want)
	}
	if f.HTTP.HeaderTimeout() != 10*time.Second || f.HTTP.OpenWithoutToken() || f.HTTPWarnings() != nil {
		t.Fatalf("header timeout %s, open %v, warnings %v", f.HTTP.HeaderTimeout(), f.HTTP.OpenWithoutToken(), f.HTTPWarnings())
	}
	// A read timeout past 1m raises the default write timeout with it.
	if f := mustParse(t, "http: {read_timeout: 5m}\n", noEnv); f.HTTP.WriteTimeout.D() != 10*time.Minute || f.HTTP.HeaderTimeout() != 10*time.Second {
		t.Fatalf("write timeout %s", f.HTTP.WriteTimeout)
	}
	if f := mustParse(t, "http: {read_timeout: 2s}\n", noEnv); f.HTTP.HeaderTimeout() != 2*time.Second {
		t.Fatalf("header timeout %s", f.HTTP.HeaderTimeout())
	}
}

func TestHTTPWarnings(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		warn bool
	}{
		{"", false},
		{"http: {listen: 127.0.0.1:9464}\n", false},
		{"http: {listen: 'localhost:9464'}\n", false},
		{"http: {listen: '[::1]:9464'}\n", false},
		{"http: {listen: 'off'}\n", false},
		{"http:\n  listen: 0.0.0.0:9464\n", true},
		{"http: {listen: ':9464'}\n", true},
		{"http: {listen: '10.1.2.3:9464', token: 0123456789abcdef0123}\n", false},
	} {
		f := mustParse(t, tc.yaml, noEnv)
		ws := f.HTTPWarnings()
		if (ws != nil) != tc.warn {
			t.Errorf("%q: warnings %v, want %v", tc.yaml, ws, tc.warn)
		}
		if ws != nil && (!strings.HasPrefix(ws.Error(), "test.yaml:") || !strings.Contains(ws.Error(), "http.listen: ") ||
			!strings.Contains(ws.Error(), "http.token is not set")) {
			t.Errorf("%q: warning %q", tc.yaml, ws)
		}
	}
	f := mustParse(t, "lease: {ttl: 15s}\nhttp:\n  listen: 0.0.0.0:9464\n", noEnv)
	if ws := f.HTTPWarnings(); len(ws) != 1 || ws[0].Line != 3 {
		t.Fatalf("warning %v, want one on line 3", ws)
	}
}

func TestHTTPErrors(t *testing.T) {
	checkCases(t, []errCase{
		{name: "allowed host with a port", yaml: "http:\n  allowed_hosts: [a.example:8080]\n",
			want: []want{{2, "http.allowed_hosts[0]", "without a port or scheme"}}},
		{name: "allowed host with a scheme", yaml: "http:\n  allowed_hosts:\n    - ok.example\n    - https://a.example\n",
			want: []want{{4, "http.allowed_hosts[1]", "without a port or scheme"}}},
		{name: "allowed hosts not a list", yaml: "http:\n  allowed_hosts: a.example\n",
			want: []want{{2, "http.allowed_hosts", "must be a list of host names"}}},
		{name: "tls without key", yaml: "http:\n  tls:\n    cert_file: c.pem\n",
			want: []want{{3, "http.tls.key_file", "is required with cert_file"}}},
		{name: "tls without cert", yaml: "http:\n  tls: {key_file: k.pem}\n",
			want: []want{{2, "http.tls.cert_file", "is required with key_file"}}},
		{name: "tls unknown field", yaml: "http:\n  tls: {cert: c.pem}\n",
			want: []want{{2, "http.tls.cert", "expected one of: cert_file, key_file"}}},
		{name: "write timeout below read", yaml: "http:\n  read_timeout: 1m\n  write_timeout: 30s\n",
			want: []want{{3, "http.write_timeout", "must exceed read_timeout (1m0s)"}}},
		{name: "write timeout below the default read", yaml: "http:\n  write_timeout: 30s\n",
			want: []want{{2, "http.write_timeout", "must exceed read_timeout (1m0s)"}}},
		{name: "negative idle", yaml: "http:\n  idle_timeout: -1s\n",
			want: []want{{2, "http.idle_timeout", "must not be negative"}}},
		{name: "negative connections", yaml: "http:\n  max_connections: -1\n",
			want: []want{{2, "http.max_connections", "must not be negative"}}},
	})
}

func TestLoadHTTPCertificate(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	cfg := filepath.Join(dir, "onetick.yaml")
	write := func(body string) *File {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := Load(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Relative names are the configuration file's directory's.
	f := write("http:\n  tls:\n    cert_file: " + filepath.Base(cert) + "\n    key_file: " + filepath.Base(key) + "\n")
	if c, err := f.LoadHTTPCertificate(); err != nil || c == nil || c.Leaf == nil {
		t.Fatalf("LoadHTTPCertificate: %v %v", c, err)
	}
	if c, err := write("").LoadHTTPCertificate(); c != nil || err != nil {
		t.Fatalf("without tls: %v %v", c, err)
	}
	f = write("http:\n  tls:\n    cert_file: " + cert + "\n    key_file: missing.key\n")
	if _, err := f.LoadHTTPCertificate(); err == nil ||
		err.Error() != cfg+":4: http.tls.key_file: cannot read "+filepath.Join(dir, "missing.key")+": no such file or directory" {
		t.Fatalf("missing key: %v", err)
	}
	f = write("http:\n  tls:\n    cert_file: onetick.yaml\n    key_file: " + key + "\n")
	if _, err := f.LoadHTTPCertificate(); err == nil || !strings.HasPrefix(err.Error(), cfg+":3: http.tls.cert_file: ") {
		t.Fatalf("not a certificate: %v", err)
	}
}

// TestParseJobsNeedsAList: a jobs file that does not say what the set
// becomes (empty, only comments, jobs: null, no jobs key) is refused, by
// the CLI and the API alike; jobs: [] empties a set.
func TestParseJobsNeedsAList(t *testing.T) {
	base := mustParse(t, "", noEnv)
	for _, tc := range []struct{ body, want string }{
		{"", "bad.yaml: jobs: is missing"},
		{"\n# nothing here\n", "bad.yaml: jobs: is missing"},
		{"jobs:\n", "bad.yaml:1: jobs: is empty"},
		{"jobs: ~\n", "bad.yaml:1: jobs: is empty"},
		{"{}\n", "bad.yaml:1: jobs: is missing"},
		{"jobs: []\n---\njobs: []\n", "only one YAML document"},
		{"jobz: []\n", `did you mean "jobs"`},
	} {
		f, err := ParseJobs("bad.yaml", []byte(tc.body), base)
		if err == nil || f != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, %v; want an error with %q", tc.body, f, err, tc.want)
		}
		if err != nil && strings.Contains(tc.want, "jobs: is") && !strings.Contains(err.Error(), "jobs: []") {
			t.Errorf("%q: %v does not say how to empty a set", tc.body, err)
		}
	}
	f, err := ParseJobs("empty.yaml", []byte("jobs: []\n"), base)
	if err != nil || f == nil || len(f.Jobs) != 0 {
		t.Fatalf("jobs: []: %v %v", f, err)
	}
}

// TestParseRequestJobsReadsNoEnvironment: a jobs file from a client
// cannot copy the daemon's environment into a job.
func TestParseRequestJobsReadsNoEnvironment(t *testing.T) {
	t.Setenv("ONETICK_TEST_SECRET", "hunter2-in-the-env")
	base := mustParse(t, "", noEnv)
	for _, ref := range []string{"${ONETICK_TEST_SECRET}", "${ONETICK_TEST_SECRET:-x}"} {
		body := "jobs:\n  - name: a\n    schedule: '@daily'\n    payload: {k: \"" + ref + "\"}\n"
		f, err := ParseRequestJobs("body", []byte(body), base)
		if err == nil || f != nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "body:4: ") ||
			!strings.Contains(err.Error(), "no environment variable is read here") {
			t.Errorf("%s: %v %v", ref, f, err)
		}
		// The CLI's jobs file is the operator's own: expanded.
		if f, err := ParseJobs("file", []byte(body), base); err != nil || f.Jobs[0].Payload != `{"k":"hunter2-in-the-env"}` {
			t.Errorf("ParseJobs %s: %v %v", ref, f, err)
		}
	}
	// A literal ${ is still written $${.
	f, err := ParseRequestJobs("body", []byte("jobs:\n  - {name: a, schedule: '@daily', payload: {k: \"$${X}\"}}\n"), base)
	if err != nil || f.Jobs[0].Payload != `{"k":"${X}"}` {
		t.Fatalf("$${: %v %v", f, err)
	}
}
