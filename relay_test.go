package onetick_test

import (
	"context"
	"strings"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// TestRelayRefusedByAStoreThatCannot: a job with a relay does not start
// on a store that cannot hand its ticks over (they would go to a stream
// nobody reads), and a relay's fields are validated.
func TestRelayRefusedByAStoreThatCannot(t *testing.T) {
	every, err := cron.Parse("@every 1s", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(memory.Options{})
	defer b.Close()
	s, err := onetick.New(onetick.Config{Backend: b, Jobs: []onetick.Job{{Name: "bill", Schedule: every,
		Relay: &onetick.Relay{Kind: onetick.RelayRiver}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot relay ticks to river") {
		t.Fatalf("Run: %v, want the relay refused", err)
	}
	_, err = onetick.New(onetick.Config{Backend: b, Jobs: []onetick.Job{{Name: "bill", Schedule: every,
		Relay: &onetick.Relay{Kind: "kafka"}}}})
	if err == nil || !strings.Contains(err.Error(), "relay") {
		t.Fatalf("New with relay kind kafka: %v", err)
	}
}
