package sqlite

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Term locks: the proof that a lease's holder is dead. The lease row
// alone cannot tell a crashed holder from a live one that is slow, so a
// crashed leader's lease would stand until its TTL ran out, and a single
// host restarting after kill -9 would wait that long. So the process that
// is granted a term also takes an exclusive flock(2) on a file of that
// term, "<file>-lease/<epoch>", inside the transaction that grants it,
// and holds it while it holds the term: until it releases the lease,
// learns that it lost it, or closes the store. The kernel drops the lock
// when the process dies, whatever kills it, and never while the process
// lives (a stopped process keeps it).
//
// Acquire, finding the lease held and unexpired, tries the holder's term
// lock without waiting, inside its write transaction (so the holder can
// neither renew nor release meanwhile): if it gets the lock, no process
// holds that term, and the lease is taken at once; if not, or if the term
// has no lock file (a holder that could not make one, or an older
// onetick), the TTL rule stands. flock locks belong to an open file
// description: they hold between processes and between two opens in one
// process, and closing another descriptor of the file does not drop them
// (unlike fcntl locks, which is why the database file's own locks, fcntl
// locks held by SQLite, cannot serve). Files are named by epoch, which
// never repeats, so a name is never reused for another term; they are
// created and removed only under the file's write lock, or by their own
// holder once its term is over.
type termLocks struct {
	dir string
	log *slog.Logger

	mu     sync.Mutex
	held   map[int64]*os.File // terms granted through this Backend
	warned bool
}

func newTermLocks(path string, log *slog.Logger) *termLocks {
	return &termLocks{dir: path + "-lease", log: log, held: map[int64]*os.File{}}
}

func (t *termLocks) file(epoch int64) string {
	return filepath.Join(t.dir, strconv.FormatInt(epoch, 10))
}

// hold takes the lock of a term being granted through this Backend. When
// it cannot, others wait for the term's TTL as before: that is logged
// once, and the grant goes on.
func (t *termLocks) hold(epoch int64) {
	err := func() error {
		if err := os.Mkdir(t.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		f, err := os.OpenFile(t.file(epoch), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		if ok, err := tryLock(f); !ok {
			_ = f.Close()
			if err == nil {
				err = errors.New("locked by another process")
			}
			return err
		}
		t.mu.Lock()
		t.held[epoch] = f
		t.mu.Unlock()
		return nil
	}()
	if err != nil {
		t.mu.Lock()
		warn := !t.warned
		t.warned = true
		t.mu.Unlock()
		if warn {
			t.log.Warn("cannot lock this term's liveness file: after a crash of this process, the next one waits for the lease's TTL",
				"file", t.file(epoch), "err", err)
		}
	}
}

// holds reports whether this Backend holds term epoch's lock.
func (t *termLocks) holds(epoch int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held[epoch] != nil
}

// dead reports whether no process holds term epoch's lock. On true it
// returns the locked file, which the caller removes once the term is
// closed (remove) or just closes (f.Close) if it is not.
func (t *termLocks) dead(epoch int64) (*os.File, bool) {
	if t.holds(epoch) {
		return nil, false
	}
	f, err := os.OpenFile(t.file(epoch), os.O_RDWR, 0)
	if err != nil {
		return nil, false // no lock file: no proof either way
	}
	if ok, _ := tryLock(f); !ok {
		_ = f.Close()
		return nil, false
	}
	return f, true
}

// remove deletes a term's lock file whose lock f holds, then drops it.
func (t *termLocks) remove(f *os.File) {
	_ = os.Remove(f.Name())
	_ = f.Close()
}

// drop ends this Backend's hold on term epoch: the term is over
// (released, or lost to another), so its file goes too.
func (t *termLocks) drop(epoch int64) {
	t.mu.Lock()
	f := t.held[epoch]
	delete(t.held, epoch)
	t.mu.Unlock()
	if f != nil {
		t.remove(f)
	}
}

// dropBefore ends this Backend's hold on the terms before epoch, which a
// newer grant has ended.
func (t *termLocks) dropBefore(epoch int64) {
	t.mu.Lock()
	var old []int64
	for e := range t.held {
		if e < epoch {
			old = append(old, e)
		}
	}
	t.mu.Unlock()
	for _, e := range old {
		t.drop(e)
	}
}

// sweep removes the files of terms that no process holds: ended ones
// (the lease row names at most one term, and a grant is about to replace
// it). It runs inside a granting acquire's write transaction, so no term
// lock is taken or tested meanwhile.
func (t *termLocks) sweep() {
	es, err := os.ReadDir(t.dir)
	if err != nil {
		return
	}
	for _, e := range es {
		epoch, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		if f, ok := t.dead(epoch); ok {
			t.remove(f)
		}
	}
}

// close drops every lock this Backend holds, leaving the files: a term
// still in the lease row is then provably without a live holder, and the
// next process takes it over at once.
func (t *termLocks) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e, f := range t.held {
		_ = f.Close()
		delete(t.held, e)
	}
}
