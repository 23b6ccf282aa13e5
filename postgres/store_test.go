package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
	"github.com/onetick/onetick/worker"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func count(t *testing.T, b *postgres.Backend, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := b.Pool().QueryRow(context.Background(), b.Q(sql), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Replicas migrate at the same time when they start together: every
// Migrate succeeds and the schema ends at the latest version, applied
// once. A schema that a newer onetick migrated is refused.
func TestMigrateConcurrently(t *testing.T) {
	ctx := ctxT(t)
	for round := range 3 {
		schema := pgtest.Schema(t)
		var bs []*postgres.Backend
		for range 3 {
			b, err := postgres.Open(ctx, pgtest.URL(), postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			bs = append(bs, b)
		}
		start := make(chan struct{})
		errs := make([]error, len(bs))
		var wg sync.WaitGroup
		for i, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = b.Migrate(ctx)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: migrate %d: %v", round, i, err)
			}
		}
		n := count(t, bs[0], `SELECT count(*) FROM {s}.schema_migrations`)
		if v, err := bs[1].SchemaVersion(ctx); err != nil || v != postgres.LatestVersion() || n != int64(postgres.LatestVersion()) {
			t.Fatalf("round %d: version %d (%v), %d migrations recorded; want %d once", round, v, err, n, postgres.LatestVersion())
		}
	}
	b := open(t)
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("migrating a migrated schema: %v", err)
	}
	execSQL(t, b, `INSERT INTO {s}.schema_migrations (version, name) VALUES ($1, 'from the future')`, postgres.LatestVersion()+1)
	if err := b.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("migrating a schema from a newer onetick: %v, want a refusal", err)
	}
	fresh, err := postgres.Open(ctx, pgtest.URL(), postgres.Options{Schema: pgtest.Schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if v, err := fresh.SchemaVersion(ctx); err != nil || v != 0 {
		t.Fatalf("version of a schema never migrated: %d, %v", v, err)
	}
}

// A claim whose connection dies in the middle of its transaction, after
// it wrote its record, its entry and the last-fired slot and while it
// trims the stream, leaves nothing behind; the leader's retry claims the
// tick once.
func TestClaimConnectionKilled(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	first := onetick.Tick{Job: "j", Slot: s0, Stream: "k", Payload: "{}", Retention: time.Hour, MaxLen: 1}
	if res, err := b.Claim(ctx, g.Lease, []onetick.Tick{first}); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("first claim: %+v, %v", res, err)
	}
	// Another session locks the entry that the next claim's trim (MaxLen
	// 1) deletes, so that claim stops there, mid-transaction.
	unblock := lockEntries(t, b, "k")
	defer unblock()
	next := first
	next.Slot += 1000
	done := make(chan error, 1)
	go func() {
		_, err := b.Claim(ctx, g.Lease, []onetick.Tick{next})
		done <- err
	}()
	pid := waitBlocked(t, b, "entries e USING", "ticks")
	var killed bool
	if err := b.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend: %v, %v", killed, err)
	}
	if err := <-done; err == nil || errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("claim on a killed connection: %v, want a failure", err)
	}
	unblock()
	recs, err := b.ReadStream(ctx, "k", 0)
	if err != nil || len(recs) != 1 || recs[0].Slot != s0 {
		t.Fatalf("stream after the killed claim: %+v, %v; want the first tick alone", recs, err)
	}
	if last, err := b.LastFired(ctx, []string{"j"}); err != nil || last["j"] != s0 {
		t.Fatalf("last fired after the killed claim: %v, %v; want %s", last, err, s0)
	}
	if n := count(t, b, `SELECT count(*) FROM {s}.ticks WHERE tick = $1`, next.ID()); n != 0 {
		t.Fatalf("the killed claim left %d tick records", n)
	}
	for range 2 { // the retry, and a retry of the retry
		if res, err := b.Claim(ctx, g.Lease, []onetick.Tick{next}); err != nil || res.Outcomes[0] != onetick.Claimed {
			t.Fatalf("retried claim: %+v, %v", res, err)
		}
	}
	recs, err = b.ReadStream(ctx, "k", 0)
	if err != nil || len(recs) != 1 || recs[0].Slot != next.Slot || recs[0].Tick != next.ID() {
		t.Fatalf("stream after the retries: %+v, %v; want the second tick once (MaxLen 1)", recs, err)
	}
}

// lockEntries locks the entries of stream from another session, until
// the returned function (idempotent) rolls that session back.
func lockEntries(t *testing.T, b *postgres.Backend, stream string) func() {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, b.Q(`SELECT 1 FROM {s}.entries WHERE stream = $1 FOR UPDATE`), stream); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
}

