package sqlite_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/sqlite"
)

// fill writes a store with some state and closes it.
func fill(t *testing.T, path string) {
	t.Helper()
	b, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ticks []onetick.Tick
	for i := 0; i < 2000; i++ {
		ticks = append(ticks, onetick.Tick{Job: "j" + itoa(i%7), Slot: onetick.Slot(1_600_000_000_000 + i*1000), Stream: "s",
			Payload: `{"some":"payload to fill pages"}`, Retention: time.Hour})
	}
	if _, err := b.Claim(ctx, g.Lease, ticks); err != nil {
		t.Fatal(err)
	}
}

// snapshot returns the directory's files and their hashes.
func snapshot(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.IsDir() {
			out[e.Name()+"/"] = [32]byte{}
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = sha256.Sum256(data)
	}
	return out
}

// TestUnusableFile: a file that is not a whole onetick store of a known
// schema is refused with an error that names it and says what is wrong,
// twice in a row (it never starts fresh), and the file and its directory
// are left exactly as they were.
func TestUnusableFile(t *testing.T) {
	t.Parallel()
	tmpl := filepath.Join(t.TempDir(), "template.db")
	fill(t, tmpl)
	filled := func(t *testing.T, path string) { write(t, path, read(t, tmpl)) }
	cases := []struct {
		name  string
		make  func(t *testing.T, path string)
		kind  error
		words string
	}{
		{"GarbageBytes", func(t *testing.T, path string) {
			filled(t, path)
			fi, _ := os.Stat(path)
			data := make([]byte, fi.Size())
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			write(t, path, data)
		}, sqlite.ErrNotStore, "not a SQLite database"},
		{"GarbagePages", func(t *testing.T, path string) {
			filled(t, path)
			data := read(t, path)
			rng := rand.New(rand.NewPCG(3, 4))
			// Page 1 (the header and the schema) stays; pages past it
			// hold the tables and are overwritten in part.
			for i := 4096 * 2; i < len(data)-4096; i += 4096 * 3 {
				for k := 100; k < 4000; k++ {
					data[i+k] = byte(rng.Uint32())
				}
			}
			write(t, path, data)
		}, sqlite.ErrCorrupt, ""},
		{"TruncatedHalf", func(t *testing.T, path string) {
			filled(t, path)
			data := read(t, path)
			write(t, path, data[:len(data)/2])
		}, sqlite.ErrCorrupt, ""},
		{"TruncatedToOnePage", func(t *testing.T, path string) {
			filled(t, path)
			write(t, path, read(t, path)[:4096])
		}, sqlite.ErrCorrupt, ""},
		{"TruncatedInTheHeader", func(t *testing.T, path string) {
			filled(t, path)
			write(t, path, read(t, path)[:10])
		}, sqlite.ErrCorrupt, "truncated"},
		{"Empty", func(t *testing.T, path string) {
			write(t, path, nil)
		}, sqlite.ErrNotStore, "empty"},
		{"TextFile", func(t *testing.T, path string) {
			write(t, path, []byte("backend:\n  redis:\n    url: redis://localhost:6379\n"))
		}, sqlite.ErrNotStore, "not a SQLite database"},
		{"AnotherApplicationsDatabase", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')"); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}, sqlite.ErrNotStore, "another application"},
		{"NewerSchema", func(t *testing.T, path string) {
			filled(t, path)
			operator(t, path, "PRAGMA user_version = 99")
		}, sqlite.ErrNewerSchema, "newer onetick (schema version 99"},
		{"Directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, sqlite.ErrUnreadable, "directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "onetick.db")
			tc.make(t, path)
			before := snapshot(t, dir)
			for attempt := 0; attempt < 2; attempt++ {
				b, err := sqlite.Open(path, sqlite.Options{})
				if err == nil {
					b.Close()
					t.Fatalf("attempt %d: opened %s", attempt, tc.name)
				}
				var fe *sqlite.FileError
				if !errors.As(err, &fe) || !errors.Is(err, tc.kind) || fe.Path != path {
					t.Fatalf("attempt %d: %v (%T), want a *FileError of kind %v for %s", attempt, err, err, tc.kind, path)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.words) {
					t.Fatalf("attempt %d: %q does not name the file or say %q", attempt, err, tc.words)
				}
				t.Logf("%v", err)
			}
			after := snapshot(t, dir)
			if len(after) != len(before) {
				t.Fatalf("the directory changed: %v -> %v", keys(before), keys(after))
			}
			for n, h := range before {
				if after[n] != h {
					t.Fatalf("%s changed", n)
				}
			}
		})
	}
}

// TestStoreFileIsOnetick: a store the package created carries onetick's
// application id and this build's schema version, and holds no temporary
// file beside it: only its commit record and its term locks' directory.
func TestStoreFileIsOnetick(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "onetick.db")
	fill(t, path)
	h := read(t, path)
	if !bytes.HasPrefix(h, []byte("SQLite format 3\x00")) || !bytes.Equal(h[68:72], []byte("OTK1")) {
		t.Fatalf("header %q: want SQLite with application id OTK1", h[:100])
	}
	es, _ := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "onetick.db onetick.db-commit onetick.db-lease" {
		t.Fatalf("files beside the closed store: %v, want onetick.db, its -commit and its -lease", names)
	}
}

func keys(m map[string][32]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFileIsPrivate: payloads may be private, so the store, its
// directory when onetick makes it, and the files onetick keeps beside it
// are its owner's only; a store or directory that others can reach is
// warned about when it is opened, naming the path and the mode.
func TestFileIsPrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "onetick.db")
	b, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, err := b.Acquire(ctx, "a", time.Minute) // makes the commit record and the term lock
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		path:               0o600,
		filepath.Dir(path): 0o700 | os.ModeDir,
		path + "-commit":   0o600,
		path + "-lease":    0o700 | os.ModeDir,
		path + "-lease/" + strconv.FormatInt(int64(g.Lease.Epoch), 10): 0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode() & (os.ModePerm | os.ModeDir); m != want {
			t.Errorf("%s: mode %v, want %v", p, m, want)
		}
	}
	b.Close()
	if x := sqlite.Exposed(path); len(x) != 0 {
		t.Fatalf("exposures of a private store: %v", x)
	}

	// Opened up by hand: warned, naming path and mode.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs syncWriter
	b, err = sqlite.Open(path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	out := logs.String()
	for _, w := range []string{"level=WARN", "file=" + path + " mode=0644", "file=" + filepath.Dir(path) + " mode=0755", "chmod 600"} {
		if !strings.Contains(out, w) {
			t.Errorf("the log of opening a store readable by others does not say %q:\n%s", w, out)
		}
	}
}
