package config

import (
	"net"
	"net/url"
	"strings"
)

// Warnings are what the file allows but weakens what onetick promises: a
// connection whose server is not verified, a listener that serves no
// reads because it is open without a token (HTTPWarnings). `onetick validate` prints each
// one and `onetick run` logs each one (WARN) when it starts; neither
// refuses the file.
func (f *File) Warnings() Errors {
	ws := f.HTTPWarnings()
	warn := func(field, msg string) {
		ws = append(ws, &Error{File: f.Path, Line: f.line(field, 0), Field: field, Msg: msg})
	}
	if r := f.Backend.Redis; r != nil && r.tlsOn() && r.TLS.InsecureSkipVerify {
		warn("backend.redis.tls.insecure_skip_verify", "is true: the server's certificate is not verified, so whoever is on the network path can pose as Redis, read the password and every tick; give ca_file instead")
	}
	if pg := f.Backend.Postgres; pg != nil {
		if msg := postgresTLSWarning(pg.URL); msg != "" {
			warn("backend.postgres.url", msg)
		}
	}
	return ws
}

// postgresTLSWarning says what a PostgreSQL URL's sslmode leaves open when
// the server is not on this host: without verify-ca or verify-full, the
// server is not verified (pgx's default, prefer, even falls back to no TLS
// at all). Loopback and Unix sockets are not warned about.
func postgresTLSWarning(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	q := u.Query()
	hosts := u.Host
	if h := q.Get("host"); h != "" {
		hosts = h
	}
	remote := false
	for _, h := range strings.Split(hosts, ",") {
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		h = strings.Trim(h, "[]")
		ip := net.ParseIP(h)
		if h != "" && !strings.HasPrefix(h, "/") && h != "localhost" && (ip == nil || !ip.IsLoopback()) {
			remote = true
		}
	}
	if !remote {
		return ""
	}
	switch mode := q.Get("sslmode"); mode {
	case "verify-ca", "verify-full":
		return ""
	case "disable":
		return "sslmode=disable to a server on another host: the password and every tick travel in clear; use sslmode=verify-full"
	case "":
		return "no sslmode, so pgx's default (prefer) applies to a server on another host: TLS when the server offers it, without verifying the server, and none when it does not; use sslmode=verify-full"
	default:
		return "sslmode=" + mode + " does not verify the server, so whoever is on the network path can pose as the database and read the password; use sslmode=verify-full"
	}
}
