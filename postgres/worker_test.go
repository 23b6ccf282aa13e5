package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
	"github.com/onetick/onetick/worker"
	"github.com/onetick/onetick/worker/workertest"
)

// The conformance suite re-executes this test binary as worker processes;
// they learn their database and schema from these variables.
const (
	envURL    = "ONETICK_WORKERTEST_POSTGRES_URL"
	envSchema = "ONETICK_WORKERTEST_POSTGRES_SCHEMA"
)

// init runs before TestMain, so that a worker process never runs tests.
func init() {
	workertest.RunChildIfAsked(func() (worker.Store, func()) {
		b, err := postgres.Open(context.Background(), os.Getenv(envURL), postgres.Options{Schema: os.Getenv(envSchema)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return b.WorkerStore(""), func() { _ = b.Close() }
	})
}

func TestWorkerConformance(t *testing.T) {
	t.Parallel()
	workertest.Exercise(t, workertest.Harness{New: func(t *testing.T) workertest.Env {
		b := open(t)
		t.Cleanup(func() { _ = b.Close() })
		return workertest.Env{
			Backend: b,
			Store:   func(t *testing.T) worker.Store { return reopen(t, b).WorkerStore("") },
			StoreOf: func(t *testing.T, group string) worker.Store { return reopen(t, b).WorkerStore(group) },
			Append: func(t *testing.T, stream string, r onetick.TickRecord) {
				// As a claim appends: under the append lock, so that entry
				// ids become visible in order.
				tx, err := b.Pool().Begin(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(context.Background())
				for _, q := range []struct {
					sql  string
					args []any
				}{
					{`SELECT pg_advisory_xact_lock(1869505908, hashtext($1))`, []any{b.Schema() + ":append"}},
					{b.Q(`INSERT INTO {s}.entries (stream, ms, job, slot, tick, epoch, replica, payload)
						VALUES ($1, {s}.ms(clock_timestamp()), $2, $3, $4, $5, $6, $7)`),
						[]any{stream, r.Job, int64(r.Slot), r.Tick, int64(r.Epoch), r.Replica, r.Payload}},
					{`SELECT pg_notify($1, '')`, []any{b.Schema() + ".append"}},
				} {
					if _, err := tx.Exec(context.Background(), q.sql, q.args...); err != nil {
						t.Fatal(err)
					}
				}
				if err := tx.Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
			},
			Command: func(*testing.T) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envURL+"="+pgtest.URL(), envSchema+"="+b.Schema())
				return cmd
			},
		}
	}})
}
