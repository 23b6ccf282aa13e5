package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick"
)

// hold starts a racer that acquires the lease for ttl at once and keeps
// it (without renewing) while it lives; it returns the helper and the
// lease's expiry in store milliseconds.
func hold(t *testing.T, path, name string, ttl time.Duration) (*helper, onetick.Lease, int64) {
	t.Helper()
	h := startHelper(t, "racer", path, envName+"="+name, envTTL+"="+ttl.String())
	if l := h.line(); l != "ready" {
		t.Fatalf("holder %s: %q", name, l)
	}
	h.send("go")
	var r raceResult
	if err := json.Unmarshal([]byte(h.line()), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Won {
		t.Fatalf("holder %s did not acquire: %+v", name, r)
	}
	return h, r.Lease, queryInt(t, path, "SELECT expires_ms FROM lease WHERE id = 1")
}

// queryInt reads one integer from the file, as an operator would.
func queryInt(t *testing.T, path, query string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestHolderTakenOverOnlyWhenGone: a lease whose holder's process is gone
// (SIGKILL) is taken over at once, long before its TTL, its term closed
// as expired; a lease whose holder lives, even stopped (SIGSTOP) past its
// TTL, is taken only once that TTL has run out.
func TestHolderTakenOverOnlyWhenGone(t *testing.T) {
	t.Parallel()
	b, path := open(t)
	ctx := context.Background()

	// A stopped holder keeps its process, so its term lock: waited out.
	stopped, sl, exp := hold(t, path, "stopped", 2*time.Second)
	if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var g onetick.Grant
	for {
		var err error
		g, err = b.Acquire(ctx, "next", time.Minute)
		if err == nil {
			break
		}
		var he *onetick.HeldError
		if !errors.As(err, &he) || he.Leader.Lease != sl {
			t.Fatalf("acquire while the stopped holder's lease lives: %v, want it held by %+v", err, sl)
		}
		if time.Now().After(deadline) {
			t.Fatal("the stopped holder's lease was not taken within 30s")
		}
		time.Sleep(20 * time.Millisecond) // polling the outcome, not synchronising
	}
	if got := g.StoreTime.UnixMilli(); got < exp {
		t.Fatalf("a stopped (live) holder's lease was taken at %d, before its expiry %d", got, exp)
	}
	if err := b.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	_ = stopped.cmd.Process.Signal(syscall.SIGCONT)
	stopped.wait()

	// A live holder: held. Killed: taken over at once.
	killed, kl, exp := hold(t, path, "killed", time.Minute)
	if _, err := b.Acquire(ctx, "next", time.Minute); !errors.Is(err, onetick.ErrLeaseHeld) {
		t.Fatalf("acquire while the holder lives: %v, want ErrLeaseHeld", err)
	}
	killed.kill()
	start := time.Now()
	g, err := b.Acquire(ctx, "next", time.Minute)
	if err != nil {
		t.Fatalf("acquire right after the holder was killed: %v, want the lease at once", err)
	}
	t.Logf("the killed holder's lease (%s of its TTL left) taken over in %s", time.Duration(exp-g.StoreTime.UnixMilli())*time.Millisecond, time.Since(start))
	if g.Lease.Epoch <= kl.Epoch || g.StoreTime.UnixMilli() >= exp {
		t.Fatalf("grant %+v at %d; want a newer epoch than %d, before the killed holder's expiry %d", g.Lease, g.StoreTime.UnixMilli(), kl.Epoch, exp)
	}
	terms, err := b.History(ctx, 10)
	if err != nil || len(terms) < 2 || terms[0].Epoch != g.Lease.Epoch || terms[1].Epoch != kl.Epoch ||
		terms[1].Reason != onetick.EndExpired || terms[1].End.UnixMilli() > g.StoreTime.UnixMilli() {
		t.Fatalf("history %+v (%v): want the killed holder's term ended as expired when it was taken over", terms, err)
	}
	// Only the current term's lock file is left.
	es, err := os.ReadDir(path + "-lease")
	if err != nil || len(es) != 1 || es[0].Name() != strconv.FormatInt(int64(g.Lease.Epoch), 10) {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Fatalf("term lock files %v (%v), want only %d", names, err, g.Lease.Epoch)
	}
	if err := b.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path+"-lease", strconv.FormatInt(int64(g.Lease.Epoch), 10))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the released term's lock file: %v, want it removed", err)
	}
}
