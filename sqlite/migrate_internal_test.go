package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// TestMigratesOlderFile: a file of schema version 1 (before the worker
// tables) is migrated when opened, by one of two Backends opening it at
// once, and keeps its state.
func TestMigratesOlderFile(t *testing.T) {
	t.Parallel()
	if schemaVersion < 2 {
		t.Fatalf("schema version %d: this test migrates from version 1 and needs a later one", schemaVersion)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := create(path, Options{}, 1); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO last_fired (job, slot) VALUES ('j', 1600000000000)"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 1 {
		t.Fatalf("old file at version %d, %v", v, err)
	}
	_ = db.Close()

	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	var wg sync.WaitGroup
	bs := make([]*Backend, 2)
	errs := make([]error, 2)
	for i := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[i], errs[i] = Open(path, Options{Logger: logger})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer bs[i].Close()
	}
	want := fmt.Sprintf("from=1 to=%d", schemaVersion)
	if n := strings.Count(logs.String(), "migrated the store's schema"); n != 1 || !strings.Contains(logs.String(), want) {
		t.Fatalf("two opens logged %d migrations, want 1 %s:\n%s", n, want, logs.String())
	}
	ctx := context.Background()
	if err := bs[0].db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("version after open: %d, %v; want %d", v, err, schemaVersion)
	}
	last, err := bs[1].LastFired(ctx, []string{"j"})
	if err != nil || last["j"] != 1600000000000 {
		t.Fatalf("last fired after the migration: %v, %v", last, err)
	}
	// The tables of version 2 work.
	if _, err := bs[1].WorkerStore("").Fetch(ctx, "c", []string{"s"}, 1, time.Millisecond); err != nil {
		t.Fatalf("worker store after the migration: %v", err)
	}
	if _, err := bs[0].Enqueue(ctx, []onetick.Tick{{Job: "j", Key: "k", Stream: "s", Payload: "{}", Retention: time.Hour}},
		onetick.Actor{Who: "t"}); err != nil {
		t.Fatal(err)
	}
	ds, err := bs[1].WorkerStore("").Fetch(ctx, "c", []string{"s"}, 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch after the migration: %v, %v", ds, err)
	}
}

// TestMigrationsAreNumbered: the embedded migrations are 0001, 0002, ...
// with no gap, so that a version number names one schema.
func TestMigrationsAreNumbered(t *testing.T) {
	names, err := migrationFS.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		want := []byte{byte('0' + (i+1)/1000%10), byte('0' + (i+1)/100%10), byte('0' + (i+1)/10%10), byte('0' + (i+1)%10), '_'}
		if n.Name()[:5] != string(want) {
			t.Fatalf("migration %d is %s", i+1, n.Name())
		}
	}
	if len(names) != schemaVersion {
		t.Fatalf("%d migrations, schema version %d", len(names), schemaVersion)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
