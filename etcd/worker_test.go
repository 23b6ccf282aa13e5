package etcd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/internal/etcdtest"
	"github.com/onetick/onetick/worker"
	"github.com/onetick/onetick/worker/workertest"
)

// The conformance suite re-executes this test binary as worker processes;
// they learn their etcd and prefix from these variables.
const (
	envEndpoint = "ONETICK_WORKERTEST_ETCD_ENDPOINT"
	envPrefix   = "ONETICK_WORKERTEST_ETCD_PREFIX"
)

// init runs before TestMain, so that a worker process never runs tests.
func init() {
	workertest.RunChildIfAsked(func() (worker.Store, func()) {
		b, err := etcd.Open(context.Background(), etcd.Config{Endpoints: []string{os.Getenv(envEndpoint)}},
			etcd.Options{Prefix: os.Getenv(envPrefix), MaxTxnOps: etcdtest.MaxTxnOps})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return b.WorkerStore(""), func() { _ = b.Close() }
	})
}

// TestWorkerConformance runs the worker store suite against a real etcd
// process; each worker store has a connection of its own, as a separate
// worker process would; part of the fleet runs as OS processes that the
// suite kills with SIGKILL.
func TestWorkerConformance(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	workertest.Exercise(t, workertest.Harness{New: func(t *testing.T) workertest.Env {
		b := open(t, s, etcd.Options{})
		t.Cleanup(func() { _ = b.Close() })
		other := func(t *testing.T) *etcd.Backend {
			o, err := etcd.Open(context.Background(), etcd.Config{Endpoints: []string{s.Endpoint()}},
				etcd.Options{Prefix: b.Prefix(), MaxTxnOps: etcdtest.MaxTxnOps})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = o.Close() })
			return o
		}
		return workertest.Env{
			Backend: b,
			Store:   func(t *testing.T) worker.Store { return other(t).WorkerStore("") },
			StoreOf: func(t *testing.T, group string) worker.Store { return other(t).WorkerStore(group) },
			Append: func(t *testing.T, stream string, r onetick.TickRecord) {
				if err := b.AppendEntry(context.Background(), stream, r); err != nil {
					t.Fatal(err)
				}
			},
			Command: func(*testing.T) *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envEndpoint+"="+s.Endpoint(), envPrefix+"="+b.Prefix())
				return cmd
			},
		}
	}})
}
