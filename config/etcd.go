package config

import (
	"crypto/tls"
	"net/url"
	"strings"

	"github.com/onetick/onetick/etcd"
)

// Etcd configures the etcd backend.
type Etcd struct {
	// Endpoints are the client URLs of the cluster's members
	// (http://host:2379, or https:// with TLS).
	Endpoints []string `yaml:"endpoints"`
	// Prefix is prepended to every key; default "onetick/".
	Prefix string `yaml:"prefix"`
	// Username and Password authenticate with etcd's RBAC.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// TLS: tls.enabled, or https:// endpoints, turn it on.
	TLS TLS `yaml:"tls"`
	// ClockTolerance: claims for slots further ahead of the store's clock
	// (on etcd: the replica's own) are refused. Default 100ms.
	ClockTolerance Duration `yaml:"clock_tolerance"`
	// MaxTxnOps is the servers' --max-txn-ops (default 128): claims
	// larger than one transaction are split.
	MaxTxnOps int `yaml:"max_txn_ops"`
}

// etcdKeys are the keys of backend.etcd.
var etcdKeys = []string{"endpoints", "prefix", "username", "password", "tls", "clock_tolerance", "max_txn_ops"}

// DefaultEtcdPrefix is the etcd backend's default key prefix.
const DefaultEtcdPrefix = "onetick/"

func (p *parser) etcd(e entry) {
	const path = "backend.etcd"
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return
	}
	c := &Etcd{Prefix: DefaultEtcdPrefix, ClockTolerance: Duration(DefaultClockTolerance), MaxTxnOps: etcd.DefaultMaxTxnOps}
	p.f.Backend.Etcd = c
	var sec map[string]entry
	if m != nil {
		sec = p.fields(p.entries(m, path), path, path, etcdKeys...)
	}
	if x, ok := sec["endpoints"]; ok {
		c.Endpoints, _ = p.strList(x, path+".endpoints")
	}
	if len(c.Endpoints) == 0 {
		p.errorf(e.line, path+".endpoints", "is required (for example [http://127.0.0.1:2379])")
	}
	secure, plain := false, false
	for i, ep := range c.Endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
			p.errorf(sec["endpoints"].line, path+".endpoints", "entry %d: want http://host:port or https://host:port without credentials (the value is not shown)", i)
			continue
		}
		secure, plain = secure || u.Scheme == "https", plain || u.Scheme == "http"
	}
	if x, ok := sec["prefix"]; ok {
		if v, ok := p.str(x, path+".prefix"); ok && v != "" {
			c.Prefix = v
		}
	}
	if x, ok := sec["username"]; ok {
		c.Username, _ = p.str(x, path+".username")
	}
	if x, ok := sec["password"]; ok {
		c.Password, _ = p.str(x, path+".password")
		if c.Password != "" {
			p.secrets = append(p.secrets, c.Password)
		}
	}
	if c.Password != "" && c.Username == "" {
		p.errorf(sec["password"].line, path+".username", "is required with password")
	}
	if x, ok := sec["clock_tolerance"]; ok {
		if d, ok := p.dur(x, path+".clock_tolerance"); ok {
			if d < 0 {
				p.errorf(x.line, path+".clock_tolerance", "must not be negative, got %s", d)
			} else if d != 0 {
				c.ClockTolerance = d
			}
		}
	}
	if x, ok := sec["max_txn_ops"]; ok {
		if n, ok := p.integer(x, path+".max_txn_ops", 16, 1<<20); ok {
			c.MaxTxnOps = int(n)
		}
	}
	x, hasTLS := sec["tls"]
	if !hasTLS {
		x = entry{}
	}
	tsec, _ := p.tlsFields(x, path+".tls", &c.TLS)
	if secure {
		c.TLS.Enabled = true
	}
	if c.TLS.Enabled && plain {
		p.errorf(sec["endpoints"].line, path+".endpoints", "mixes http:// and https:// with TLS on: use https:// for every endpoint")
	}
	if !c.TLS.Enabled {
		for _, f := range []struct {
			key string
			on  bool
		}{{"ca_file", c.TLS.CAFile != ""}, {"cert_file", c.TLS.CertFile != ""}, {"key_file", c.TLS.KeyFile != ""},
			{"server_name", c.TLS.ServerName != ""}, {"insecure_skip_verify", c.TLS.InsecureSkipVerify}} {
			if f.on {
				p.errorf(tsec[f.key].line, path+".tls."+f.key, "has no effect: TLS is off (set tls.enabled: true or use https:// endpoints)")
			}
		}
	}
	if c.TLS.CertFile != "" && c.TLS.KeyFile == "" {
		p.errorf(tsec["cert_file"].line, path+".tls.key_file", "is required with cert_file")
	}
	if c.TLS.KeyFile != "" && c.TLS.CertFile == "" {
		p.errorf(tsec["key_file"].line, path+".tls.cert_file", "is required with key_file")
	}
}

// EtcdConfig returns how to reach the etcd backend and its options; ok is
// false without an etcd backend. Errors name the TLS field at fault.
func (f *File) EtcdConfig() (cfg etcd.Config, opts etcd.Options, ok bool, err error) {
	c := f.Backend.Etcd
	if c == nil {
		return etcd.Config{}, etcd.Options{}, false, nil
	}
	cfg = etcd.Config{Endpoints: c.Endpoints, Username: c.Username, Password: c.Password}
	if c.TLS.Enabled {
		host := ""
		if u, err := url.Parse(c.Endpoints[0]); err == nil {
			host = u.Hostname()
		}
		var tc *tls.Config
		if tc, err = f.tlsFrom(c.TLS, "backend.etcd.tls", host); err != nil {
			return etcd.Config{}, etcd.Options{}, true, err
		}
		cfg.TLS = tc
	}
	opts = etcd.Options{Prefix: c.Prefix, ClockTolerance: c.ClockTolerance.D(), MaxTxnOps: c.MaxTxnOps}
	return cfg, opts, true, nil
}

// MaskedEtcd names the etcd endpoints and prefix for logs (endpoints
// carry no credentials: the parser refuses them).
func (f *File) MaskedEtcd() string {
	if f.Backend.Etcd == nil {
		return ""
	}
	return strings.Join(f.Backend.Etcd.Endpoints, ",") + " prefix " + f.Backend.Etcd.Prefix
}
