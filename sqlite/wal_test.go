package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
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

// walFrame is one frame of a write-ahead log as SQLite's recovery reads
// it (https://www.sqlite.org/fileformat2.html#walformat).
type walFrame struct {
	off    int64 // of its 24-byte header
	commit bool  // the last frame of a transaction
}

// walCommitted returns the frames SQLite's recovery keeps (the valid
// chain from the first frame up to its last commit frame) and the page
// size. It reads the log as the format documents: a 32-byte header, then
// frames of a 24-byte header and a page, each checksummed cumulatively.
func walCommitted(t *testing.T, data []byte) ([]walFrame, int) {
	t.Helper()
	if len(data) < 32 {
		t.Fatalf("write-ahead log of %d bytes", len(data))
	}
	magic := binary.BigEndian.Uint32(data)
	if magic&^1 != 0x377f0682 {
		t.Fatalf("write-ahead log magic %#x", magic)
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if magic&1 == 1 {
		order = binary.BigEndian
	}
	sum := func(s0, s1 uint32, b []byte) (uint32, uint32) {
		for i := 0; i+8 <= len(b); i += 8 {
			s0 += order.Uint32(b[i:]) + s1
			s1 += order.Uint32(b[i+4:]) + s0
		}
		return s0, s1
	}
	page := int(binary.BigEndian.Uint32(data[8:]))
	s0, s1 := sum(0, 0, data[:24])
	if s0 != binary.BigEndian.Uint32(data[24:]) || s1 != binary.BigEndian.Uint32(data[28:]) {
		t.Fatal("write-ahead log header checksum")
	}
	var all, kept []walFrame
	for off := int64(32); off+24+int64(page) <= int64(len(data)); off += 24 + int64(page) {
		h := data[off : off+24]
		if string(h[8:16]) != string(data[16:24]) {
			break
		}
		s0, s1 = sum(s0, s1, h[:8])
		s0, s1 = sum(s0, s1, data[off+24:off+24+int64(page)])
		if s0 != binary.BigEndian.Uint32(h[16:]) || s1 != binary.BigEndian.Uint32(h[20:]) {
			break
		}
		f := walFrame{off: off, commit: binary.BigEndian.Uint32(h[4:]) != 0}
		all = append(all, f)
		if f.commit {
			kept = all
		}
	}
	return kept, page
}

// lastFiredAsSQLiteReads is job w's last-fired slot as SQLite itself
// reads the file, without onetick's checks (0 for none).
func lastFiredAsSQLiteReads(t *testing.T, path string) int64 {
	t.Helper()
	return queryInt(t, path, "SELECT coalesce(max(slot), 0) FROM last_fired WHERE job = 'w'")
}

// crashed runs a writer of n claims in a helper process, kills it with
// SIGKILL once it is idle, and returns the directory with the store, its
// log and its commit record, and the last slot claimed.
func crashed(t *testing.T, n int) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "onetick.db")
	h := startHelper(t, "writer", path, envCount+"="+itoa(n))
	var last int64
	for {
		l := h.line()
		if l == "idle" {
			break
		}
		s, ok := strings.CutPrefix(l, "claimed ")
		v, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil {
			t.Fatalf("writer: %q", l)
		}
		last = v
	}
	h.kill()
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no write-ahead log after the kill: %v", err)
	}
	return dir, last
}

// copyStore copies the store's files of dir (not the shared-memory index,
// which a crash leaves stale and SQLite rebuilds) into a new directory.
func copyStore(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	for _, n := range []string{"onetick.db", "onetick.db-wal", "onetick.db-commit"} {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(to, n), data)
	}
	return filepath.Join(to, "onetick.db")
}

