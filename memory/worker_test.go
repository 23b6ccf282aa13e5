package memory_test

import (
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/worker"
	"github.com/onetick/onetick/worker/workertest"
)

func TestWorkerConformance(t *testing.T) {
	workertest.Exercise(t, workertest.Harness{New: func(t *testing.T) workertest.Env {
		b := memory.New(memory.Options{})
		t.Cleanup(func() { _ = b.Close() })
		return workertest.Env{
			Backend: b,
			Store:   func(*testing.T) worker.Store { return b.WorkerStore("") },
			StoreOf: func(_ *testing.T, group string) worker.Store { return b.WorkerStore(group) },
			Append: func(_ *testing.T, stream string, r onetick.TickRecord) {
				b.AppendEntry(stream, r)
			},
		}
	}})
}

// TestWorkerConformanceShardView: the workers' suite on shard 3 of 8.
func TestWorkerConformanceShardView(t *testing.T) {
	workertest.Exercise(t, workertest.Harness{New: func(t *testing.T) workertest.Env {
		s := memory.New(memory.Options{})
		t.Cleanup(func() { _ = s.Close() })
		v, err := s.Shard(3, 8)
		if err != nil {
			t.Fatal(err)
		}
		b := v.(*memory.Backend)
		return workertest.Env{
			Backend: b,
			Store:   func(*testing.T) worker.Store { return b.WorkerStore("") },
			StoreOf: func(_ *testing.T, group string) worker.Store { return b.WorkerStore(group) },
			Append: func(_ *testing.T, stream string, r onetick.TickRecord) {
				b.AppendEntry(stream, r)
			},
		}
	}})
}
