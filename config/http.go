package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults of the http section.
const (
	// DefaultReadTimeout bounds reading one request, headers and body: a
	// 64 MiB job set arrives in it at 1.1 MB/s.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its response (Go's write deadline covers reading the body
	// too, so it must exceed the read timeout).
	DefaultWriteTimeout = 2 * time.Minute
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = time.Minute
	// DefaultMaxConnections is the most connections served at once; more
	// wait in the kernel's accept queue.
	DefaultMaxConnections = 128
	// MaxHeaderTimeout bounds reading a request's headers (and a TLS
	// handshake), whatever the read timeout.
	MaxHeaderTimeout = 10 * time.Second
)

// HTTP configures the replica's listener: metrics, probes, status, the
// status page and the API. After Parse every field holds its effective
// value.
type HTTP struct {
	// Listen is host:port, or "off". Default 127.0.0.1:9464.
	Listen string `yaml:"listen"`
	// Token is the bearer token every change through the HTTP API needs
	// (pause, resume, trigger, backfill, job sets), and every read from a
	// client that is not on loopback. Empty: the API is read-only, and
	// on a listener that is not on loopback the status, the page and the
	// API's reads are refused. Write it as ${VAR}; it never appears in
	// logs or errors.
	Token string `yaml:"token"`
	// AllowedHosts are the names, besides the listen address's own, that
	// the Host header of a request to the status, the page or the API may
	// carry (the names a proxy or a Service forwards under). The port is
	// not compared.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TLS serves HTTPS with this certificate and key, read again when
	// either file changes.
	TLS HTTPTLS `yaml:"tls"`
	// ReadTimeout, WriteTimeout and IdleTimeout bound a request's reading,
	// its whole exchange after the headers, and an idle keep-alive
	// connection.
	ReadTimeout  Duration `yaml:"read_timeout"`
	WriteTimeout Duration `yaml:"write_timeout"`
	IdleTimeout  Duration `yaml:"idle_timeout"`
	// MaxConnections is the most connections served at once.
	MaxConnections int `yaml:"max_connections"`
}

// HTTPTLS names the listener's certificate and key, PEM files.
type HTTPTLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Enabled reports whether TLS is configured.
func (t HTTPTLS) Enabled() bool { return t.CertFile != "" }

// Loopback reports whether the listener binds a loopback address only.
func (h HTTP) Loopback() bool {
	host, _, err := net.SplitHostPort(h.Listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Enabled reports whether the HTTP server should run.
func (h HTTP) Enabled() bool { return h.Listen != ListenOff && h.Listen != "" }

// HeaderTimeout is the bound on reading a request's headers.
func (h HTTP) HeaderTimeout() time.Duration {
	return min(MaxHeaderTimeout, h.ReadTimeout.D())
}

// OpenWithoutToken reports a listener that is not on loopback and has no
// token: it refuses the status, the page and the API's reads.
func (h HTTP) OpenWithoutToken() bool {
	return h.Enabled() && !h.Loopback() && h.Token == ""
}

// HTTPWarnings are the problems of the http section that do not stop a
// replica but change what it serves; `validate` prints them and `run`
// logs them.
func (f *File) HTTPWarnings() Errors {
	if !f.HTTP.OpenWithoutToken() {
		return nil
	}
	return Errors{{File: f.Path, Line: f.line("http.listen", f.line("http", 0)), Field: "http.listen",
		Msg: fmt.Sprintf("%s is not a loopback address and http.token is not set: /status, the status page "+
			"and the API's reads are refused to every client (/metrics, /healthz and /readyz stay open); "+
			"set http.token (as ${VAR}) or listen on 127.0.0.1", f.HTTP.Listen)}}
}

// HTTPCertFiles returns the listener's certificate and key files, relative
// names resolved against the configuration file's directory.
func (f *File) HTTPCertFiles() (cert, key string) {
	return f.resolve(f.HTTP.TLS.CertFile), f.resolve(f.HTTP.TLS.KeyFile)
}

// LoadHTTPCertificate reads and checks the listener's certificate and key
// (http.tls); nil when TLS is off. Errors name the field and the file.
func (f *File) LoadHTTPCertificate() (*tls.Certificate, error) {
	if !f.HTTP.TLS.Enabled() {
		return nil, nil
	}
	cert, key := f.HTTPCertFiles()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		field := "http.tls.cert_file"
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			if pe.Path == key {
				field = "http.tls.key_file"
			}
			msg = "cannot read " + pe.Path + ": " + pe.Err.Error()
		} else {
			msg = fmt.Sprintf("%s and %s: %v", cert, key, err)
		}
		return nil, Errors{{File: f.Path, Line: f.line(field, f.line("http.tls", 0)), Field: field, Msg: msg, err: err}}
	}
	return &c, nil
}

// httpKeys are the keys of the http section.
var httpKeys = []string{"listen", "token", "allowed_hosts", "tls",
	"read_timeout", "write_timeout", "idle_timeout", "max_connections"}

