package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/internal/redact"
)

// MaskedRedisURL returns the Redis URL with its password hidden, for logs.
// It is "" without a Redis backend.
func (f *File) MaskedRedisURL() string {
	r := f.Backend.Redis
	switch {
	case r == nil:
		return ""
	case r.Sentinel != nil:
		return "sentinel " + r.Sentinel.Primary + " via " + maskedAddrs(r.Sentinel.Addrs)
	case r.Cluster != nil:
		return "cluster via " + maskedAddrs(r.Cluster.Addrs)
	}
	return redact.URL(r.URL)
}

func maskedAddrs(addrs []string) string {
	m := make([]string, len(addrs))
	for i, a := range addrs {
		m[i] = redact.URL(a)
	}
	return strings.Join(m, ",")
}

// RedisURL returns the effective Redis URL, with the username and password
// fields applied. It carries the password: use it to connect, never log it
// (see MaskedRedisURL). It is "" without a Redis backend.
func (f *File) RedisURL() string {
	r := f.Backend.Redis
	if r == nil {
		return ""
	}
	if r.Username == "" && r.Password == "" {
		return r.URL
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return r.URL
	}
	var user, pw string
	var hasPw bool
	if u.User != nil {
		user = u.User.Username()
		pw, hasPw = u.User.Password()
	}
	if r.Username != "" {
		user = r.Username
	}
	if r.Password != "" {
		pw, hasPw = r.Password, true
	}
	if hasPw {
		u.User = url.UserPassword(user, pw)
	} else {
		u.User = url.User(user)
	}
	return u.String()
}

// tlsOn reports whether TLS is used: tls.enabled or a rediss:// URL.
func (r *Redis) tlsOn() bool {
	return r.TLS.Enabled || strings.HasPrefix(strings.ToLower(r.URL), "rediss://")
}

// resolve makes a relative file name relative to the configuration file's
// directory (when the File came from Load).
func (f *File) resolve(name string) string {
	if name == "" || filepath.IsAbs(name) || f.dir == "" {
		return name
	}
	return filepath.Join(f.dir, name)
}

// TLSConfig builds the TLS configuration for Redis: nil when TLS is off
// (tls.enabled false and a redis:// URL). Relative file names are resolved
// against the configuration file's directory (Load) or the working
// directory (Parse). Errors name the field.
func (f *File) TLSConfig() (*tls.Config, error) {
	r := f.Backend.Redis
	if r == nil || !r.tlsOn() {
		return nil, nil
	}
	host := ""
	if u, err := url.Parse(r.URL); err == nil {
		host = u.Hostname()
	}
	return f.tlsFrom(r.TLS, "backend.redis.tls", host)
}

// tlsFrom builds the TLS configuration of section t at path (host: the
// server name to check by default). Errors name the field.
func (f *File) tlsFrom(t TLS, path, host string) (*tls.Config, error) {
	fail := func(key string, err error, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg += ": " + pe.Err.Error()
		} else if err != nil {
			msg += ": " + err.Error()
		}
		return Errors{{File: f.Path, Line: f.line(path+"."+key, 0), Field: path + "." + key, Msg: msg, err: err}}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // explicit opt-in
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if t.CAFile != "" {
		name := f.resolve(t.CAFile)
		pem, err := os.ReadFile(name)
		if err != nil {
			return nil, fail("ca_file", err, "cannot read %s", name)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fail("ca_file", nil, "no PEM certificates in %s", name)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" {
			return nil, fail("cert_file", nil, "is required with key_file")
		}
		if t.KeyFile == "" {
			return nil, fail("key_file", nil, "is required with cert_file")
		}
		certName, keyName := f.resolve(t.CertFile), f.resolve(t.KeyFile)
		certPEM, err := os.ReadFile(certName)
		if err != nil {
			return nil, fail("cert_file", err, "cannot read %s", certName)
		}
		keyPEM, err := os.ReadFile(keyName)
		if err != nil {
			return nil, fail("key_file", err, "cannot read %s", keyName)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			key := "cert_file"
			if m := err.Error(); strings.Contains(m, "key input") || strings.Contains(m, "private key") {
				key = "key_file"
			}
			return nil, fail(key, err, "%s and %s are not a usable certificate and key", certName, keyName)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// RedisOptions returns go-redis client options for the Redis backend: the
// effective URL (RedisURL) with TLSConfig applied. It is nil, nil without a
// Redis backend.
func (f *File) RedisOptions() (*goredis.Options, error) {
	r := f.Backend.Redis
	if r == nil {
		return nil, nil
	}
	o, err := goredis.ParseURL(f.RedisURL())
	if err != nil {
		return nil, Errors{{File: f.Path, Line: f.line("backend.redis.url", 0), Field: "backend.redis.url",
			Msg: "invalid URL " + redact.URL(r.URL) + ": " + redact.Error(err)}}
	}
	tc, err := f.TLSConfig()
	if err != nil {
		return nil, err
	}
	o.TLSConfig = tc
	return o, nil
}