// TestDamagedLogRefused is issue 17's reproduction: the process is killed
// with SIGKILL, then 64 bytes of garbage land in its write-ahead log.
// Wherever they land in a committed frame, SQLite alone would open an
// older state (it drops the frames from the damaged one on, and the
// scheduler would fire again what it had fired); the store refuses to
// open instead, twice, naming the file, the log and the way out, and
// writes nothing. Garbage past the last commit (the torn tail a crash in
// the middle of a transaction leaves) loses nothing and is accepted.
func TestDamagedLogRefused(t *testing.T) {
	t.Parallel()
	dir, last := crashed(t, 40)
	wal := read(t, filepath.Join(dir, "onetick.db-wal"))
	frames, page := walCommitted(t, wal)
	if len(frames) < 40 {
		t.Fatalf("%d committed frames in the log, want at least one per claim", len(frames))
	}
	end := frames[len(frames)-1].off + 24 + int64(page)
	if int64(len(wal)) != end {
		t.Fatalf("the log is %d bytes, its last commit ends at %d: the idle writer left a tail", len(wal), end)
	}
	// Damage positions: the log's header, the first frame's header and
	// page, frames in the middle, the last commit frame, and random ones.
	positions := map[string]int64{
		"LogHeader":       0,
		"FirstFrameHead":  frames[0].off,
		"FirstFramePage":  frames[0].off + 24 + 100,
		"MiddleFrame":     frames[len(frames)/2].off + 24 + int64(page)/2,
		"LastCommitHead":  frames[len(frames)-1].off,
		"LastCommitPage":  end - 64,
		"AcrossTwoFrames": frames[len(frames)/3].off - 32,
	}
	rng := rand.New(rand.NewPCG(17, 64))
	for i := 0; i < 8; i++ {
		positions["Random"+itoa(i)] = rng.Int64N(end - 64)
	}
	// One after another: in parallel they load the machine enough to
	// disturb the timing of the package's worker tests.
	for name, pos := range positions {
		t.Run(name, func(t *testing.T) {
			path := copyStore(t, dir)
			garbage := make([]byte, 64)
			r := rand.New(rand.NewPCG(uint64(pos), 64))
			for i := range garbage {
				garbage[i] = byte(r.Uint32())
			}
			damaged := append([]byte(nil), wal...)
			copy(damaged[pos:], garbage)
			write(t, path+"-wal", damaged)
			before := map[string][]byte{}
			for _, s := range []string{"", "-wal", "-commit"} {
				if data, err := os.ReadFile(path + s); err == nil {
					before[s] = data
				}
			}
			for attempt := 0; attempt < 2; attempt++ {
				b, err := sqlite.Open(path, sqlite.Options{})
				if err == nil {
					b.Close()
					t.Fatalf("attempt %d: opened a store whose log lost commits at byte %d", attempt, pos)
				}
				var fe *sqlite.FileError
				if !errors.As(err, &fe) || !errors.Is(err, sqlite.ErrCorrupt) || fe.Path != path {
					t.Fatalf("attempt %d: %v, want a *FileError of kind ErrCorrupt for %s", attempt, err, path)
				}
				for _, w := range []string{path + "-wal", path + "-commit", "damaged", "Restore the file", "aside"} {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("attempt %d: %q does not say %q", attempt, err, w)
					}
				}
				if attempt == 0 {
					t.Logf("%v", err)
				}
			}
			for s, data := range before {
				if string(read(t, path+s)) != string(data) {
					t.Fatalf("onetick.db%s changed", s)
				}
			}
			// What the refusal prevents: SQLite alone reads an older state.
			if got := lastFiredAsSQLiteReads(t, path); got >= last {
				t.Fatalf("SQLite reads last-fired slot %d of %d after the damage: the damage lost nothing", got, last)
			}
			// Moving the record aside accepts the loss: the store opens
			// as SQLite reads it.
			if err := os.Rename(path+"-commit", path+"-commit.aside"); err != nil {
				t.Fatal(err)
			}
			b, err := sqlite.Open(path, sqlite.Options{})
			if err != nil {
				t.Fatalf("open with the record moved aside: %v", err)
			}
			defer b.Close()
			lf, err := b.LastFired(context.Background(), []string{"w"})
			if err != nil || int64(lf["w"]) >= last {
				t.Fatalf("last fired with the loss accepted: %v, %v; want older than %d", lf, err, last)
			}
		})
	}
	t.Run("TornTail", func(t *testing.T) {
		t.Parallel()
		// What a crash in the middle of a transaction leaves past the last
		// commit: a frame cut short, or a whole frame that does not check.
		r := rand.New(rand.NewPCG(1, 2))
		for _, tail := range []int{64, 24 + page} {
			path := copyStore(t, dir)
			garbage := make([]byte, tail)
			for i := range garbage {
				garbage[i] = byte(r.Uint32())
			}
			write(t, path+"-wal", append(append([]byte(nil), wal...), garbage...))
			b, err := sqlite.Open(path, sqlite.Options{})
			if err != nil {
				t.Fatalf("a log with %d bytes of torn tail past its last commit: %v", tail, err)
			}
			lf, err := b.LastFired(context.Background(), []string{"w"})
			b.Close()
			if err != nil || int64(lf["w"]) != last {
				t.Fatalf("last fired %v, %v; want %d", lf, err, last)
			}
		}
	})
	t.Run("Intact", func(t *testing.T) {
		t.Parallel()
		path := copyStore(t, dir)
		b, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		lf, err := b.LastFired(context.Background(), []string{"w"})
		if err != nil || lf["w"] != onetick.Slot(last) {
			t.Fatalf("last fired %v, %v; want %d", lf, err, last)
		}
	})
}

