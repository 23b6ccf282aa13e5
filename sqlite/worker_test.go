package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/sqlite"
	"github.com/onetick/onetick/worker"
	"github.com/onetick/onetick/worker/workertest"
)

// The worker suite re-executes this test binary as worker processes on
// the same file; they learn the file from this variable.
const envWorkerFile = "ONETICK_WORKERTEST_SQLITE_FILE"

// init runs before TestMain, so that a worker process never runs tests.
func init() {
	workertest.RunChildIfAsked(func() (worker.Store, func()) {
		b, err := sqlite.Open(os.Getenv(envWorkerFile), sqlite.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return b.WorkerStore(""), func() { _ = b.Close() }
	})
}

// TestWorkerConformance runs the worker suite on a file, with part of the
// fleet in other processes that open the same file (and are killed with
// SIGKILL by the suite).
func TestWorkerConformance(t *testing.T) {
	// Mostly waiting on the suite's timers: it runs beside the others.
	t.Parallel()
	workertest.Exercise(t, workertest.Harness{New: func(t *testing.T) workertest.Env {
		path := filepath.Join(t.TempDir(), "onetick.db")
		openB := func(t *testing.T) *sqlite.Backend {
			b, err := sqlite.Open(path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		}
		b := openB(t)
		return workertest.Env{
			Backend: b,
			// Each store has a Backend of its own: its own connection to
			// the file, as a separate worker process would have.
			Store:   func(t *testing.T) worker.Store { return openB(t).WorkerStore("") },
			StoreOf: func(t *testing.T, group string) worker.Store { return openB(t).WorkerStore(group) },
			Append: func(t *testing.T, stream string, r onetick.TickRecord) {
				operator(t, path, `INSERT INTO entries (stream, ms, job, slot, tick, epoch, replica, payload)
					VALUES (?, strftime('%s', 'now') * 1000, ?, ?, ?, ?, ?, ?)`,
					stream, r.Job, int64(r.Slot), r.Tick, int64(r.Epoch), r.Replica, r.Payload)
			},
			Command: func(*testing.T) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envWorkerFile+"="+path)
				return cmd
			},
		}
	}})
}

var _ = context.Background
