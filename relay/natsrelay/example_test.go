package natsrelay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/relay/natsrelay"
	"github.com/onetick/onetick/worker"
)

// Keep your queue with NATS JetStream: onetick claims each slot of the job
// once (here on the in-process store; any store), a worker's relay
// consumer publishes it with Nats-Msg-Id = the tick id, and your own
// JetStream consumer receives it, unchanged. `onetick run` does the first
// two from the configuration file's `relay: {nats: …}`; this is the same in
// Go, against the nats-server on 127.0.0.1:4222.
func Example_jetStream() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	stream := fmt.Sprintf("EXAMPLE_TICKS_%d", time.Now().UnixNano())
	subject := "ticks." + stream
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject},
		Storage: jetstream.MemoryStorage}); err != nil {
		log.Fatal(err)
	}
	defer js.DeleteStream(ctx, stream) //nolint:errcheck

	// onetick: the scheduler, and a worker whose handler is the relay
	// consumer.
	quiet := slog.New(slog.DiscardHandler)
	b := memory.New(memory.Options{})
	defer b.Close()
	every, _ := cron.Parse("@every 1s", nil) // "0 2 * * *" in production
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "a", Logger: quiet, Jobs: []onetick.Job{{
		Name: "report", Schedule: every, Payload: `{"format":"pdf"}`, Stream: "ticks", Prefer: onetick.PreferDuplicate,
		Relay: &onetick.Relay{Kind: onetick.RelayNATS, Queue: subject},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	pub, err := natsrelay.New(natsrelay.Config{URL: "nats://127.0.0.1:4222", Subject: subject, Stream: stream,
		Prefer: onetick.PreferDuplicate})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	w, err := worker.New(worker.Config{Store: b.WorkerStore(""), Consumer: "w1", Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Handle("report", pub, worker.WithStream("ticks"), worker.WithPrefer(onetick.PreferDuplicate)); err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran, worked := make(chan error, 1), make(chan error, 1)
	go func() { ran <- s.Run(runCtx) }()
	go func() { worked <- w.Run(runCtx) }()

	// Your consumer: each tick once (inside JetStream's duplicate window).
	got := make(chan natsrelay.Message, 1)
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "report", FilterSubject: subject})
	if err != nil {
		log.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var t natsrelay.Message // job, slot (Unix ms), tick, payload
		if err := json.Unmarshal(m.Data(), &t); err == nil && m.Headers().Get(jetstream.MsgIDHeader) == t.Tick {
			select {
			case got <- t:
			default:
			}
		}
		_ = m.Ack()
	})
	if err != nil {
		log.Fatal(err)
	}

	select {
	case t := <-got:
		fmt.Println(t.Job, t.Tick == onetick.TickID(t.Job, onetick.Slot(t.Slot)), string(t.Payload))
	case <-time.After(30 * time.Second):
		fmt.Println("no tick within 30s")
	}
	cc.Stop()
	stop()
	<-ran
	<-worked
	// Output: report true {"format":"pdf"}
}
