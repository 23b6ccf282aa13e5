package config

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick/internal/redact"
	otredis "github.com/onetick/onetick/redis"
)

// Redis configures the Redis backend.
type Redis struct {
	// URL is redis://[user[:password]@]host[:port][/db][?options] or
	// rediss://... for TLS. It may carry credentials: never log it
	// unmasked.
	URL string `yaml:"url"`
	// Prefix of every key. Default "onetick".
	Prefix string `yaml:"prefix"`
	// Username and Password, when not empty, override the URL's.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// ClockTolerance: claims for slots further than this in the future by
	// Redis TIME are refused. Default 100ms.
	ClockTolerance Duration `yaml:"clock_tolerance"`
	TLS            TLS      `yaml:"tls"`
	// Sentinel and Cluster name the other topologies; exactly one of URL,
	// Sentinel and Cluster is set.
	Sentinel *Sentinel `yaml:"sentinel"`
	Cluster  *Cluster  `yaml:"cluster"`
	// Durability is async (default) or replicated: acquire, renew and
	// claim then wait for Replicas replicas within ReplicationTimeout.
	Durability         string   `yaml:"durability"`
	Replicas           int      `yaml:"replicas"`
	ReplicationTimeout Duration `yaml:"replication_timeout"`
}

// Sentinel is a Sentinel-managed primary with replicas.
type Sentinel struct {
	// Primary is the name the sentinels monitor (their "master name").
	Primary string   `yaml:"primary"`
	Addrs   []string `yaml:"addrs"`
	// Username and Password authenticate to the sentinels (the data
	// nodes use backend.redis.username and password).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// Cluster is a Redis Cluster, reached through seed addresses.
type Cluster struct {
	Addrs []string `yaml:"addrs"`
}

// Topology names the configured topology: standalone, sentinel or cluster.
func (r *Redis) Topology() string {
	switch {
	case r.Sentinel != nil:
		return "sentinel"
	case r.Cluster != nil:
		return "cluster"
	}
	return "standalone"
}

// TLS configures TLS to Redis.
type TLS struct {
	// Enabled turns TLS on; a rediss:// URL implies it.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs to trust instead of the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name the server certificate is checked
	// against (default the URL's host).
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// redisKeys are the keys of backend.redis (topology reads sentinel,
// cluster and the durability settings).
var redisKeys = []string{"url", "prefix", "username", "password", "clock_tolerance", "tls",
	"sentinel", "cluster", "durability", "replicas", "replication_timeout"}

func (p *parser) redis(e entry) string {
	const path = "backend.redis"
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return DefaultPrefix
	}
	r := &Redis{}
	p.f.Backend.Redis = r
	var es []entry
	if m != nil {
		es = p.entries(m, path)
	}
	sec := p.fields(es, path, path, redisKeys...)
	strField := func(key string, dst *string) {
		if e, ok := sec[key]; ok {
			*dst, _ = p.str(e, path+"."+key)
		}
	}
	strField("url", &r.URL)
	strField("prefix", &r.Prefix)
	strField("username", &r.Username)
	strField("password", &r.Password)
	if r.Password != "" {
		p.secrets = append(p.secrets, r.Password)
	}
	if e, ok := sec["clock_tolerance"]; ok {
		if d, ok := p.dur(e, path+".clock_tolerance"); ok {
			if d < 0 {
				p.errorf(e.line, path+".clock_tolerance", "must not be negative, got %s", d)
			}
			r.ClockTolerance = d
		}
	}
	if r.Prefix == "" {
		r.Prefix = DefaultPrefix
	}
	if r.ClockTolerance == 0 {
		r.ClockTolerance = Duration(DefaultClockTolerance)
	}

	p.topology(sec, r)
	scheme := ""
	if ue, ok := sec["url"]; r.Sentinel != nil || r.Cluster != nil {
		if ok && r.URL != "" {
			p.errorf(ue.line, path+".url", "give one of url, sentinel and cluster")
		}
	} else if !ok || r.URL == "" {
		line := e.line
		if ok {
			line = ue.line
		}
		if !ok || isNull(ue.val) || deref(ue.val).Kind == yaml.ScalarNode {
			p.errorf(line, path+".url", "is required (for example redis://127.0.0.1:6379/0), or give sentinel or cluster")
		}
	} else {
		scheme = p.checkURL(r.URL, ue.line)
	}
	p.tls(sec["tls"], r, scheme)
	if r.Cluster != nil {
		// Every key onetick touches shares the prefix's hash tag.
		r.Prefix = otredis.HashTagged(r.Prefix)
	}
	return r.Prefix
}

// checkURL validates a Redis URL and returns its scheme ("" if invalid).
// No message it reports contains the URL's password.
func (p *parser) checkURL(raw string, line int) string {
	const field = "backend.redis.url"
	hasCreds := strings.Contains(raw, "@")
	if hasCreds {
		// Everything between :// and the last @ may be secret.
		rest := raw
		if _, r, ok := strings.Cut(raw, "://"); ok {
			rest = r
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			ui := rest[:at]
			if _, pw, ok := strings.Cut(ui, ":"); ok {
				p.secrets = append(p.secrets, pw)
				if dec, err := url.PathUnescape(pw); err == nil {
					p.secrets = append(p.secrets, dec)
				}
			} else {
				p.secrets = append(p.secrets, ui)
			}
		}
	}
	masked := strconv.Quote(short(redact.URL(raw)))
	// Parser messages quote parts of the URL, which may be parts of a
	// password (whose special characters were not escaped) or of a query
	// value: with either present, only the kind of problem is shown.
	sanitize := strings.ContainsAny(raw, "@?#")
	reason := func(err error) string {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "redis: "), "net/url: ")
		if sanitize && !strings.HasPrefix(msg, "unexpected option: ") { // that one lists only names
			if i := strings.IndexAny(msg, "\":"); i > 0 {
				msg = strings.TrimSpace(msg[:i])
			}
		}
		if hasCreds {
			msg += " (percent-encode special characters in the user name and password, or use the username and password fields)"
		}
		return msg
	}
	u, err := url.Parse(raw)
	if err != nil {
		p.errorf(line, field, "invalid URL %s: %s", masked, reason(err))
		return ""
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			p.secrets = append(p.secrets, pw)
		}
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		p.errorf(line, field, "invalid URL %s: must start with redis:// or rediss:// (TLS)", masked)
		return ""
	}
	if u.Opaque != "" || u.Host == "" {
		p.errorf(line, field, "invalid URL %s: no host (expected %s://host:port/db)", masked, u.Scheme)
		return ""
	}
	if _, err := goredis.ParseURL(raw); err != nil {
		p.errorf(line, field, "invalid URL %s: %s", masked, reason(err))
		return ""
	}
	return u.Scheme
}

