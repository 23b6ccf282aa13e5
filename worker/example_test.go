package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/worker"
)

// A scheduler fires a job every second; a worker on the same store runs
// each tick once. With Redis, open the store with
// redis.Open(url, opts) and b.WorkerStore("onetick"), and run as many
// workers, in as many processes, as you like.
func Example() {
	backend := memory.New(memory.Options{})
	quiet := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	every, _ := cron.Parse("@every 1s", nil)
	s, err := onetick.New(onetick.Config{Backend: backend, Logger: quiet, Jobs: []onetick.Job{
		{Name: "billing", Schedule: every, Payload: `{"account":42}`},
	}})
	if err != nil {
		panic(err)
	}

	w, err := worker.New(worker.Config{Store: backend.WorkerStore("onetick"), Logger: quiet})
	if err != nil {
		panic(err)
	}
	type invoice struct {
		Account int `json:"account"`
	}
	var once sync.Once
	err = worker.HandleJSON(w, "billing", func(ctx context.Context, t *worker.Task, inv invoice) error {
		// t.Tick ("billing:<slot ms>") is the same on every attempt and
		// redelivery: pass it downstream as the idempotency key.
		once.Do(func() {
			fmt.Printf("%s, attempt %d: invoice account %d\n", t.Job, t.Attempt, inv.Account)
			cancel()
		})
		return nil
	}, worker.WithOverlap(worker.OverlapSkip))
	if err != nil {
		panic(err)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.Run(ctx) }()
	_ = w.Run(ctx) // returns once ctx is done and the handler returned
	wg.Wait()
	// Output: billing, attempt 1: invoice account 42
}
