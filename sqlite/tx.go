package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// op is one transaction: every operation of the store is one, so it is
// atomic (all of it or none of it reaches the file, whatever kills the
// process) and isolated from every other process on the file.
type op struct {
	ctx   context.Context
	tx    *sql.Tx
	now   time.Time
	ms    int64
	after []func() // run after a successful commit (notifications)
	undo  []func() // run when the transaction does not commit
	// ledgerOff: the store keeps no run ledger (Options.Ledger.Off).
	ledgerOff bool
	// stmts are the statements prepared in tx (stmt), closed with it.
	stmts map[string]*sql.Stmt
}

// stmt returns q prepared in o's transaction, once per transaction: for
// the statements a claim runs once per tick or per job. The transaction's
// end closes them.
func (o *op) stmt(q string) (*sql.Stmt, error) {
	if st, ok := o.stmts[q]; ok {
		return st, nil
	}
	st, err := o.tx.PrepareContext(o.ctx, q)
	if err != nil {
		return nil, err
	}
	if o.stmts == nil {
		o.stmts = map[string]*sql.Stmt{}
	}
	o.stmts[q] = st
	return st, nil
}

// write runs fn in an immediate transaction: it holds SQLite's write lock
// from its first statement, so what fn reads cannot change before it
// writes. The store's time is read once the lock is held.
func (b *Backend) write(ctx context.Context, fn func(o *op) error) error {
	return b.txn(ctx, false, fn)
}

// read runs fn in a deferred (read) transaction: a consistent snapshot
// that does not wait for writers.
func (b *Backend) read(ctx context.Context, fn func(o *op) error) error {
	return b.txn(ctx, true, fn)
}

func (b *Backend) txn(ctx context.Context, readOnly bool, fn func(o *op) error) error {
	if b.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: readOnly})
	if err != nil {
		return b.wrap(err)
	}
	now := b.opts.Clock.Now()
	o := &op{ctx: ctx, tx: tx, now: now, ms: now.UnixMilli(), ledgerOff: b.opts.Ledger.Off}
	var changes, commit int64
	if !readOnly {
		changes, err = o.totalChanges()
	}
	if err == nil {
		err = fn(o)
	}
	if err == nil && !readOnly {
		commit, err = o.bumpCommits(changes)
	}
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	if err != nil {
		for _, f := range o.undo {
			f()
		}
		return b.wrap(err)
	}
	if commit > 0 {
		b.commits.note(commit)
	}
	for _, f := range o.after {
		f()
	}
	return nil
}

// wrap names the file in SQLite's errors; a corruption found at run time
// is an ErrCorrupt like one found at open. Other errors pass unchanged.
func (b *Backend) wrap(err error) error {
	var e *msqlite.Error
	if !errors.As(err, &e) {
		if errors.Is(err, sql.ErrConnDone) && b.closed.Load() {
			return ErrClosed
		}
		return err
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return fileErr(b.path, ErrCorrupt, err, "SQLite cannot read it")
	case sqlite3.SQLITE_BUSY:
		return fmt.Errorf("sqlite: %s: another process held the file's write lock for longer than %s: %w", b.path, b.opts.BusyTimeout, err)
	}
	return fmt.Errorf("sqlite: %s: %w", b.path, err)
}

func (o *op) exec(q string, args ...any) error {
	_, err := o.tx.ExecContext(o.ctx, q, args...)
	return err
}

func (o *op) row(q string, args ...any) *sql.Row { return o.tx.QueryRowContext(o.ctx, q, args...) }

// counter reads a counter (0 when absent).
func (o *op) counter(name string) (int64, error) {
	var v int64
	err := o.row("SELECT value FROM counters WHERE name = ?", name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func (o *op) setCounter(name string, v int64) error {
	return o.exec("INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", name, v)
}

// msTime converts store milliseconds to a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// entryID is a stream entry's id: the store's time at append and the
// entry's sequence number, "ms-seq", shaped as Redis stream ids are.
func entryID(ms, seq int64) string {
	return strconv.FormatInt(ms, 10) + "-" + strconv.FormatInt(seq, 10)
}

// seqOf is the sequence number of an entry or dead-letter id "ms-seq"; 0
// when it does not parse.
func seqOf(id string) int64 {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			n, err := strconv.ParseInt(id[i+1:], 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}