// TestDamagedCommitRecordRefused: a commit record that does not hold a
// count is damage too: the store is refused, naming the record; an empty
// one (a crash before its first write reached the disk) is not.
func TestDamagedCommitRecordRefused(t *testing.T) {
	t.Parallel()
	dir, _ := crashed(t, 3)
	path := copyStore(t, dir)
	write(t, path+"-commit", []byte("onetick commits 12x\n"))
	if b, err := sqlite.Open(path, sqlite.Options{}); err == nil || !errors.Is(err, sqlite.ErrCorrupt) || !strings.Contains(err.Error(), path+"-commit") {
		if err == nil {
			b.Close()
		}
		t.Fatalf("open with a damaged commit record: %v", err)
	}
	write(t, path+"-commit", nil)
	b, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open with an empty commit record: %v", err)
	}
	b.Close()
}

// TestLostLogRefused: a write-ahead log removed after a crash loses
// every commit since the last checkpoint; the store says that its log is
// missing.
func TestLostLogRefused(t *testing.T) {
	t.Parallel()
	dir, _ := crashed(t, 5)
	path := copyStore(t, dir)
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	b, err := sqlite.Open(path, sqlite.Options{})
	if err == nil {
		b.Close()
		t.Fatal("opened a store whose log was removed after a crash")
	}
	if !errors.Is(err, sqlite.ErrCorrupt) || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("%v", err)
	}
}

// TestRestoredBackupRefused: an older copy of the file put back in its
// place (a backup restored) is refused like a lost log, until its commit
// record is moved aside, which says the older state is meant.
func TestRestoredBackupRefused(t *testing.T) {
	t.Parallel()
	b, path := open(t)
	ctx := context.Background()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	operator(t, path, "VACUUM INTO ?", backup)
	if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{{Job: "w", Slot: crashBase(), Stream: "w", Payload: "{}", Retention: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	write(t, path, read(t, backup))
	if b, err := sqlite.Open(path, sqlite.Options{}); err == nil || !errors.Is(err, sqlite.ErrCorrupt) ||
		!strings.Contains(err.Error(), "restored from an older copy") || !strings.Contains(err.Error(), "move "+path+"-commit aside") {
		if err == nil {
			b.Close()
		}
		t.Fatalf("open of a restored backup: %v", err)
	}
	if err := os.Rename(path+"-commit", path+"-commit.aside"); err != nil {
		t.Fatal(err)
	}
	b2, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open of the restored backup, its record moved aside: %v", err)
	}
	defer b2.Close()
	if lf, err := b2.LastFired(ctx, []string{"w"}); err != nil || len(lf) != 0 {
		t.Fatalf("last fired in the backup: %v, %v; want none", lf, err)
	}
}

// TestCommitRecordCountsChanges: a write transaction that changes the
// store is counted in the file and in the record beside it; one that
// changes nothing (a worker's fetch finding no work) writes nothing, so
// other processes watching the file are not woken by it.
func TestCommitRecordCountsChanges(t *testing.T) {
	t.Parallel()
	b, path := open(t)
	ctx := context.Background()
	if _, err := b.Pause(ctx, "j", onetick.Actor{Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	rec := string(read(t, path+"-commit"))
	n := queryInt(t, path, "SELECT value FROM counters WHERE name = 'commits'")
	if want := fmt.Sprintf("onetick commits %020d\n", n); n < 1 || rec != want {
		t.Fatalf("record %q, file's count %d: want the record to hold the file's count", rec, n)
	}
	watcher, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	watcher.SetMaxOpenConns(1)
	version := func() int64 {
		var v int64
		if err := watcher.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := version()
	if ds, err := b.WorkerStore("").Fetch(ctx, "c", []string{"empty"}, 10, time.Millisecond); err != nil || len(ds) != 0 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	if version() != v || string(read(t, path+"-commit")) != rec {
		t.Fatal("a fetch that found nothing wrote to the file")
	}
	if _, err := b.Resume(ctx, "j", onetick.Actor{Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	if version() == v || string(read(t, path+"-commit")) != fmt.Sprintf("onetick commits %020d\n", n+1) {
		t.Fatal("a resume was not counted")
	}
}
