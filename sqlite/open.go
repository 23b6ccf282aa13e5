package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations are the schema's steps, in order: migrations[i] takes a file
// from schema version i to i+1.
var migrations = loadMigrations()

// schemaVersion is the newest schema this build writes.
var schemaVersion = len(migrations)

func loadMigrations() []string {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			panic(err) // embedded at build time
		}
		out[i] = string(b)
	}
	return out
}

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("sqlite: backend closed")

// Options configure a Backend.
type Options struct {
	// Clock is the store's clock; default the real clock. Every process
	// on one file must read the same clock: one host.
	Clock clockwork.Clock
	// ClockTolerance: a claim for a slot more than this far in the future
	// by the store's clock is refused as early. Default 100ms.
	ClockTolerance time.Duration
	// HistoryLen is how many leadership terms are kept. Default 100.
	HistoryLen int
	// BusyTimeout is how long an operation waits for another process's
	// write transaction on the same file. Default 10s.
	BusyTimeout time.Duration
	// PollInterval is how often a blocked Fetch checks whether another
	// process changed the file (in-process appends wake it at once).
	// Default 100ms.
	PollInterval time.Duration
	// Logger receives the store's notices; default discards.
	Logger *slog.Logger
	// Ledger bounds the run ledger; zero fields take
	// onetick.DefaultLedgerMaxAge and DefaultLedgerMaxPerJob. A claim or
	// an enqueue trims the records of its jobs.
	Ledger onetick.LedgerRetention
}

// Backend is a onetick store in one SQLite file. It is safe for
// concurrent use by many electors, schedulers and workers in one process,
// and by other processes that open the same file.
type Backend struct {
	path string
	opts Options
	db   *sql.DB

	closed atomic.Bool

	mu       sync.Mutex
	watchers storekit.Signal             // the lease was released through this process
	appended storekit.Bell               // rung when this process appends
	released map[string]*storekit.Signal // group -> run markers freed through this process
	sweepAt  time.Time
	wsweepAt map[string]time.Time
	rot      map[string]int // per group: fetch rotation

	commits *commitRecord // the count of commits, beside the file
	terms   *termLocks    // the liveness locks of terms granted here
}

var _ onetick.Backend = (*Backend)(nil)

// Open opens the store at path, creating it (and its directory) when
// nothing exists there. An existing file is used only if it is a onetick
// store that SQLite reads whole, of this build's schema version or an
// older one (which is migrated); otherwise Open returns a *FileError
// naming the file and leaves the file as it was.
func Open(path string, opts Options) (*Backend, error) {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.ClockTolerance == 0 {
		opts.ClockTolerance = 100 * time.Millisecond
	}
	if opts.HistoryLen <= 0 {
		opts.HistoryLen = 100
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Ledger = storekit.Retention(opts.Ledger)
	if path == "" {
		return nil, errors.New("sqlite: no path given")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}
	path = abs
	ok, err := exists(path)
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := create(path, opts, schemaVersion); err != nil {
			return nil, err
		}
	}
	if _, err := checkHeader(path); err != nil {
		return nil, err
	}
	if err := checkCommits(path, opts); err != nil {
		return nil, err
	}
	for _, x := range Exposed(path) {
		opts.Logger.Warn(x.String(), "file", x.Path, "mode", x.ModeString())
	}
	db, err := sql.Open("sqlite", dsn(path, "rw", opts))
	if err != nil {
		return nil, fileErr(path, ErrUnreadable, err, "cannot open")
	}
	// One connection: this process's operations queue for it in order,
	// instead of racing each other for SQLite's write lock (whose busy
	// handler sleeps); other processes wait under busy_timeout.
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	b := &Backend{path: path, opts: opts, db: db,
		released: map[string]*storekit.Signal{}, wsweepAt: map[string]time.Time{}, rot: map[string]int{},
		commits: &commitRecord{path: path + commitSuffix, log: opts.Logger}, terms: newTermLocks(path, opts.Logger)}
	if err := b.verify(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := b.migrate(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return b, nil
}

// dsn is the driver's name for path: mode "rw" opens an existing file
// only, "rwc" creates it. synchronous=FULL syncs the write-ahead log at
// every commit, so an acknowledged claim survives a power loss, not only
// a crash of the process.
func dsn(path, mode string, opts Options) string {
	u := url.URL{Scheme: "file", Path: path}
	q := []string{
		"mode=" + mode,
		"_pragma=busy_timeout(" + fmt.Sprint(opts.BusyTimeout.Milliseconds()) + ")",
		"_pragma=synchronous(FULL)",
		"_pragma=cell_size_check(ON)",
		"_txlock=immediate",
	}
	return u.String() + "?" + strings.Join(q, "&")
}

// create makes a new store at path: built aside under a temporary name,
// then linked into place, so that a file at path is always a complete
// store (an empty or half-made one can only be damage) and two processes
// creating it at once end up sharing one.
func create(path string, opts Options, version int) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fileErr(path, ErrUnreadable, err, "cannot create its directory")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path + ".new-" + hex.EncodeToString(rnd[:])
	defer os.Remove(tmp)
	db, err := sql.Open("sqlite", dsn(tmp, "rwc", opts))
	if err != nil {
		return fileErr(path, ErrUnreadable, err, "cannot create")
	}
	db.SetMaxOpenConns(1)
	err = func() error {
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "PRAGMA journal_mode = WAL"); err != nil {
			return err
		}
		_, err := migrateDB(ctx, db, 0, version)
		return err
	}()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileErr(path, ErrUnreadable, err, "cannot create")
	}
	// Payloads may be private: the file (and the log and index files
	// SQLite makes beside it, which copy its mode) is the owner's alone.
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err == nil {
		err = f.Chmod(0o600)
		if err == nil {
			err = f.Sync()
		}
		_ = f.Close()
	}
	if err != nil {
		return fileErr(path, ErrUnreadable, err, "cannot create")
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fileErr(path, ErrUnreadable, err, "cannot create")
	}
	if err := syncDir(dir); err != nil {
		return fileErr(path, ErrUnreadable, err, "cannot sync its directory")
	}
	return nil
}

