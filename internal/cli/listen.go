package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
)

// The replica's HTTP listener and what it enforces before any handler
// runs: timeouts, a cap on connections, TLS with certificates read again
// when their files change, and (for the status, the page and the API) the
// Host header.

// httpListener is the replica's listener, bound before the store is
// opened so that a port in use or a bad certificate stops `run` early.
type httpListener struct {
	cfg   config.HTTP
	ln    net.Listener
	certs *certReloader // nil without TLS
	log   *slog.Logger
	srv   *http.Server
	done  chan struct{} // closed when Serve returned
	once  sync.Once
}

// listenHTTP binds f's listener (http.listen), capped at
// http.max_connections, with its certificate loaded when http.tls is set.
func listenHTTP(f *config.File, log *slog.Logger) (*httpListener, error) {
	l := &httpListener{cfg: f.HTTP, log: log, done: make(chan struct{})}
	if f.HTTP.TLS.Enabled() {
		c, err := newCertReloader(f, log)
		if err != nil {
			return nil, usageError{err}
		}
		l.certs = c
	}
	ln, err := net.Listen("tcp", f.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http: %v", err)
	}
	l.ln = newLimitListener(ln, f.HTTP.MaxConnections)
	return l, nil
}

// Addr is the bound address (the port chosen for port 0).
func (l *httpListener) Addr() net.Addr { return l.ln.Addr() }

// serve serves h until shutdown.
func (l *httpListener) serve(h http.Handler) {
	l.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.cfg.HeaderTimeout(),
		ReadTimeout:       l.cfg.ReadTimeout.D(),
		WriteTimeout:      l.cfg.WriteTimeout.D(),
		IdleTimeout:       l.cfg.IdleTimeout.D(),
		MaxHeaderBytes:    64 << 10,
		// Handshake errors and the like come from every port scanner:
		// debug, not warnings.
		ErrorLog: slog.NewLogLogger(l.log.Handler(), slog.LevelDebug),
	}
	if l.certs != nil {
		l.srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: l.certs.get}
	}
	go func() {
		defer close(l.done)
		var err error
		if l.certs != nil {
			err = l.srv.ServeTLS(l.ln, "", "")
		} else {
			err = l.srv.Serve(l.ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("http server failed", "err", err)
		}
	}()
}

// close stops serving: open requests get until d to finish. It may be
// called again.
func (l *httpListener) close(d time.Duration) {
	l.once.Do(func() {
		if l.srv == nil {
			_ = l.ln.Close()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		if err := l.srv.Shutdown(ctx); err != nil {
			_ = l.srv.Close()
		}
		<-l.done
	})
}

// limitListener serves at most n connections at once: Accept waits for
// one to close (the others wait in the kernel's accept queue), as
// golang.org/x/net/netutil.LimitListener does.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), closed: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.closed) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// certReloader hands out the listener's certificate, reading the files
// again on the first handshake after either changed (mtime or size): a
// renewed certificate is served without a restart. A pair that does not
// load (a half-written file, a key that does not match) is logged once
// per change and the previous certificate is kept.
type certReloader struct {
	f    *config.File
	log  *slog.Logger
	mu   sync.Mutex
	cert *tls.Certificate
	seen [2]fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
	err  bool
}

func newCertReloader(f *config.File, log *slog.Logger) (*certReloader, error) {
	c := &certReloader{f: f, log: log}
	c.seen = c.stamps()
	cert, err := f.LoadHTTPCertificate()
	if err != nil {
		return nil, err
	}
	c.cert = cert
	return c, nil
}

func (c *certReloader) stamps() [2]fileStamp {
	var out [2]fileStamp
	cert, key := c.f.HTTPCertFiles()
	for i, name := range []string{cert, key} {
		fi, err := os.Stat(name)
		if err != nil {
			out[i].err = true
			continue
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.stamps(); now != c.seen {
		c.seen = now
		cert, err := c.f.LoadHTTPCertificate()
		if err != nil {
			c.log.Error("http.tls: the certificate files changed but do not load; serving the previous certificate", "err", err)
		} else {
			c.cert = cert
			c.log.Info("http.tls: certificate reloaded", "subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter)
		}
	}
	return c.cert, nil
}

// hostPolicy is the Host header rule of the status, the page and the API,
// against DNS rebinding (a page on another site that makes the
// operator's browser read from this listener under its own name): the
// Host must be the listen address's host; localhost, 127.0.0.1 and ::1
// when that is a loopback address; any IP address when it listens on all
// addresses (a rebinding page's requests carry its own name, never an
// address); or a name in http.allowed_hosts. The port is not compared.
type hostPolicy struct {
	listen string
	names  map[string]bool
	anyIP  bool
}

func newHostPolicy(h config.HTTP) hostPolicy {
	p := hostPolicy{listen: h.Listen, names: map[string]bool{}}
	host, _, _ := net.SplitHostPort(h.Listen)
	host = normHost(host)
	ip := net.ParseIP(host)
	switch {
	case host == "" || ip != nil && ip.IsUnspecified():
		p.anyIP = true
		p.names["localhost"] = true
	case h.Loopback():
		for _, n := range []string{host, "localhost", "127.0.0.1", "::1"} {
			p.names[n] = true
		}
	default:
		p.names[host] = true
	}
	for _, n := range h.AllowedHosts {
		p.names[normHost(n)] = true
	}
	return p
}

// normHost lowers a host name and writes an IP address in its canonical
// form, without brackets or a trailing dot.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

func (p hostPolicy) allows(hostHeader string) bool {
	host := hostHeader
	if h, _, err := net.SplitHostPort(hostHeader); err == nil {
		host = h
	}
	host = normHost(host)
	if host == "" {
		return false
	}
	if p.anyIP && net.ParseIP(host) != nil {
		return true
	}
	return p.names[host]
}

// check answers 421 to a request whose Host the policy refuses.
func (p hostPolicy) check(w http.ResponseWriter, r *http.Request) bool {
	if p.allows(r.Host) {
		return true
	}
	names := make([]string, 0, len(p.names))
	for n := range p.names {
		names = append(names, n)
	}
	sort.Strings(names)
	served := strings.Join(names, ", ")
	if p.anyIP {
		served = "any IP address, " + served
	}
	writeJSON(w, http.StatusMisdirectedRequest, apiError{fmt.Sprintf("Host %s is not a name of this listener (http.listen %s serves %s): "+
		"add it to http.allowed_hosts if a proxy forwards it under that name (the check stops DNS rebinding)", onetick.Excerpt(r.Host), p.listen, served)})
	return false
}
