package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/onetick/onetick"
)

// Warnings are what the file allows but weakens what onetick promises: a
// connection whose server is not verified, a listener that serves no
// reads because it is open without a token (HTTPWarnings), a job's
// preference and its run block's overlap policy that pull apart (the
// preference decides, see package worker). Each is an *Error used as a
// warning, "FILE:LINE: FIELD: message": `onetick validate` prints each
// one and still exits 0, `onetick run` logs each one (WARN) when it
// starts; neither refuses the file.
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
	ws = append(ws, f.tracingWarnings()...)
	return append(ws, f.runWarnings()...)
}

// runWarnings explain the preference and overlap combinations that
// cannot keep the promise the file seems to make.
func (f *File) runWarnings() []*Error {
	var out []*Error
	add := func(i int, j Job, key, format string, args ...any) {
		field := label(i, j.Name) + ".run." + key
		out = append(out, &Error{File: f.Path, Line: f.line(field, j.Run.Line), Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	for i, j := range f.Jobs {
		r := j.Run
		if r == nil {
			continue
		}
		_, overlapWritten := f.lines[label(i, j.Name)+".run.overlap"]
		dup := onetick.Prefer(j.Prefer) == onetick.PreferDuplicate
		catchup := j.MaxCatchup
		if catchup == 0 {
			catchup = DefaultMaxCatchup
		}
		switch {
		case dup && r.Overlap == "skip" && overlapWritten:
			add(i, j, "overlap", "skip does not drop ticks of a job that prefers duplicate: a tick due while a run of the job is in flight waits, and the job's ticks run one at a time in slot order (at most max_catchup, %d, wait; later ones are skipped and counted as missed); write queue to say so, or prefer: missed to skip", catchup)
		case !dup && r.Overlap == "queue":
			add(i, j, "overlap", "queue with prefer: missed: the waiting tick runs when the previous run ends, possibly later than grace (%s) after its slot, and a further tick due meanwhile is skipped and counted as missed; prefer: duplicate runs every slot, in order", j.Grace)
		}
		if dup && r.Overlap != "allow" && r.Timeout == 0 {
			add(i, j, "timeout", "is not set: with prefer: duplicate a run that never ends holds every later tick of the job waiting, and beyond max_catchup (%d) they are skipped and counted as missed; set run.timeout", catchup)
		}
	}
	return out
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
