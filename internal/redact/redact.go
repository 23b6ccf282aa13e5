// Package redact masks the credentials in the addresses onetick is given
// (a store's URL, a Sentinel or Cluster address, a webhook's URL), so that
// an address can be shown in a log line, an error, `validate`'s output,
// `/readyz` and `/status` without its password. URL is the one function
// every such path calls.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask stands in for every hidden value.
const Mask = "xxxxx"

// shownParams are the query parameters and keyword/value settings whose
// values are shown: what they hold names a place or a mode, never a
// credential. Every other parameter's value is masked, whatever its name,
// so a driver's new option (or a misspelt one) cannot leak a secret.
var shownParams = map[string]bool{
	// PostgreSQL (libpq and pgx).
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true,
	"sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true, "sslsni": true,
	"sslnegotiation": true, "connect_timeout": true, "application_name": true,
	"fallback_application_name": true, "target_session_attrs": true, "search_path": true,
	"client_encoding": true, "timezone": true, "pool_max_conns": true, "pool_min_conns": true,
	"pool_max_conn_lifetime": true, "pool_max_conn_idle_time": true,
	"pool_health_check_period": true, "default_query_exec_mode": true,
	"statement_cache_capacity": true, "description_cache_capacity": true,
	// Redis (go-redis URL options).
	"db": true, "protocol": true, "client_name": true, "dial_timeout": true,
	"read_timeout": true, "write_timeout": true, "pool_fifo": true, "pool_size": true,
	"pool_timeout": true, "min_idle_conns": true, "max_idle_conns": true,
	"max_active_conns": true, "conn_max_idle_time": true, "conn_max_lifetime": true,
	"max_retries": true, "min_retry_backoff": true, "max_retry_backoff": true,
}

// knownSchemes are those whose user information is user[:password]: the
// user name is shown. Of another scheme's, nothing is.
var knownSchemes = map[string]bool{"redis": true, "rediss": true, "unix": true, "postgres": true,
	"postgresql": true, "http": true, "https": true}

// URL returns s with every credential it may carry replaced by Mask. s is
// any form a store or an executor accepts:
//
//   - a URL (redis://, rediss://, unix://, postgres://, postgresql://,
//     http://, https://): the password of the user information is masked
//     (a user information without a password too, except for PostgreSQL,
//     where it is the user name: some Redis clients take a lone
//     user information as the password), every query parameter's value but
//     those of shownParams is masked, and the fragment is dropped;
//   - a keyword/value connection string (host=db password='x y'): every
//     value but those of shownParams is masked;
//   - a host:port address, with or without user:password@ in front (a
//     Sentinel's or a Cluster node's address): what comes before the last
//     @ is masked.
//
// An address that does not parse, or that parses in more than one way
// (an @ after the host: was it in the password, or in the path or query?),
// is masked the more for it: its scheme is shown, and of the rest only what
// cannot be part of a credential. No part of a password survives, however
// the operator wrote it.
func URL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !isScheme(scheme) {
		return bare(s)
	}
	if !strings.ContainsAny(rest, "@?#=&;") {
		return s // nothing in it can be a credential
	}
	if u, err := url.Parse(s); err == nil && u.Opaque == "" &&
		!strings.Contains(u.EscapedPath()+u.RawQuery+u.Fragment, "@") {
		return scheme + "://" + userinfo(scheme, u.User) + u.Host + u.EscapedPath() + query(u.RawQuery, u.ForceQuery)
	}
	// Unparsed or ambiguous: the credentials end at the last @, if that
	// @ cannot be in a query.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		host, q, hasQ := strings.Cut(rest, "?")
		host, _, _ = strings.Cut(host, "#")
		return scheme + "://" + host + query(q, hasQ)
	}
	if strings.ContainsAny(rest[:at], "?") {
		return scheme + "://" + Mask
	}
	user, _, hasPw := strings.Cut(rest[:at], ":")
	shown := Mask + "@"
	if hasPw && knownSchemes[strings.ToLower(scheme)] && !strings.ContainsAny(user, "/#") {
		shown = user + ":" + Mask + "@"
	}
	host, q, hasQ := strings.Cut(rest[at+1:], "?")
	host, _, _ = strings.Cut(host, "#")
	return scheme + "://" + shown + host + query(q, hasQ)
}