// waitBlocked waits until a session of b's schema whose statement
// contains query waits for a lock and, if wrote is set, holds a write
// lock on that table; it returns the session's pid. It polls the server's
// view: a blocked statement gives no other signal.
func waitBlocked(t *testing.T, b *postgres.Backend, query, wrote string) int {
	t.Helper()
	var pid int
	for deadline := time.Now().Add(20 * time.Second); ; {
		err := b.Pool().QueryRow(context.Background(), `SELECT a.pid FROM pg_stat_activity a
			WHERE a.wait_event_type = 'Lock' AND strpos(a.query, $2) > 0 AND strpos(a.query, $1) > 0
				AND ($3 = '' OR EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
					WHERE l.pid = a.pid AND c.relname = $3 AND l.mode = 'RowExclusiveLock'))`,
			b.Schema(), query, wrote).Scan(&pid)
		if err == nil {
			return pid
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session of %s blocked in %q", b.Schema(), query)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The fence in SQL: while a claim is in flight its lease cannot change
// hands, even when it runs out meanwhile; its leader's renewal is not
// held up. The claim, having checked a valid term, commits; the next
// leader's term starts after it, with a larger epoch.
func TestClaimInFlightHoldsTheFence(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	a, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	first := onetick.Tick{Job: "j", Slot: s0, Stream: "f", Payload: "{}", Retention: time.Hour, MaxLen: 1}
	if _, err := b.Claim(ctx, a.Lease, []onetick.Tick{first}); err != nil {
		t.Fatal(err)
	}
	unblock := lockEntries(t, b, "f")
	defer unblock()
	next := first
	next.Slot += 1000
	claimed := make(chan onetick.ClaimResult, 1)
	go func() {
		res, err := b.Claim(ctx, a.Lease, []onetick.Tick{next})
		if err != nil {
			t.Errorf("the claim in flight: %v", err)
		}
		claimed <- res
	}()
	waitBlocked(t, b, "entries e USING", "ticks")
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = b.Renew(rctx, a.Lease, time.Minute)
	cancel()
	if err != nil {
		t.Fatalf("renew while a claim is in flight: %v", err)
	}
	// The lease runs out; another replica tries to take it.
	execSQL(t, b, `UPDATE {s}.lease SET expires_at = clock_timestamp() - interval '1 millisecond'`)
	acquired := make(chan onetick.Grant, 1)
	go func() {
		g, err := b.Acquire(ctx, "b", time.Minute)
		if err != nil {
			t.Errorf("acquire after the claim: %v", err)
		}
		acquired <- g
	}()
	waitBlocked(t, b, "lease WHERE shard = $1 FOR UPDATE", "")
	select {
	case <-claimed:
		t.Fatal("the claim finished while its entry was locked")
	case g := <-acquired:
		t.Fatalf("%+v acquired the lease while a claim of the previous term was in flight", g)
	default:
	}
	unblock()
	if res := <-claimed; len(res.Outcomes) != 1 || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("the claim in flight: %+v, want claimed", res)
	}
	g := <-acquired
	if g.Lease.Holder != "b" || g.Lease.Epoch <= a.Lease.Epoch {
		t.Fatalf("the next term: %+v after epoch %d", g.Lease, a.Lease.Epoch)
	}
	recs, err := b.ReadStream(ctx, "f", 0)
	if err != nil || len(recs) != 1 || recs[0].Tick != next.ID() || recs[0].Epoch != a.Lease.Epoch ||
		onetick.Slot(g.StoreTime.UnixMilli()) < onetick.Slot(mustMs(t, recs[0].ID)) {
		t.Fatalf("stream %+v, %v: want the claimed tick, of term %d, appended before term %d began (%s)",
			recs, err, a.Lease.Epoch, g.Lease.Epoch, g.StoreTime)
	}
	// The old term is fenced from now on.
	if _, err := b.Claim(ctx, a.Lease, []onetick.Tick{{Job: "j", Slot: next.Slot + 1000, Stream: "f", Payload: "{}", Retention: time.Hour}}); !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("a claim of the old term after the handover: %v, want ErrFenced", err)
	}
}

func mustMs(t *testing.T, id string) int64 {
	t.Helper()
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		t.Fatalf("entry id %q: %v", id, err)
	}
	return n
}

