package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"sync"
)

// The commit record. SQLite's recovery of a write-ahead log stops at the
// first frame whose checksum fails and drops every frame after it,
// committed or not, without an error: a damaged "-wal" left by a crash
// would open as an older state of the store, and the scheduler would fire
// again ticks it had already fired. So every write transaction that
// changes the store also counts itself in the file (counters."commits", in
// the same transaction; one that changes nothing writes nothing), and
// once the commit has returned, the count is written to a small file
// beside the store, "<file>-commit". Open compares the two before SQLite
// writes anything: a store whose own count is below the recorded one has
// lost commits that were acknowledged, and is refused.
//
// The record is written after the commit is durable, without a sync of
// its own, so it never names a commit the file does not hold: a crash
// (or power loss) between the commit and the record leaves the record one
// commit behind, which is accepted. Processes on one file may write it in
// either order; it can then lag, never lead. What it cannot catch: the
// loss of only the last commit before a crash that came between that
// commit and its record, and any loss when the record file is missing.

const (
	commitSuffix = "-commit"
	commitPrefix = "onetick commits "
	commitDigits = 20
)

// commitLine is the record's whole content, of fixed length, so that a
// rewrite in place never leaves a longer one's tail behind.
func commitLine(n int64) []byte {
	return fmt.Appendf(nil, "%s%0*d\n", commitPrefix, commitDigits, n)
}

// totalChanges is the number of rows the connection has changed since it
// was opened.
func (o *op) totalChanges() (int64, error) {
	var n int64
	err := o.row("SELECT total_changes()").Scan(&n)
	return n, err
}

// bumpCommits counts the transaction o in the file and returns its
// number, if o changed anything since the connection had changed before
// rows (0 otherwise). A transaction that changed nothing commits nothing:
// counting it would write to the file, and every process watching the
// file for changes (a worker's Fetch) would wake and do the same.
func (o *op) bumpCommits(before int64) (int64, error) {
	after, err := o.totalChanges()
	if err != nil || after == before {
		return 0, err
	}
	var n int64
	err = o.row(`INSERT INTO counters (name, value) VALUES ('commits', 1)
		ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value`).Scan(&n)
	return n, err
}

// commitRecord writes the commit record of one Backend.
type commitRecord struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex
	f      *os.File
	last   int64
	failed bool
}

// note records that commit n has returned. A failure to write the record
// is logged once and otherwise ignored: the record only guards, it never
// holds state.
func (r *commitRecord) note(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n <= r.last || r.failed {
		return
	}
	err := func() error {
		if r.f == nil {
			f, err := os.OpenFile(r.path, os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				return err
			}
			r.f = f
		}
		_, err := r.f.WriteAt(commitLine(n), 0)
		return err
	}()
	if err != nil {
		r.failed = true
		r.log.Warn("cannot write the commit record: a damaged write-ahead log would not be detected when the store is next opened",
			"file", r.path, "err", err)
		return
	}
	r.last = n
}

func (r *commitRecord) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
	}
}

// readCommitRecord returns the commit number recorded beside the store at
// path: 0 when there is no record (a store made before records existed,
// or a record a crash left empty or unwritten).
func readCommitRecord(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err // an *fs.PathError
	}
	if len(bytes.Trim(data, "\x00")) == 0 {
		return 0, nil
	}
	digits, ok := bytes.CutPrefix(data, []byte(commitPrefix))
	digits, nl := bytes.CutSuffix(digits, []byte("\n"))
	n, perr := strconv.ParseInt(string(digits), 10, 64)
	if !ok || !nl || len(digits) != commitDigits || perr != nil || n < 0 {
		return 0, fmt.Errorf("it does not hold a commit count (it begins with %s)", preview(data))
	}
	return n, nil
}

// checkCommits refuses a store that holds fewer commits than were
// acknowledged. It reads the record first and the file second, so that a
// process committing meanwhile can only make the file look newer. The file
// is read through a read-only connection: it runs SQLite's recovery of the
// log in memory but never checkpoints, so a refused store and its log are
// left exactly as they were for the operator.
func checkCommits(path string, opts Options) error {
	rec := path + commitSuffix
	want, err := readCommitRecord(rec)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fileErr(path, ErrUnreadable, err, "cannot read its commit record")
	}
	if err != nil {
		return fileErr(path, ErrCorrupt, nil,
			"its commit record %s is damaged (%v), so a damaged write-ahead log could not be detected: restore the store from a backup, or move %s aside to open the store as SQLite reads it",
			rec, err, rec)
	}
	if want == 0 {
		return nil
	}
	wal := path + "-wal"
	_, walErr := os.Lstat(wal) // before SQLite, which makes an empty one
	db, err := sql.Open("sqlite", dsn(path, "ro", opts))
	if err != nil {
		return fileErr(path, ErrUnreadable, err, "cannot open")
	}
	defer db.Close()
	var have int64
	err = db.QueryRowContext(context.Background(), "SELECT value FROM counters WHERE name = 'commits'").Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return openErr(path, err)
	}
	if have >= want {
		return nil
	}
	cause := fmt.Sprintf("Its write-ahead log %s is damaged (SQLite's recovery stops at the first frame that fails its checksum and drops the commits after it)", wal)
	if errors.Is(walErr, fs.ErrNotExist) {
		cause = fmt.Sprintf("Its write-ahead log %s is missing (removed after a crash), or the file was restored from an older copy", wal)
	}
	return fileErr(path, ErrCorrupt, nil,
		"the store holds %d commits, but commit %d was acknowledged (recorded in %s): the last %d committed transactions are missing, and onetick would fire again ticks it already fired. %s. "+
			"Restore the file together with its -wal from a backup; or, to go on from what SQLite reads and lose those transactions, move %s aside. Nothing was written",
		have, want, rec, want-have, cause, rec)
}
