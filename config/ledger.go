package config

import (
	"math"
	"time"

	"github.com/onetick/onetick"
)

// Ledger bounds the run ledger (docs/ledger.md): what the store keeps of
// every slot's fate. After Parse every field holds its effective value.
type Ledger struct {
	// MaxAge drops records whose slot is older. Default 7 days; at least
	// one minute.
	MaxAge Duration `yaml:"max_age"`
	// MaxPerJob keeps at most this many records of a job, the newest
	// slots. Default 1000; at most 1,000,000.
	MaxPerJob int `yaml:"max_per_job"`
	// Off keeps no ledger: onetick runs, onetick why, the job page's runs
	// and deadlines then have nothing to read.
	Off bool `yaml:"off"`
}

// Retention is the ledger's bounds for the store.
func (l Ledger) Retention() onetick.LedgerRetention {
	return onetick.LedgerRetention{MaxAge: l.MaxAge.D(), MaxPerJob: l.MaxPerJob, Off: l.Off}
}

// ledgerKeys are the keys of the ledger section.
var ledgerKeys = []string{"max_age", "max_per_job", "off"}

// Bounds of the ledger section.
const (
	minLedgerAge       = time.Minute
	maxLedgerPerJob    = 1_000_000
	defaultLedgerAge   = onetick.DefaultLedgerMaxAge
	defaultLedgerCount = onetick.DefaultLedgerMaxPerJob
)

// ledger walks the ledger section.
func (p *parser) ledger(e entry) {
	const path = "ledger"
	l := &p.f.Ledger
	defer func() {
		if l.MaxAge == 0 {
			l.MaxAge = Duration(defaultLedgerAge)
		}
		if l.MaxPerJob == 0 {
			l.MaxPerJob = defaultLedgerCount
		}
	}()
	if !e.ok() {
		return
	}
	m, ok := p.mapping(e.val, e.line, path)
	if m == nil || !ok {
		return
	}
	sec := p.fields(p.entries(m, path), path, path, ledgerKeys...)
	if e, ok := sec["max_age"]; ok {
		if d, ok := p.dur(e, path+".max_age"); ok {
			switch {
			case d < 0:
				p.errorf(e.line, path+".max_age", "must not be negative, got %s", d.D())
			case d != 0 && d.D() < minLedgerAge:
				p.errorf(e.line, path+".max_age", "must be at least %s, got %s", minLedgerAge, d.D())
			default:
				l.MaxAge = d
			}
		}
	}
	if e, ok := sec["max_per_job"]; ok {
		if v, ok := p.integer(e, path+".max_per_job", 0, maxLedgerPerJob); ok {
			l.MaxPerJob = int(min(v, math.MaxInt32))
		}
	}
	if e, ok := sec["off"]; ok {
		if v, ok := p.boolean(e, path+".off"); ok {
			l.Off = v
		}
	}
}
