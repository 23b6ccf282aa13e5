package config

import (
	"regexp"
	"strings"

	"github.com/onetick/onetick/internal/redact"
)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// Postgres configures the PostgreSQL backend.
type Postgres struct {
	// URL is postgres://user:password@host:port/db?sslmode=... (any form
	// pgx accepts). It may carry credentials: never log it unmasked.
	URL string `yaml:"url"`
	// Schema holds onetick's tables; default "onetick". Several fleets can
	// share a database with one schema each.
	Schema string `yaml:"schema"`
	// ClockTolerance: claims for slots further ahead of the database's
	// clock are refused. Default 100ms.
	ClockTolerance Duration `yaml:"clock_tolerance"`
	// EntryRetention deletes stream entries older than this; default 0:
	// kept (trim per job with max_len).
	EntryRetention Duration `yaml:"entry_retention"`
	// RiverSchema is where River's tables are, for jobs relayed to River;
	// default "": the connection's search_path (usually public).
	RiverSchema string `yaml:"river_schema"`
}

// postgresKeys are the keys of backend.postgres.
var postgresKeys = []string{"url", "schema", "clock_tolerance", "entry_retention", "river_schema"}

func (p *parser) postgres(e entry) {
	const path = "backend.postgres"
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return
	}
	pg := &Postgres{Schema: "onetick", ClockTolerance: Duration(DefaultClockTolerance)}
	p.f.Backend.Postgres = pg
	var sec map[string]entry
	if m != nil {
		sec = p.fields(p.entries(m, path), path, path, postgresKeys...)
	}
	if x, ok := sec["url"]; ok {
		pg.URL, _ = p.str(x, path+".url")
		if pg.URL != "" {
			p.secrets = append(p.secrets, pg.URL)
			if pw := urlPassword(pg.URL); pw != "" {
				p.secrets = append(p.secrets, pw)
			}
			if !strings.HasPrefix(pg.URL, "postgres://") && !strings.HasPrefix(pg.URL, "postgresql://") {
				p.errorf(x.line, path+".url", "want a URL postgres://user@host:port/db (keyword=value connection strings are not accepted; the value is not shown, it may hold a password)")
			}
		}
	}
	if pg.URL == "" {
		p.errorf(e.line, path+".url", "is required (for example postgres://onetick@127.0.0.1:5432/onetick)")
	}
	if x, ok := sec["schema"]; ok {
		if v, ok := p.str(x, path+".schema"); ok && v != "" {
			if !schemaName.MatchString(v) {
				p.errorf(x.line, path+".schema", "want lower-case letters, digits and _ (at most 40), starting with a letter or _, got %q", short(v))
			}
			pg.Schema = v
		}
	}
	if x, ok := sec["river_schema"]; ok {
		if v, ok := p.str(x, path+".river_schema"); ok && v != "" {
			if !schemaName.MatchString(v) {
				p.errorf(x.line, path+".river_schema", "want lower-case letters, digits and _ (at most 40), starting with a letter or _, got %q", short(v))
			}
			pg.RiverSchema = v
		}
	}
	for _, k := range []struct {
		key string
		dst *Duration
	}{{"clock_tolerance", &pg.ClockTolerance}, {"entry_retention", &pg.EntryRetention}} {
		if x, ok := sec[k.key]; ok {
			if d, ok := p.dur(x, path+"."+k.key); ok {
				if d < 0 {
					p.errorf(x.line, path+"."+k.key, "must not be negative, got %s", d)
				} else if d != 0 {
					*k.dst = d
				}
			}
		}
	}
}

// urlPassword returns the password part of a URL, for redaction.
func urlPassword(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// MaskedPostgresURL is the PostgreSQL URL without its password, for logs.
func (f *File) MaskedPostgresURL() string {
	if f.Backend.Postgres == nil {
		return ""
	}
	return redact.URL(f.Backend.Postgres.URL)
}

// Shared says whether the configuration names a store shared by replicas
// (Redis, PostgreSQL or etcd) rather than an embedded one.
func (f *File) Shared() bool {
	return f.Backend.Redis != nil || f.Backend.Postgres != nil || f.Backend.Etcd != nil
}

// MaskedStore names the shared store for logs and errors, without
// credentials; "" for an embedded one.
func (f *File) MaskedStore() string {
	switch {
	case f.Backend.Redis != nil:
		return "redis " + f.MaskedRedisURL()
	case f.Backend.Postgres != nil:
		return "postgres " + f.MaskedPostgresURL() + " schema " + f.Backend.Postgres.Schema
	case f.Backend.Etcd != nil:
		return "etcd " + f.MaskedEtcd()
	}
	return ""
}
