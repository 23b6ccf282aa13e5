// Package pgtest gives tests a PostgreSQL: the server on 127.0.0.1:5432
// (trust authentication, user postgres) that the machine runs, started
// with pg_ctlcluster when it is not running, and a fresh schema per test,
// dropped at the test's end.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL overrides the server's URL.
const EnvURL = "ONETICK_TEST_POSTGRES_URL"

// DefaultURL is the machine's server.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// URL returns the server's URL.
func URL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

var (
	once     sync.Once
	startErr error
)

// Ensure makes sure the server answers, starting the installed cluster
// (pg_ctlcluster --skip-systemctl-redirect VERSION main start) when it
// does not; it fails the test when neither works.
func Ensure(tb testing.TB) {
	tb.Helper()
	once.Do(func() {
		if startErr = ensure(); startErr == nil {
			dropStale()
		}
	})
	if startErr != nil {
		tb.Fatalf("pgtest: %v", startErr)
	}
}

func ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, URL())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

func ensure() error {
	err := ping()
	if err == nil {
		return nil
	}
	if os.Getenv(EnvURL) != "" {
		return fmt.Errorf("%s does not answer: %w", EnvURL, err)
	}
	versions, _ := filepath.Glob("/etc/postgresql/*")
	if len(versions) == 0 {
		return fmt.Errorf("no PostgreSQL answers on %s (%v) and none is installed: run scripts/install-deps.sh", DefaultURL, err)
	}
	v := filepath.Base(versions[len(versions)-1])
	out, serr := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", v, "main", "start").CombinedOutput()
	if serr != nil && !strings.Contains(string(out), "already running") {
		return fmt.Errorf("pg_ctlcluster %s main start: %v: %s", v, serr, out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err = ping(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL %s started but does not answer on %s: %w", v, URL(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dropStale drops the schemas of test processes that died before their
// cleanup (a killed or timed-out go test): their pid is gone.
func dropStale() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, URL())
	if err != nil {
		return
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ot\_test\_%'`)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		pid, _, _ := strings.Cut(strings.TrimPrefix(n, "ot_test_"), "_")
		if _, err := os.Stat("/proc/" + pid); !os.IsNotExist(err) {
			continue
		}
		_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{n}.Sanitize()+" CASCADE")
	}
}

var seq atomic.Int64

// Schema returns a new schema name, unique across test processes, and
// drops the schema (if something created it) when the test ends.
func Schema(tb testing.TB) string {
	tb.Helper()
	Ensure(tb)
	name := fmt.Sprintf("ot_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
	tb.Cleanup(func() { Drop(tb, name) })
	return name
}

// Drop drops a schema and everything in it.
func Drop(tb testing.TB, schema string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, URL())
	if err != nil {
		tb.Errorf("pgtest: drop %s: %v", schema, err)
		return
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		tb.Errorf("pgtest: drop %s: %v", schema, err)
	}
}
