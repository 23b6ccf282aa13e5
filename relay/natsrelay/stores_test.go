package natsrelay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/worker"
)

// store is a real store: its backend (the claim) and its worker store.
type store struct {
	b  onetick.Backend
	ws func() worker.Store
}

// forEachStore runs f on the memory store and on a Redis of its own.
func forEachStore(t *testing.T, f func(t *testing.T, st store)) {
	t.Run("memory", func(t *testing.T) {
		b := memory.New(memory.Options{})
		t.Cleanup(func() { _ = b.Close() })
		f(t, store{b: b, ws: func() worker.Store { return b.WorkerStore("") }})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		b, err := redis.Open(srv.URL(), redis.Options{Prefix: fmt.Sprintf("nr%d", time.Now().UnixNano())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		f(t, store{b: b, ws: func() worker.Store { return b.WorkerStore("") }})
	})
}