// verify reads the whole file once (PRAGMA quick_check) before anything
// is written, so that a damaged store is refused at open instead of
// failing some later claim.
func (b *Backend) verify() error {
	ctx := context.Background()
	rows, err := b.db.QueryContext(ctx, "PRAGMA quick_check(20)")
	if err != nil {
		return b.openErr(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return b.openErr(err)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		return b.openErr(err)
	}
	if len(problems) > 0 {
		return fileErr(b.path, ErrCorrupt, nil, "SQLite's integrity check fails (restore it from a backup or move it aside; onetick does not start fresh over it): %s",
			strings.Join(problems, "; "))
	}
	var app int64
	if err := b.db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return b.openErr(err)
	}
	if uint32(app) != applicationID {
		return fileErr(b.path, ErrNotStore, nil, "a SQLite database of another application (application_id %#x)", uint32(app))
	}
	return nil
}

// openErr classifies an error met while opening: SQLite's own verdicts
// on the file name it as corrupt or not a database.
func (b *Backend) openErr(err error) error { return openErr(b.path, err) }

func openErr(path string, err error) error {
	var e *msqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT:
			return fileErr(path, ErrCorrupt, err, "SQLite cannot read it; restore it from a backup or move it aside (onetick does not start fresh over it)")
		case sqlite3.SQLITE_NOTADB:
			return fileErr(path, ErrNotStore, err, "SQLite does not recognise it")
		}
	}
	return fileErr(path, ErrUnreadable, err, "cannot read it")
}

// migrate brings the file to this build's schema.
func (b *Backend) migrate() error {
	from, err := migrateDB(context.Background(), b.db, -1, schemaVersion)
	var fe *FileError
	if errors.As(err, &fe) {
		fe.Path = b.path
		return fe
	}
	if err != nil {
		return b.openErr(err)
	}
	if from < schemaVersion {
		b.opts.Logger.Info("migrated the store's schema", "file", b.path, "from", from, "to", schemaVersion)
	}
	return nil
}

// migrateDB applies the migrations from the file's version up to target
// in one immediate transaction, which holds SQLite's write lock: two
// processes opening an old file at once migrate it once. expect >= 0
// asserts the version found (a fresh file: 0). It returns the version
// found.
func migrateDB(ctx context.Context, db *sql.DB, expect, target int) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, err
	}
	if expect >= 0 && v != expect {
		return v, fmt.Errorf("schema version %d, want %d", v, expect)
	}
	if v > schemaVersion {
		return v, &FileError{Kind: ErrNewerSchema, Detail: fmt.Sprintf(
			"written by a newer onetick (schema version %d; this build knows versions up to %d): upgrade onetick, or restore a file of this version", v, schemaVersion)}
	}
	if v >= target {
		return v, nil
	}
	for i := v; i < target; i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return v, fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", target)); err != nil {
		return v, err
	}
	return v, tx.Commit()
}

// Path returns the store's file.
func (b *Backend) Path() string { return b.path }

// Close implements onetick.Backend. The last connection to close folds
// the write-ahead log back into the file. A lease still held through this
// Backend stays in the file, but its term lock is dropped: the next
// process to acquire takes it over at once.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	err := b.db.Close()
	b.terms.close()
	b.commits.close()
	return err
}
