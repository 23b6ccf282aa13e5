package redis_test

import (
	"context"
	"encoding/json"
	"log"
	"time"

	"github.com/hibiken/asynq"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/redis"
)

// A job relayed to asynq: every replica runs the scheduler on the Redis
// asynq uses, and the team's asynq servers work the ticks as tasks of
// type "report:daily" in queue "reports", each slot exactly once (the
// claim's own script writes the task). The payload is a RelayedTick.
func ExampleRelayedTick() {
	ctx := context.Background()
	b, err := redis.Open("redis://redis.internal:6379/0", redis.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	daily, err := cron.Parse("0 6 * * *", nil)
	if err != nil {
		log.Fatal(err)
	}
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "a", Jobs: []onetick.Job{{
		Name: "report", Schedule: daily, Payload: `{"format":"pdf"}`,
		Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "reports", Type: "report:daily",
			MaxAttempts: 5, Retention: 48 * time.Hour},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Println(s.Run(ctx)) }() // refuses to start on Redis Cluster or a newer asynq layout

	// The team's own asynq server, unchanged.
	mux := asynq.NewServeMux()
	mux.HandleFunc("report:daily", func(ctx context.Context, t *asynq.Task) error {
		var tick redis.RelayedTick
		if err := json.Unmarshal(t.Payload(), &tick); err != nil {
			return asynq.SkipRetry
		}
		log.Printf("report for slot %s, payload %s", time.UnixMilli(tick.Slot).UTC(), tick.Payload)
		return nil
	})
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: "redis.internal:6379"},
		asynq.Config{Queues: map[string]int{"reports": 1}})
	if err := srv.Run(mux); err != nil {
		log.Fatal(err)
	}
}
