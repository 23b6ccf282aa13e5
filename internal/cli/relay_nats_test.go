package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onetick/onetick/relay/natsrelay"
)

// TestRelayNATSDaemon: `onetick run` with a job relayed to NATS claims its
// ticks into the stream, and its worker's relay consumer publishes them to
// JetStream (the machine's nats-server), each tick with its id as Msg-Id.
func TestRelayNATSDaemon(t *testing.T) {
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := time.Now().UnixNano()
	name, subject := fmt.Sprintf("OT_cli_%d", n), fmt.Sprintf("otcli%d", n)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("deleting stream %s: %v", name, err)
		}
	})
	startDaemon(t, writeConfig(t, fmt.Sprintf(`http:
  listen: 127.0.0.1:0
jobs:
  - name: pub
    schedule: "@every 1s"
    prefer: duplicate
    relay:
      nats: {url: "nats://127.0.0.1:4222", subject: %s, stream: %s}
`, subject, name)))
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("waiting for a published tick: %v", err)
		}
		id := m.Headers().Get(jetstream.MsgIDHeader)
		var body natsrelay.Message
		if err := json.Unmarshal(m.Data(), &body); err != nil || body.Tick != id || body.Job != "pub" || !strings.HasPrefix(id, "pub:") {
			t.Fatalf("message %s %q: %+v, %v", id, m.Data(), body, err)
		}
		if seen[id] {
			t.Fatalf("tick %s published twice", id)
		}
		seen[id] = true
	}
}
