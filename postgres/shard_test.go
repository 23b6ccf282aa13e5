package postgres_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
)

// The shard suite on PostgreSQL: a lease row per shard, the job-keyed
// tables shared and listed per shard (shard.go).
func TestShards(t *testing.T) {
	h := harness()
	h.SharedJobState = true
	backendtest.Shards(t, h)
	backendtest.Layout(t, h)
}

// The membership suite on the store's clock.
func TestMembers(t *testing.T) {
	backendtest.Members(t, backendtest.MembersHarness{
		New: func(t *testing.T) backendtest.MembersStore { return open(t) },
	})
}

// Leave drops the holder's entry at once; leaving twice, or when never a
// member, is fine; an empty holder is refused.
func TestMembersLeave(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	if _, err := b.Heartbeat(ctx, "a", time.Hour); err != nil {
		t.Fatal(err)
	}
	if live, err := b.Heartbeat(ctx, "b", time.Hour); err != nil || len(live) != 2 {
		t.Fatalf("live %q, %v; want a and b", live, err)
	}
	for range 2 {
		if err := b.Leave(ctx, "a"); err != nil {
			t.Fatalf("leave: %v", err)
		}
	}
	if err := b.Leave(ctx, "never"); err != nil {
		t.Fatalf("leave of a holder never a member: %v", err)
	}
	if err := b.Leave(ctx, ""); err == nil {
		t.Fatal("leave of an empty holder: no error")
	}
	if live, err := b.Heartbeat(ctx, "b", time.Hour); err != nil || len(live) != 1 || live[0] != "b" {
		t.Fatalf("live after a left: %q, %v; want b", live, err)
	}
}

// Heartbeats of many replicas at once, some of them expired (their rows
// deleted by each other's heartbeats), all succeed: the delete skips the
// rows being refreshed, so no two heartbeats deadlock.
func TestMembersConcurrent(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	holders := []string{"a", "b", "c", "d", "e", "f"}
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, len(holders))
		for i, h := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ttl := time.Millisecond // every entry expires between rounds
				if round == 19 {
					ttl = time.Hour
				}
				_, errs[i] = b.Heartbeat(ctx, h, ttl)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: heartbeat %s: %v", round, holders[i], err)
			}
		}
	}
	if live, err := b.Heartbeat(ctx, "a", time.Hour); err != nil || len(live) != len(holders) {
		t.Fatalf("live %q, %v; want all %d", live, err, len(holders))
	}
}

