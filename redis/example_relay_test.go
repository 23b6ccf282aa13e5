package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/testsupport/redisserver"
)

// Keep your queue: every replica runs the scheduler on the Redis asynq
// uses; onetick decides each slot of the job once across the replicas and
// its claim's own script writes the slot as an asynq task (type
// "report:daily", queue "reports"). The team's asynq servers work the
// ticks as ever, each slot exactly once. The payload is a RelayedTick.
func ExampleRelayedTick() {
	ctx := context.Background()
	rs, err := redisserver.Start() // in production: the Redis your asynq servers use
	if err != nil {
		log.Fatal(err)
	}
	defer rs.Stop()

	b, err := redis.Open(rs.URL(), redis.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	every, _ := cron.Parse("@every 1s", nil) // "0 6 * * *" in production
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "a", Logger: slog.New(slog.DiscardHandler),
		Jobs: []onetick.Job{{
			Name: "report", Schedule: every, Payload: `{"format":"pdf"}`,
			Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "reports", Type: "report:daily",
				MaxAttempts: 5, Retention: 48 * time.Hour},
		}}})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx) }() // refuses to start on Redis Cluster or a newer asynq layout

	// The team's own asynq server, unchanged.
	done := make(chan redis.RelayedTick, 1)
	mux := asynq.NewServeMux()
	mux.HandleFunc("report:daily", func(ctx context.Context, t *asynq.Task) error {
		var tick redis.RelayedTick
		if err := json.Unmarshal(t.Payload(), &tick); err != nil {
			return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
		}
		select {
		case done <- tick:
		default:
		}
		return nil
	})
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: rs.Addr()},
		asynq.Config{Queues: map[string]int{"reports": 1}, LogLevel: asynq.ErrorLevel})
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}

	select {
	case tick := <-done:
		fmt.Println(tick.Job, tick.Slot%1000 == 0, tick.Payload)
	case err := <-ran:
		fmt.Println("the scheduler stopped:", err)
	case <-time.After(30 * time.Second):
		fmt.Println("no report within 30s")
	}
	srv.Shutdown()
	stop()
	<-ran
	// Output: report true {"format":"pdf"}
}