// userinfo shows a URL's user information with the password masked.
func userinfo(scheme string, u *url.Userinfo) string {
	if u == nil {
		return ""
	}
	name := u.Username()
	if !knownSchemes[strings.ToLower(scheme)] {
		return Mask + "@"
	}
	if _, hasPw := u.Password(); hasPw {
		return url.User(name).String() + ":" + Mask + "@"
	}
	if name == "" {
		return "@"
	}
	if s := strings.ToLower(scheme); s == "postgres" || s == "postgresql" {
		return url.User(name).String() + "@"
	}
	return Mask + "@"
}

// query masks the values of a URL query but those of shownParams.
func query(raw string, force bool) string {
	if raw == "" {
		if force {
			return "?"
		}
		return ""
	}
	raw, _, _ = strings.Cut(raw, "#")
	params := strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range params {
		k, _, hasV := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		switch {
		case err == nil && shownParams[strings.ToLower(name)] && !strings.Contains(p, "@"):
		case hasV && err == nil && !strings.ContainsAny(name, "@:/") && len(name) <= 64:
			params[i] = k + "=" + Mask
		default:
			params[i] = Mask
		}
	}
	return "?" + strings.Join(params, "&")
}

// bare masks an address without a scheme: a keyword/value connection
// string, or [credentials@]host:port.
func bare(s string) string {
	if k, _, ok := strings.Cut(s, "="); ok && isKeyword(strings.TrimSpace(k)) {
		return keywords(s)
	}
	if at := strings.LastIndex(s, "@"); at >= 0 {
		return Mask + "@" + s[at+1:]
	}
	return s
}

// keywords masks a keyword/value connection string (libpq's syntax:
// key = value pairs separated by spaces, a value in single quotes with \'
// and \\ escapes): every value but those of shownParams. Once the syntax
// is not followed, the rest is masked whole.
func keywords(s string) string {
	var b strings.Builder
	i := 0
	skip := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			return b.String()
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		skip()
		if i >= len(s) || s[i] != '=' || !isKeyword(key) {
			return join(&b, Mask)
		}
		i++
		skip()
		vstart := i
		if i < len(s) && s[i] == '\'' {
			i++
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return join(&b, key+"="+Mask)
			}
			i++
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i > len(s) {
				i = len(s)
			}
		}
		val := s[vstart:i]
		if shownParams[strings.ToLower(key)] && !strings.ContainsAny(val, "@") {
			join(&b, key+"="+val)
		} else {
			join(&b, key+"="+Mask)
		}
	}
}

func join(b *strings.Builder, part string) string {
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString(part)
	return b.String()
}

// isScheme reports whether s is a URL scheme (RFC 3986).
func isScheme(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// isKeyword reports whether k can be a connection string's keyword.
func isKeyword(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// Error returns err's message for a caller that shows the address
// itself masked: a *url.Error (what url.Parse returns, and drivers pass on)
// repeats the whole URL, password and all, and quotes pieces of it (a
// port, an escape) that may be pieces of a password; both are left out.
func Error(err error) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err.Error()
	}
	msg := ue.Err.Error()
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '"')
		if i < 0 {
			break
		}
		b.WriteString(msg[:i])
		b.WriteString(`"…"`)
		j := strings.IndexByte(msg[i+1:], '"')
		if j < 0 {
			msg = ""
			break
		}
		msg = msg[i+1+j+1:]
	}
	b.WriteString(msg)
	return ue.Op + " URL: " + b.String()
}