// Acquisitions of different shards at the same time get different
// epochs: one counter, taken in turn.
func TestShardEpochsUnique(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	const shards = 8
	for round := range 3 {
		var wg sync.WaitGroup
		grants := make([]onetick.Grant, shards)
		errs := make([]error, shards)
		start := make(chan struct{})
		for n := range shards {
			v, err := b.Shard(n, shards)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				grants[n], errs[n] = v.Acquire(ctx, "a", time.Minute)
			}()
		}
		close(start)
		wg.Wait()
		seen := map[onetick.Epoch]int{}
		for n, g := range grants {
			if errs[n] != nil {
				t.Fatalf("round %d: acquire of shard %d: %v", round, n, errs[n])
			}
			if m, ok := seen[g.Lease.Epoch]; ok {
				t.Fatalf("round %d: shards %d and %d both got epoch %d", round, m, n, g.Lease.Epoch)
			}
			seen[g.Lease.Epoch] = n
		}
		for n, g := range grants {
			v, _ := b.Shard(n, shards)
			if err := v.Release(ctx, g.Lease); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A view's Watch wakes on a release of its own shard, not of another's,
// and a view's Close leaves the store working. The history cap is per
// shard: a busy shard does not push another's terms out.
func TestShardWatchAndHistory(t *testing.T) {
	ctx := ctxT(t)
	b := openWith(t, postgres.Options{HistoryLen: 3})
	defer b.Close()
	v1, err := b.Shard(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := b.Shard(2, 4)
	g1, err := v1.Acquire(ctx, "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w1 := v1.Watch(wctx)
	b.WaitListening(ctx)
	drain(w1) // the wake of the listener's start, if any
	for range 5 {
		g2, err := v2.Acquire(ctx, "b", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := v2.Release(ctx, g2.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if err := v1.Release(ctx, g1.Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w1:
	case <-ctx.Done():
		t.Fatal("shard 1's watcher did not wake on shard 1's release")
	}
	if terms, err := v1.History(ctx, 10); err != nil || len(terms) != 1 || terms[0].Holder != "a" || terms[0].Reason != onetick.EndReleased {
		t.Fatalf("shard 1's history %+v, %v; want a's term, released", terms, err)
	}
	if terms, err := v2.History(ctx, 10); err != nil || len(terms) != 3 {
		t.Fatalf("shard 2's history %+v, %v; want the newest 3 (HistoryLen)", terms, err)
	}
	if err := v1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("the store after a view's Close: %v", err)
	}
}

func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// A store at schema version 5 (before shards) migrated to 6 keeps its
// lease, holder and epoch, as shard 0's; its terms are shard 0's; the
// next epoch of any shard is past the old counter.
func TestMigrateShardsKeepsTheLease(t *testing.T) {
	ctx := ctxT(t)
	b, err := postgres.Open(ctx, pgtest.URL(), postgres.Options{Schema: pgtest.Schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.MigrateTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	execSQL(t, b, `INSERT INTO {s}.lease (holder, epoch, expires_at) VALUES ('old', 41, clock_timestamp() + interval '1 hour')`)
	execSQL(t, b, `INSERT INTO {s}.election (epoch) VALUES (41)`)
	execSQL(t, b, `INSERT INTO {s}.terms (epoch, holder, started_at, expires_at) VALUES
		(40, 'older', clock_timestamp(), NULL), (41, 'old', clock_timestamp(), clock_timestamp() + interval '1 hour')`)
	execSQL(t, b, `UPDATE {s}.terms SET ended_at = clock_timestamp(), reason = 'expired' WHERE epoch = 40`)
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := b.SchemaVersion(ctx); err != nil || v != 6 || postgres.LatestVersion() != 6 {
		t.Fatalf("schema version %d, %v (latest %d); want 6", v, err, postgres.LatestVersion())
	}
	old := onetick.Lease{Holder: "old", Epoch: 41}
	v0, err := b.Shard(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, be := range []onetick.Backend{b, v0} {
		if info, err := be.Leader(ctx); err != nil || !info.Held || info.Lease != old {
			t.Fatalf("leader after the migration: %+v, %v; want %+v", info, err, old)
		}
		if terms, err := be.History(ctx, 10); err != nil || len(terms) != 2 || terms[0].Holder != "old" {
			t.Fatalf("history after the migration: %+v, %v; want the two terms", terms, err)
		}
	}
	if _, err := b.Renew(ctx, old, time.Hour); err != nil {
		t.Fatalf("renew of the migrated lease: %v", err)
	}
	if _, err := v0.Acquire(ctx, "new", time.Hour); err == nil {
		t.Fatal("shard 0's view acquired over the migrated lease")
	}
	v1, _ := b.Shard(1, 4)
	g, err := v1.Acquire(ctx, "new", time.Hour)
	if err != nil || g.Lease.Epoch <= 41 {
		t.Fatalf("shard 1's acquire: %+v, %v; want an epoch past 41", g, err)
	}
	if n := count(t, b, `SELECT count(*) FROM {s}.lease WHERE shard = 0 AND holder = 'old'`); n != 1 {
		t.Fatalf("%d shard 0 rows of the old lease", n)
	}
	// The one-row rule holds per shard: a second row of shard 0, or a
	// shard out of range, is refused.
	for _, q := range []string{
		`INSERT INTO {s}.lease (holder, epoch, expires_at) VALUES ('x', 1, clock_timestamp())`,
		`INSERT INTO {s}.lease (shard, holder, epoch, expires_at) VALUES (256, 'x', 1, clock_timestamp())`,
		`INSERT INTO {s}.lease (shard, holder, epoch, expires_at) VALUES (-1, 'x', 1, clock_timestamp())`,
	} {
		if _, err := b.Pool().Exec(ctx, b.Q(q)); err == nil {
			t.Fatalf("%s: accepted", q)
		}
	}
}

// A view's control log pages back through other shards' records until it
// has n of its own: shard 1's one record, older than 40 of shard 2's, is
// found; the store's log holds all of them.
func TestShardControlLogPages(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	const shards = 3
	j1, j2 := jobOf(1, shards), jobOf(2, shards)
	v1, _ := b.Shard(1, shards)
	v2, _ := b.Shard(2, shards)
	who := onetick.Actor{Who: "alice", Reason: "test"}
	if _, err := v1.Pause(ctx, j1, who); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		f := v2.Pause
		if i%2 == 1 {
			f = v2.Resume
		}
		if _, err := f(ctx, j2, who); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{1, 5} {
		if log, err := v1.ControlLog(ctx, n); err != nil || len(log) != 1 || log[0].Job != j1 {
			t.Fatalf("shard 1's newest %d control records: %+v, %v; want %s's one", n, log, err, j1)
		}
	}
	if log, err := v2.ControlLog(ctx, 50); err != nil || len(log) != 40 {
		t.Fatalf("shard 2's control log: %d records, %v; want 40", len(log), err)
	}
	if log, err := b.ControlLog(ctx, 50); err != nil || len(log) != 41 {
		t.Fatalf("the store's control log: %d records, %v; want 41", len(log), err)
	}
	if log, err := v1.ControlLog(ctx, 0); err != nil || len(log) != 0 {
		t.Fatalf("ControlLog(0): %+v, %v", log, err)
	}
}

// jobOf returns a job name that onetick.ShardOf puts in shard n.
func jobOf(n, shards int) string {
	for i := 0; ; i++ {
		if j := "job" + strconv.Itoa(i); onetick.ShardOf(j, shards) == n {
			return j
		}
	}
}
