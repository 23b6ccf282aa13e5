package main_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/internal/redistest"
)

// daemonStore is a store that a daemon test runs on.
type daemonStore struct {
	name string
	// open makes a fresh, empty store of its kind for the test: the
	// configuration's backend section (ending in a newline; empty for the
	// file store) and the flags that `onetick run` and the other commands
	// need beside --config.
	open func(t *testing.T) (backend string, args []string)
}

// daemonStores are the stores that the cross-store daemon tests run on:
// the file store, a redis-server of the test's own on a free port, and a
// schema of the test's own on the machine's PostgreSQL.
var daemonStores = []daemonStore{
	{"file", func(t *testing.T) (string, []string) {
		return "", []string{"--data", filepath.Join(t.TempDir(), "state.db")}
	}},
	{"redis", func(t *testing.T) (string, []string) {
		srv := redistest.Start(t)
		return fmt.Sprintf("backend:\n  redis:\n    url: %s\n    prefix: t\n", srv.URL()), nil
	}},
	{"postgres", func(t *testing.T) (string, []string) {
		return fmt.Sprintf("backend:\n  postgres:\n    url: %s\n    schema: %s\n", pgtest.URL(), pgtest.Schema(t)), nil
	}},
}