// A standby's Watch wakes when the lease runs out by the database's
// clock, with no release and nobody else acting.
func TestWatchWakesAtExpiry(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	wctx, cancel := context.WithCancel(ctx)
	w := b.Watch(wctx)
	if _, err := b.Acquire(ctx, "a", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for expired := false; !expired; {
		select {
		case <-w:
		case <-deadline:
			t.Fatal("no wake at the lease's expiry within 5s")
		}
		info, err := b.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		expired = !info.Held
	}
	cancel()
	for range w { // closed after cancel
	}
}

// The LISTEN connection comes back after the server drops it, and a
// release made after that still wakes a standby.
func TestListenerReconnects(t *testing.T) {
	ctx := ctxT(t)
	var logs syncBuffer
	b, err := postgres.Open(ctx, pgtest.URL(), postgres.Options{Schema: pgtest.Schema(t),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := b.Watch(wctx)
	wake := func(what string) {
		t.Helper()
		select {
		case <-w:
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake within 5s: %s", what)
		}
	}
	wake("the listener connected")
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wake("acquired")
	// listener returns the pid of the LISTEN session, other than not.
	listener := func(not int) (pid int) {
		for deadline := time.Now().Add(20 * time.Second); ; {
			err := b.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity
				WHERE application_name = $1 AND query LIKE 'LISTEN%' AND pid <> $2`,
				postgres.ListenerName(b.Schema()), not).Scan(&pid)
			if err == nil {
				return pid
			}
			if time.Now().After(deadline) {
				t.Fatalf("no listener session: %v", err)
			}
			time.Sleep(5 * time.Millisecond) // polling the server's view
		}
	}
	old := listener(0)
	if _, err := b.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, old); err != nil {
		t.Fatal(err)
	}
	listener(old)
	// Notifications sent while it was away are lost: every subscriber is
	// woken once it is back.
	wake("the listener reconnected")
	if l := logs.String(); !strings.Contains(l, "listener lost") || !strings.Contains(l, "listener back") {
		t.Errorf("logs %q: want the loss and the return", l)
	}
	if err := b.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
	wake("released after the listener reconnected")
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Prune deletes what outlived its retention, and only that; a tick whose
// record was pruned is no longer known to a manual enqueue.
func TestPrune(t *testing.T) {
	ctx := ctxT(t)
	schema := pgtest.Schema(t)
	b, err := postgres.Open(ctx, pgtest.URL(), postgres.Options{Schema: schema, EntryRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := onetick.SlotOf(time.Now())
	short := onetick.Tick{Job: "short", Slot: now - 1000, Stream: "p", Payload: "{}", Retention: time.Millisecond}
	long := onetick.Tick{Job: "long", Slot: now - 1000, Stream: "p", Payload: "{}", Retention: time.Hour}
	if res, err := b.Claim(ctx, g.Lease, []onetick.Tick{short, long}); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	// An entry appended two hours ago (by the database's clock), past
	// the entry retention.
	execSQL(t, b, `UPDATE {s}.entries SET ms = ms - 7200000 WHERE job = 'short'`)
	// A done record and a marker that lived their time.
	s := b.WorkerStore("")
	ds, err := s.Fetch(ctx, "c", []string{"p"}, 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	if res, err := s.Begin(ctx, "c", time.Millisecond, []worker.Start{{D: ds[0], Overlap: worker.OverlapSkip}}); err != nil || res.Admissions[0] != worker.Run {
		t.Fatalf("begin: %+v, %v", res, err)
	}
	if owned, err := s.Finish(ctx, "c", []worker.Finish{{D: ds[0], Kind: worker.FinishDone, Retention: time.Millisecond}}); err != nil || !owned[0] {
		t.Fatalf("finish: %v, %v", owned, err)
	}
	execSQL(t, b, `INSERT INTO {s}.markers (grp, job, kind, token, expires_at) VALUES ('onetick', 'x', 'run', 1, clock_timestamp())`)
	execSQL(t, b, `INSERT INTO {s}.control_log (action, job, who, reason, at, detail)
		SELECT 'pause', 'j', 'w', '', clock_timestamp(), '' FROM generate_series(1, 1005)`)
	for st := onetick.SlotOf(time.Now()); onetick.SlotOf(time.Now()) <= st+2; {
	}
	p, err := b.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p != (postgres.Pruned{Records: 1, Entries: 1, Done: 1, Markers: 1, ControlLog: 5}) {
		t.Fatalf("pruned %+v, want one of each and 5 control records", p)
	}
	if n := count(t, b, `SELECT count(*) FROM {s}.ticks WHERE tick = $1`, long.ID()); n != 1 {
		t.Fatal("a record within its retention was pruned")
	}
	if recs, _ := b.ReadStream(ctx, "p", 0); len(recs) != 1 || recs[0].Job != "long" {
		t.Fatalf("stream after the prune: %+v", recs)
	}
	if p, err := b.Prune(ctx); err != nil || p != (postgres.Pruned{}) {
		t.Fatalf("a second prune: %+v, %v; want nothing", p, err)
	}
	// The pruned record no longer deduplicates a backfill of its tick;
	// the kept one does.
	res, err := b.Enqueue(ctx, []onetick.Tick{{Job: "short", Slot: short.Slot, Stream: "p", Payload: "{}", Retention: time.Hour}}, onetick.Actor{Who: "op"})
	if err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("backfill of a pruned tick: %+v, %v", res, err)
	}
	res, err = b.Enqueue(ctx, []onetick.Tick{{Job: "long", Slot: long.Slot, Stream: "p", Payload: "{}", Retention: time.Hour}}, onetick.Actor{Who: "op"})
	if err != nil || res.Outcomes[0] != onetick.Duplicate {
		t.Fatalf("backfill of a kept tick: %+v, %v", res, err)
	}
}

// An entry trimmed from its stream (MaxLen) while a worker runs it stays
// that worker's to settle; once given back, Reclaim drops it.
func TestTrimmedEntryInFlight(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	claim := func(i int) {
		t.Helper()
		tk := onetick.Tick{Job: "j", Slot: s0 + onetick.Slot(i*1000), Stream: "tr", Payload: "{}", Retention: time.Hour, MaxLen: 1}
		if res, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil || res.Outcomes[0] != onetick.Claimed {
			t.Fatalf("claim %d: %+v, %v", i, res, err)
		}
	}
	s := b.WorkerStore("")
	fetch := func() *worker.Delivery {
		t.Helper()
		ds, err := s.Fetch(ctx, "c", []string{"tr"}, 10, time.Second)
		if err != nil || len(ds) != 1 {
			t.Fatalf("fetch: %v, %v", ds, err)
		}
		return ds[0]
	}
	claim(0)
	d := fetch()
	if res, err := s.Begin(ctx, "c", time.Minute, []worker.Start{{D: d}}); err != nil || res.Admissions[0] != worker.Run {
		t.Fatalf("begin: %+v, %v", res, err)
	}
	claim(1) // trims d's entry
	if recs, _ := b.ReadStream(ctx, "tr", 0); len(recs) != 1 || recs[0].ID == d.ID {
		t.Fatalf("stream %+v: want d's entry trimmed", recs)
	}
	if lost, err := s.Heartbeat(ctx, "c", time.Minute, time.Minute, []worker.Hold{{D: d, Marker: worker.MarkerRun}}); err != nil || len(lost) != 0 {
		t.Fatalf("heartbeat of a trimmed entry in flight: lost %v, %v", lost, err)
	}
	if owned, err := s.Finish(ctx, "c", []worker.Finish{{D: d, Kind: worker.FinishDone, Retention: time.Hour}}); err != nil || !owned[0] {
		t.Fatalf("finish of a trimmed entry in flight: %v, %v", owned, err)
	}
	d2 := fetch()
	if owned, err := s.Finish(ctx, "c", []worker.Finish{{D: d2, Kind: worker.FinishRelease}}); err != nil || !owned[0] {
		t.Fatalf("give back: %v, %v", owned, err)
	}
	claim(2) // trims d2's entry
	if got, err := s.Reclaim(ctx, "other", []string{"tr"}, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("reclaim of a trimmed entry: %v, %v; want nothing", got, err)
	}
	if n := count(t, b, `SELECT count(*) FROM {s}.pending`); n != 0 {
		t.Fatalf("%d pending rows left; want the trimmed entry's dropped", n)
	}
	if d3 := fetch(); d3.Slot != s0+2000 {
		t.Fatalf("next delivery %+v", d3)
	}
}

// One tick at a time, a stream stays near its MaxLen: trimmed about
// every other claim here, never below MaxLen.
func TestMaxLenOneAtATime(t *testing.T) {
	ctx := ctxT(t)
	b := open(t)
	defer b.Close()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Second))
	for i := range 200 {
		tk := onetick.Tick{Job: "j", Slot: s0 + onetick.Slot(i*1000), Stream: "ml", Payload: "{}", Retention: time.Hour, MaxLen: 20}
		if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{tk}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := b.ReadStream(ctx, "ml", 0)
	if err != nil || len(recs) < 20 || len(recs) > 60 || recs[len(recs)-1].Slot != s0+199000 {
		t.Fatalf("%d entries (%v), want between 20 and 60 ending with the newest", len(recs), err)
	}
}

func TestOptionsAndURL(t *testing.T) {
	for _, bad := range []string{"Upper", "1digit", "has-dash", "has space", strings.Repeat("x", 41), `quo"te`} {
		if _, err := postgres.Open(context.Background(), pgtest.URL(), postgres.Options{Schema: bad}); err == nil {
			t.Errorf("schema %q accepted", bad)
		}
	}
	if _, err := postgres.Open(context.Background(), "postgres://u:s3cret@host:notaport/db", postgres.Options{}); err == nil ||
		strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad URL: %v, want an error without the password", err)
	}
}
