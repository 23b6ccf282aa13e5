package onetick_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

func TestLeaseConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   onetick.LeaseConfig
		field string // "" = valid
		msg   string
	}{
		{"defaults", onetick.LeaseConfig{}, "", ""},
		{"explicit", onetick.LeaseConfig{TTL: 15 * time.Second, Renew: 5 * time.Second, SafetyMargin: time.Second}, "", ""},
		{"renew at half ttl", onetick.LeaseConfig{TTL: 10 * time.Second, Renew: 5 * time.Second}, "lease.renew", "below half the ttl"},
		{"renew above ttl", onetick.LeaseConfig{TTL: 10 * time.Second, Renew: 20 * time.Second}, "lease.renew", "below half"},
		{"negative renew", onetick.LeaseConfig{TTL: 10 * time.Second, Renew: -time.Second}, "lease.renew", "positive"},
		{"margin eats lease", onetick.LeaseConfig{TTL: 10 * time.Second, Renew: 3 * time.Second, SafetyMargin: 8 * time.Second}, "lease.safety_margin", "no usable lease"},
		{"negative margin", onetick.LeaseConfig{TTL: 10 * time.Second, SafetyMargin: -1}, "lease.safety_margin", "negative"},
		{"tiny ttl", onetick.LeaseConfig{TTL: time.Millisecond}, "lease.ttl", "at least"},
		{"negative ttl", onetick.LeaseConfig{TTL: -time.Second}, "lease.ttl", "at least"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ce *onetick.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, onetick.ErrInvalidConfig) {
				t.Fatalf("got %v, want a ConfigError on %s containing %q", err, tc.field, tc.msg)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	sched, err := cron.Parse("@every 1s", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(memory.Options{})
	good := func() onetick.Config {
		return onetick.Config{Backend: b, Jobs: []onetick.Job{{Name: "a", Schedule: sched}, {Name: "b", Schedule: sched, Prefer: onetick.PreferDuplicate, Payload: `{"x":1}`}}}
	}
	for _, tc := range []struct {
		name  string
		mod   func(*onetick.Config)
		field string
	}{
		{"ok", func(*onetick.Config) {}, ""},
		{"no backend", func(c *onetick.Config) { c.Backend = nil }, "backend"},
		{"duplicate name", func(c *onetick.Config) { c.Jobs[1].Name = "a" }, "jobs[a].name"},
		{"empty name", func(c *onetick.Config) { c.Jobs[0].Name = "" }, "jobs[0].name"},
		{"space in name", func(c *onetick.Config) { c.Jobs[0].Name = "a b" }, "jobs[a b].name"},
		{"no schedule", func(c *onetick.Config) { c.Jobs[0].Schedule = nil }, "jobs[a].schedule"},
		{"bad prefer", func(c *onetick.Config) { c.Jobs[0].Prefer = "both" }, "jobs[a].prefer"},
		{"bad payload", func(c *onetick.Config) { c.Jobs[0].Payload = "{" }, "jobs[a].payload"},
		{"negative grace", func(c *onetick.Config) { c.Jobs[0].Grace = -1 }, "jobs[a].grace"},
		{"negative catchup", func(c *onetick.Config) { c.Jobs[0].MaxCatchup = -1 }, "jobs[a].max_catchup"},
		{"negative maxlen", func(c *onetick.Config) { c.Jobs[0].MaxLen = -1 }, "jobs[a].max_len"},
		{"bad lease", func(c *onetick.Config) { c.Lease.Renew = time.Hour }, "lease.renew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mod(&c)
			_, err := onetick.New(c)
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *onetick.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("got %v, want a ConfigError on %s", err, tc.field)
			}
		})
	}
}

func TestLeaseToken(t *testing.T) {
	l := onetick.Lease{Holder: "host:12:ab|cd", Epoch: 42}
	got, err := onetick.ParseToken(l.Token())
	if err != nil || got != l {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "nopipe", "x|", "x|y", "x|1.5"} {
		if _, err := onetick.ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
	if id := onetick.TickID("billing", 1764547200000); id != "billing:1764547200000" {
		t.Errorf("TickID = %q", id)
	}
	if s := onetick.Slot(1764547200000).String(); s != "2025-12-01T00:00:00.000Z" {
		t.Errorf("Slot.String = %q", s)
	}
}
