package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
)

func TestLedgerSection(t *testing.T) {
	f, err := config.Parse("c.yaml", []byte("ledger:\n  max_age: 48h\n  max_per_job: 50\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Ledger.Retention(); got != (onetick.LedgerRetention{MaxAge: 48 * time.Hour, MaxPerJob: 50}) {
		t.Fatalf("retention %+v", got)
	}
	f, err = config.Parse("c.yaml", []byte("ledger:\n  off: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Ledger.Retention(); got != (onetick.LedgerRetention{MaxAge: onetick.DefaultLedgerMaxAge, MaxPerJob: onetick.DefaultLedgerMaxPerJob, Off: true}) {
		t.Fatalf("defaults %+v", got)
	}
	for doc, want := range map[string]string{
		"ledger:\n  max_age: 10s\n":         "c.yaml:2: ledger.max_age: must be at least 1m0s",
		"ledger:\n  max_age: -1h\n":         "c.yaml:2: ledger.max_age: must not be negative",
		"ledger:\n  max_per_job: -1\n":      "c.yaml:2: ledger.max_per_job: must not be negative",
		"ledger:\n  max_per_job: 2000000\n": "c.yaml:2: ledger.max_per_job: must be between 0 and 1000000",
		"ledger:\n  off: maybe\n":           "c.yaml:2: ledger.off: must be true or false",
		"ledger:\n  keep: 3\n":              "c.yaml:2: ledger.keep: unknown field",
	} {
		_, err := config.Parse("c.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
}
