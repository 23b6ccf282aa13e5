package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// --log-level debug adds the elector's DEBUG line for each lease renewal
// (the chaos run records them); a level it does not know is bad input.
func TestRunLogLevel(t *testing.T) {
	t.Run("debug logs each renewal", func(t *testing.T) {
		d := startDaemon(t, writeConfig(t, daemonConfig), "--log-level", "debug")
		m := d.logs.wait(t, "renewed leadership", d.done)
		if m["level"] != "DEBUG" || m["trusted_until"] == nil || m["epoch"] == nil {
			t.Fatalf("renewal line %v: want level DEBUG with epoch and trusted_until", m)
		}
	})
	t.Run("an unknown level", func(t *testing.T) {
		var stderr bytes.Buffer
		code := Main(context.Background(), []string{"run", "--config", writeConfig(t, daemonConfig), "--memory", "--log-level", "loud"},
			Env{Stdout: io.Discard, Stderr: &stderr})
		if code != 2 || !strings.Contains(stderr.String(), `--log-level: must be debug, info, warn or error, got "loud"`) {
			t.Fatalf("exit %d, stderr %q; want 2 naming --log-level", code, stderr.String())
		}
	})
}
