package config

import (
	"errors"
	"time"

	"github.com/onetick/onetick"
)

// Lease is the election timing. After Parse every field holds its effective
// value.
type Lease struct {
	TTL          Duration `yaml:"ttl"`
	Renew        Duration `yaml:"renew"`
	SafetyMargin Duration `yaml:"safety_margin"`
}

// leaseKeys are the keys of the lease section.
var leaseKeys = []string{"ttl", "renew", "safety_margin"}

// lease walks the lease section and returns the effective ttl.
func (p *parser) lease(e entry) time.Duration {
	var lc onetick.LeaseConfig
	bad := false
	if e.ok() {
		m, ok := p.mapping(e.val, e.line, "lease")
		bad = !ok
		if m != nil {
			sec := p.fields(p.entries(m, "lease"), "lease", "lease", leaseKeys...)
			for _, f := range []struct {
				key string
				dst *time.Duration
			}{{"ttl", &lc.TTL}, {"renew", &lc.Renew}, {"safety_margin", &lc.SafetyMargin}} {
				if e, ok := sec[f.key]; ok {
					d, ok := p.dur(e, "lease."+f.key)
					*f.dst = time.Duration(d)
					bad = bad || !ok
				}
			}
		}
	}
	if !bad {
		if err := lc.Validate(); err != nil {
			var ce *onetick.ConfigError
			field, msg := "lease", err.Error()
			if errors.As(err, &ce) {
				field, msg = ce.Field, ce.Msg
			}
			line, ok := p.f.lines[field]
			if !ok {
				line = p.f.lines["lease"]
			}
			p.errorf(line, field, "%s", msg)
		}
	}
	d := lc.WithDefaults()
	p.f.Lease = Lease{TTL: Duration(d.TTL), Renew: Duration(d.Renew), SafetyMargin: Duration(d.SafetyMargin)}
	return d.TTL
}
