package postgres_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
)

// NightlyReport is the River job a relayed tick of the job
// "nightly-report" becomes: the tick (job, slot, tick id, payload) as
// args, under the relay's kind.
type NightlyReport struct{ postgres.RiverTick }

func (NightlyReport) Kind() string { return "nightly_report" }

// nightlyWorker is the team's River worker, as ever.
type nightlyWorker struct {
	river.WorkerDefaults[NightlyReport]
	done chan NightlyReport
}

func (w nightlyWorker) Work(ctx context.Context, j *river.Job[NightlyReport]) error {
	select {
	case w.done <- j.Args:
	default:
	}
	return nil
}

// Keep your queue: onetick decides each slot of a job once across its
// replicas and inserts it as a River job in the claim's own transaction;
// the team's River workers run it, with River's retries. River's tables
// are migrated by the team, as ever (rivermigrate, or `river migrate-up`).
func Example_river() {
	ctx := context.Background()
	url, ot, rs := pgtest.URL(), fmt.Sprintf("example_onetick_%d", os.Getpid()), fmt.Sprintf("example_river_%d", os.Getpid())
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+ot+" CASCADE; DROP SCHEMA IF EXISTS "+rs+" CASCADE") //nolint:errcheck

	// River, as the team runs it: its tables, and its workers.
	quiet := slog.New(slog.DiscardHandler)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+rs); err != nil {
		log.Fatal(err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: rs, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		log.Fatal(err)
	}
	done := make(chan NightlyReport, 1)
	workers := river.NewWorkers()
	river.AddWorker(workers, nightlyWorker{done: done})
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: rs, Logger: quiet, Workers: workers,
		Queues: map[string]river.QueueConfig{"reports": {MaxWorkers: 4}}})
	if err != nil {
		log.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rc.Stop(ctx) //nolint:errcheck

	// onetick on the same database, relaying the job's ticks to River.
	b, err := postgres.New(pool, postgres.Options{Schema: ot, RiverSchema: rs})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	every, _ := cron.Parse("@every 1s", nil) // "0 2 * * *" in production
	s, err := onetick.New(onetick.Config{Backend: b, Replica: "a", Logger: quiet, Jobs: []onetick.Job{{
		Name: "nightly-report", Schedule: every, Payload: `{"format":"pdf"}`,
		Relay: &onetick.Relay{Kind: onetick.RelayRiver, Queue: "reports", Type: "nightly_report", MaxAttempts: 5},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx) }() // refuses to start if River's tables are missing or of another version

	select {
	case r := <-done:
		fmt.Println(r.Job, r.Origin, r.Payload)
	case err := <-ran:
		fmt.Println("the scheduler stopped:", err)
	case <-time.After(30 * time.Second):
		fmt.Println("no report within 30s")
	}
	stop()
	<-ran
	// Output: nightly-report schedule {"format":"pdf"}
}