// redisTLSKeys are the keys of backend.redis.tls.
var redisTLSKeys = []string{"enabled", "ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"}

func (p *parser) tls(e entry, r *Redis, scheme string) {
	const path = "backend.redis.tls"
	sec, enabledSet := p.tlsFields(e, path, &r.TLS)
	t := &r.TLS
	switch scheme {
	case "rediss":
		if enabledSet && !t.Enabled {
			p.errorf(sec["enabled"].line, path+".enabled", "is false, but a rediss:// URL always uses TLS (use redis:// for plain connections)")
		}
		t.Enabled = true
	case "redis":
		if !t.Enabled {
			for _, f := range []struct {
				key string
				on  bool
			}{{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
				{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
				if f.on {
					p.errorf(sec[f.key].line, path+"."+f.key, "has no effect: TLS is off (set tls.enabled: true or use a rediss:// URL)")
				}
			}
		}
	}
	if t.CertFile != "" && t.KeyFile == "" {
		p.errorf(sec["cert_file"].line, path+".key_file", "is required with cert_file")
	}
	if t.KeyFile != "" && t.CertFile == "" {
		p.errorf(sec["key_file"].line, path+".cert_file", "is required with key_file")
	}
}

// tlsFields reads a tls section at path into t: its files, server name
// and flags. It reports the section's entries and whether enabled was
// given.
func (p *parser) tlsFields(e entry, path string, t *TLS) (map[string]entry, bool) {
	var sec map[string]entry
	if e.ok() {
		m, ok := p.mapping(e.val, e.line, path)
		if !ok {
			return nil, false
		}
		var es []entry
		if m != nil {
			es = p.entries(m, path)
		}
		sec = p.fields(es, path, path, redisTLSKeys...)
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"ca_file", &t.CAFile}, {"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}, {"server_name", &t.ServerName}} {
		if e, ok := sec[f.key]; ok {
			*f.dst, _ = p.str(e, path+"."+f.key)
		}
	}
	enabledSet := false
	if e, ok := sec["enabled"]; ok && !isNull(e.val) {
		t.Enabled, enabledSet = p.boolean(e, path+".enabled")
	}
	if e, ok := sec["insecure_skip_verify"]; ok {
		t.InsecureSkipVerify, _ = p.boolean(e, path+".insecure_skip_verify")
	}
	return sec, enabledSet
}