// http walks the http section.
func (p *parser) http(e entry) {
	h := &p.f.HTTP
	h.Listen = DefaultListen
	defer func() {
		if h.ReadTimeout == 0 {
			h.ReadTimeout = Duration(DefaultReadTimeout)
		}
		if h.WriteTimeout == 0 {
			h.WriteTimeout = Duration(max(DefaultWriteTimeout, 2*h.ReadTimeout.D()))
		}
		if h.IdleTimeout == 0 {
			h.IdleTimeout = Duration(DefaultIdleTimeout)
		}
		if h.MaxConnections == 0 {
			h.MaxConnections = DefaultMaxConnections
		}
	}()
	if !e.ok() {
		return
	}
	m, ok := p.mapping(e.val, e.line, "http")
	if m == nil || !ok {
		return
	}
	sec := p.fields(p.entries(m, "http"), "http", "http", httpKeys...)
	if te, ok := sec["token"]; ok && !isNull(te.val) {
		if v, ok := p.str(te, "http.token"); ok {
			h.Token = v
			switch {
			case v == "":
				p.errorf(te.line, "http.token", "is empty (the environment variable it names is unset or empty?); remove it for a read-only API")
			case len(v) < 16:
				p.errorf(te.line, "http.token", "is %d bytes long; use at least 16 random bytes (for example: openssl rand -hex 32)", len(v))
			}
			if v != "" {
				p.secrets = append(p.secrets, v)
			}
		}
	}
	if x, ok := sec["allowed_hosts"]; ok {
		p.allowedHosts(x)
	}
	if x, ok := sec["tls"]; ok {
		p.httpTLS(x)
	}
	for _, d := range []struct {
		key string
		dst *Duration
	}{{"read_timeout", &h.ReadTimeout}, {"write_timeout", &h.WriteTimeout}, {"idle_timeout", &h.IdleTimeout}} {
		x, ok := sec[d.key]
		if !ok {
			continue
		}
		if v, ok := p.dur(x, "http."+d.key); ok {
			if v < 0 {
				p.errorf(x.line, "http."+d.key, "must not be negative, got %s", v)
				continue
			}
			*d.dst = v
		}
	}
	read := h.ReadTimeout.D()
	if read == 0 {
		read = DefaultReadTimeout
	}
	if x, ok := sec["write_timeout"]; ok && h.WriteTimeout != 0 && h.WriteTimeout.D() <= read {
		p.errorf(x.line, "http.write_timeout", "must exceed read_timeout (%s): the write deadline starts when a request's headers are read, so it covers reading its body too", Duration(read))
	}
	if x, ok := sec["max_connections"]; ok {
		if v, ok := p.integer(x, "http.max_connections", 0, math.MaxInt32); ok {
			h.MaxConnections = int(v)
		}
	}
	le, ok := sec["listen"]
	if !ok || isNull(le.val) {
		return
	}
	v, ok := p.str(le, "http.listen")
	if !ok {
		return
	}
	h.Listen = v
	if msg := checkListen(v); msg != "" {
		p.errorf(le.line, "http.listen", "%s", msg)
	}
}

// allowedHosts reads http.allowed_hosts: host names or IP addresses,
// without a port.
func (p *parser) allowedHosts(e entry) {
	const path = "http.allowed_hosts"
	if isNull(e.val) {
		return
	}
	seq := deref(e.val)
	if seq.Kind != yaml.SequenceNode {
		p.errorf(e.line, path, "must be a list of host names, got %s", p.kindText(seq))
		return
	}
	for i, item := range seq.Content {
		if !p.spend(1, item.Line) {
			return
		}
		field := path + "[" + strconv.Itoa(i) + "]"
		d := deref(item)
		if d == nil || d.Kind != yaml.ScalarNode || isNull(d) {
			p.errorf(item.Line, field, "must be a host name")
			continue
		}
		v, _ := p.str(entry{name: field, line: item.Line, val: item}, field)
		if msg := checkHostName(v); msg != "" {
			p.errorf(item.Line, field, "%s", msg)
			continue
		}
		p.f.HTTP.AllowedHosts = append(p.f.HTTP.AllowedHosts, strings.ToLower(strings.Trim(v, "[]")))
	}
}

// checkHostName checks an entry of http.allowed_hosts.
func checkHostName(v string) string {
	if ip := net.ParseIP(strings.Trim(v, "[]")); ip != nil {
		return ""
	}
	if v == "" || len(v) > 253 {
		return fmt.Sprintf("must be a host name (such as onetick.internal) or an IP address, got %q", short(v))
	}
	for _, label := range strings.Split(v, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Sprintf("must be a host name (such as onetick.internal) or an IP address, without a port or scheme, got %q", short(v))
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("must be a host name (such as onetick.internal) or an IP address, without a port or scheme, got %q", short(v))
			}
		}
	}
	return ""
}

// httpTLSKeys are the keys of http.tls.
var httpTLSKeys = []string{"cert_file", "key_file"}

// httpTLS reads http.tls: cert_file and key_file, both or neither.
func (p *parser) httpTLS(e entry) {
	const path = "http.tls"
	m, ok := p.mapping(e.val, e.line, path)
	if m == nil || !ok {
		return
	}
	sec := p.fields(p.entries(m, path), path, path, httpTLSKeys...)
	t := &p.f.HTTP.TLS
	for _, f := range []struct {
		key string
		dst *string
	}{{"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}} {
		if x, ok := sec[f.key]; ok {
			*f.dst, _ = p.str(x, path+"."+f.key)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		p.errorf(p.f.line(path+".cert_file", e.line), path+".key_file", "is required with cert_file")
	case t.KeyFile != "" && t.CertFile == "":
		p.errorf(p.f.line(path+".key_file", e.line), path+".cert_file", "is required with key_file")
	}
}

func checkListen(v string) string {
	if v == ListenOff {
		return ""
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Sprintf("must be host:port (such as %s) or off, got %q", DefaultListen, short(v))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("port must be a number from 0 to 65535, got %q", short(port))
	}
	return ""
}
