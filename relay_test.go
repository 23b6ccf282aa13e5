package onetick_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

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

// TestRelayStatusNotBacklogger: a store that is no RelayBacklogger
// (memory) lists the relays the jobs use with no backlog and no error.
func TestRelayStatusNotBacklogger(t *testing.T) {
	every, err := cron.Parse("@every 1h", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := memory.New(memory.Options{})
	defer b.Close()
	st, err := onetick.ReadStatus(context.Background(), b, []onetick.Job{
		{Name: "a", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayRiver, Queue: "q"}},
		{Name: "plain", Schedule: every}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Relays) != 1 || st.Relays[0].Backlog != nil || st.Relays[0].Error != "" ||
		st.Relays[0].Kind != onetick.RelayRiver || st.Relays[0].Queue != "q" || len(st.Relays[0].Jobs) != 1 {
		t.Errorf("relays %+v", st.Relays)
	}
	st, err = onetick.ReadStatus(context.Background(), b, []onetick.Job{{Name: "plain", Schedule: every}}, 1)
	if err != nil || st.Relays == nil || len(st.Relays) != 0 {
		t.Errorf("no relay: %+v %v, want an empty list", st.Relays, err)
	}
}

// TestRelayNATSGoesToTheStream: a NATS relay needs no Relayer (its hand-off
// is not in the claim): the scheduler starts on a store that relays
// nothing, and the tick is appended to the job's stream, where the
// worker's relay consumer publishes it.
func TestRelayNATSGoesToTheStream(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(start)
	mem := memory.New(memory.Options{Clock: fc})
	defer mem.Close()
	sched, _ := cron.Parse("@every 5s", nil)
	s, err := onetick.New(onetick.Config{Backend: mem, Replica: "r", Clock: fc,
		Jobs: []onetick.Job{{Name: "pub", Schedule: sched, Stream: "s", Relay: &onetick.Relay{Kind: onetick.RelayNATS}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	block(t, fc, 3)
	fc.Advance(5 * time.Second)
	for len(mem.Stream("s")) < 1 {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v before the tick reached the stream", err)
		default:
		}
		block(t, fc, 3)
	}
	if got := mem.Stream("s")[0]; got.Job != "pub" {
		t.Fatalf("stream entry %+v, want job pub", got)
	}
}
