package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/postgres"
)

// reportArgs is what the River worker of the tests receives: the relay's
// args under the kind "report".
type reportArgs struct{ postgres.RiverTick }

func (reportArgs) Kind() string { return "report" }

// recorder is a River worker that records each job's args, in order.
type recorder struct {
	river.WorkerDefaults[reportArgs]
	mu   sync.Mutex
	got  []postgres.RiverTick
	more chan struct{} // signalled on each record
}

func (r *recorder) Work(_ context.Context, j *river.Job[reportArgs]) error {
	r.mu.Lock()
	r.got = append(r.got, j.Args.RiverTick)
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
	return nil
}

// await waits until the worker recorded n jobs, and returns them.
func (r *recorder) await(t *testing.T, n int) []postgres.RiverTick {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		got := append([]postgres.RiverTick(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("the River worker recorded %d jobs, want %d: %+v", len(got), n, got)
		}
	}
}

// riverRig is onetick's backend with River's tables migrated in a
// schema of their own, and a River client working the relayed jobs.
type riverRig struct {
	b   *postgres.Backend
	rec *recorder
}

func newRiverRig(t *testing.T) *riverRig {
	t.Helper()
	ctx := ctxT(t)
	rs := pgtest.Schema(t)
	b := openWith(t, postgres.Options{RiverSchema: rs})
	t.Cleanup(func() { _ = b.Close() })
	if _, err := b.Pool().Exec(ctx, "CREATE SCHEMA "+rs); err != nil {
		t.Fatal(err)
	}
	if err := b.CanRelay(ctx, onetick.Relay{Kind: onetick.RelayRiver}); err == nil || !strings.Contains(err.Error(), "river's tables are not in schema "+rs) {
		t.Fatalf("CanRelay before River's migrations: %v", err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(b.Pool()), &rivermigrate.Config{Schema: rs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.CanRelay(ctx, onetick.Relay{Kind: onetick.RelayRiver}); err != nil {
		t.Fatalf("CanRelay: %v", err)
	}
	rec := &recorder{more: make(chan struct{}, 1)}
	workers := river.NewWorkers()
	river.AddWorker(workers, rec)
	c, err := river.NewClient(riverpgxv5.New(b.Pool()), &river.Config{Schema: rs, Workers: workers,
		Queues: map[string]river.QueueConfig{"reports": {MaxWorkers: 4}}, FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			t.Errorf("river stop: %v", err)
		}
	})
	return &riverRig{b: b, rec: rec}
}

// jobsIn counts River's jobs.
func (r *riverRig) jobsIn(t *testing.T) int {
	t.Helper()
	var n int
	if err := r.b.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+r.b.RiverSchema()+`.river_job`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var reports = &onetick.Relay{Kind: onetick.RelayRiver, Queue: "reports", Type: "report", MaxAttempts: 3}

func relayed(s onetick.Slot) onetick.Tick {
	return onetick.Tick{Job: "nightly", Slot: s, Stream: "never", Payload: `{"p":1}`, Retention: time.Hour, Relay: reports}
}

// checkOnce fails unless got holds each of want's tick ids exactly once.
func checkOnce(t *testing.T, got []postgres.RiverTick, want ...onetick.Tick) {
	t.Helper()
	n := map[string]int{}
	for _, g := range got {
		n[g.Tick]++
	}
	for _, w := range want {
		if n[w.ID()] != 1 {
			t.Fatalf("tick %s worked %d times, want once: %+v", w.ID(), n[w.ID()], got)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("worked %d jobs, want %d: %+v", len(got), len(want), got)
	}
}

func TestRelayRiverClaimEachSlotOnce(t *testing.T) {
	ctx := ctxT(t)
	r := newRiverRig(t)
	g, err := r.b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	ticks := []onetick.Tick{relayed(s0), relayed(s0 + 1000), relayed(s0 + 2000)}
	for try := 0; try < 2; try++ { // the second is a retry of the same claim
		res, err := r.b.Claim(ctx, g.Lease, ticks)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range res.Outcomes {
			if o != onetick.Claimed {
				t.Fatalf("try %d: tick %d: %v, want claimed", try, i, o)
			}
		}
	}
	got := r.rec.await(t, 3)
	checkOnce(t, got, ticks...)
	for _, w := range got {
		if w.Job != "nightly" || w.Payload != `{"p":1}` || w.Origin != "schedule" || w.Slot.UnixMilli()%1000 != 0 {
			t.Fatalf("args %+v", w)
		}
	}
	if n := r.jobsIn(t); n != 3 {
		t.Fatalf("River holds %d jobs after a retried claim, want 3", n)
	}
	if recs, err := r.b.ReadStream(ctx, "never", 0); err != nil || len(recs) != 0 {
		t.Fatalf("the job's stream: %+v, %v; want nothing appended", recs, err)
	}
	runs, err := r.b.Runs(ctx, onetick.RunQuery{Job: "nightly"})
	if err != nil || len(runs.Runs) != 3 || !strings.Contains(runs.Runs[0].Events[0].Detail, "relayed to river") {
		t.Fatalf("ledger %+v, %v: want 3 records, relayed to river", runs, err)
	}
}

func TestRelayRiverFencedClaimInsertsNothing(t *testing.T) {
	ctx := ctxT(t)
	r := newRiverRig(t)
	a, err := r.b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	first := relayed(s0)
	if _, err := r.b.Claim(ctx, a.Lease, []onetick.Tick{first}); err != nil {
		t.Fatal(err)
	}
	// The leader changes: a's lease runs out, b takes it and claims the
	// next slot; a's claim of a later slot, and of the same one, is fenced.
	execSQL(t, r.b, `UPDATE {s}.lease SET expires_at = clock_timestamp() - interval '1 millisecond'`)
	bg, err := r.b.Acquire(ctx, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.b.Claim(ctx, bg.Lease, []onetick.Tick{first, relayed(s0 + 1000)})
	if err != nil || res.Outcomes[0] != onetick.Duplicate || res.Outcomes[1] != onetick.Claimed {
		t.Fatalf("the new leader's claim: %+v, %v; want duplicate, claimed", res, err)
	}
	if _, err := r.b.Claim(ctx, a.Lease, []onetick.Tick{relayed(s0 + 2000)}); !errors.Is(err, onetick.ErrFenced) {
		t.Fatalf("the superseded term's claim: %v, want fenced", err)
	}
	checkOnce(t, r.rec.await(t, 2), first, relayed(s0+1000))
	if n := r.jobsIn(t); n != 2 {
		t.Fatalf("River holds %d jobs, want 2: the fenced claim inserted one", n)
	}
}

func TestRelayRiverTriggerAndBackfill(t *testing.T) {
	ctx := ctxT(t)
	r := newRiverRig(t)
	trig := relayed(0)
	trig.Key, trig.OutOfOrder = "deploy-42", true
	who := onetick.Actor{Who: "ann", Reason: "test"}
	for try := 0; try < 2; try++ {
		res, err := r.b.Enqueue(ctx, []onetick.Tick{trig}, who)
		want := onetick.Claimed
		if try == 1 {
			want = onetick.Duplicate
		}
		if err != nil || res.Outcomes[0] != want {
			t.Fatalf("trigger try %d: %+v, %v; want %v", try, res, err, want)
		}
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Second))
	back := []onetick.Tick{relayed(s0), relayed(s0 + 1000)}
	for i := range back {
		back[i].OutOfOrder = true
	}
	if res, err := r.b.Enqueue(ctx, back, who); err != nil || res.Outcomes[0] != onetick.Claimed || res.Outcomes[1] != onetick.Claimed {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	got := r.rec.await(t, 3)
	checkOnce(t, got, trig, back[0], back[1])
	origins := map[string]string{}
	for _, g := range got {
		origins[g.Tick] = g.Origin
	}
	if origins[trig.ID()] != onetick.KindTrigger || origins[back[0].ID()] != onetick.KindBackfill {
		t.Fatalf("origins %v", origins)
	}
	if recs, err := r.b.ReadStream(ctx, "never", 0); err != nil || len(recs) != 0 {
		t.Fatalf("the job's stream: %+v, %v; want nothing appended", recs, err)
	}
	// onetick's records gone (past their retention, say), the same
	// backfill is claimed again: River's uniqueness by args makes the
	// second insert a no-op.
	execSQL(t, r.b, `DELETE FROM {s}.ticks`)
	if res, err := r.b.Enqueue(ctx, back, who); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("backfill again: %+v, %v", res, err)
	}
	if n := r.jobsIn(t); n != 3 {
		t.Fatalf("River holds %d jobs after a second insert of the same ticks, want 3", n)
	}
}

func TestRelayRiverRefusesWhatItDoesNotKnow(t *testing.T) {
	ctx := ctxT(t)
	r := newRiverRig(t)
	if err := r.b.CanRelay(ctx, onetick.Relay{Kind: onetick.RelayAsynq}); err == nil || !strings.Contains(err.Error(), "not to asynq") {
		t.Fatalf("CanRelay(asynq) on PostgreSQL: %v", err)
	}
	rs := r.b.RiverSchema()
	if _, err := r.b.Pool().Exec(ctx, `INSERT INTO `+rs+`.river_migration (line, version) VALUES ('main', 999)`); err != nil {
		t.Fatal(err)
	}
	err := r.b.CanRelay(ctx, onetick.Relay{Kind: onetick.RelayRiver})
	if err == nil || !strings.Contains(err.Error(), "migration version 999, newer than") {
		t.Fatalf("CanRelay with a newer River schema: %v", err)
	}
	if _, err := r.b.Pool().Exec(ctx, `DELETE FROM `+rs+`.river_migration WHERE version >= (SELECT max(version) FROM `+rs+`.river_migration WHERE version < 999)`); err != nil {
		t.Fatal(err)
	}
	err = r.b.CanRelay(ctx, onetick.Relay{Kind: onetick.RelayRiver})
	if err == nil || !strings.Contains(err.Error(), "older than") {
		t.Fatalf("CanRelay with an older River schema: %v", err)
	}
}

func TestRelayAsynqRefusedOnPostgres(t *testing.T) {
	backendtest.RelayRefused(t, harness(), onetick.Relay{Kind: onetick.RelayAsynq})
}

// TestRelayRiverBacklog: the backlog of a River relay is the River jobs
// of its queue not yet worked (available, scheduled, retryable), read
// from the River schema: relayed ticks in a queue no River client works
// count, until River finishes or runs them; a queue worked by a real
// River client drains to 0; a relay kind PostgreSQL does not serve, and
// River's tables missing, are errors that say so.
func TestRelayRiverBacklog(t *testing.T) {
	ctx := ctxT(t)
	r := newRiverRig(t)
	idle := &onetick.Relay{Kind: onetick.RelayRiver, Queue: "idle", Type: "report"}
	backlog := func(rl onetick.Relay) int64 {
		t.Helper()
		n, err := r.b.RelayBacklog(ctx, rl)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := backlog(*idle); n != 0 {
		t.Fatalf("backlog of an empty queue: %d", n)
	}
	g, err := r.b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s0 := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	var ticks []onetick.Tick
	for i := range 5 {
		tk := relayed(s0 + onetick.Slot(1000*i))
		tk.Relay = idle
		ticks = append(ticks, tk)
	}
	worked := []onetick.Tick{relayed(s0), relayed(s0 + 1000)} // queue reports: the rig's River client works it
	for i := range worked {
		worked[i].Job = "drain"
	}
	if _, err := r.b.Claim(ctx, g.Lease, append(ticks, worked...)); err != nil {
		t.Fatal(err)
	}
	if n := backlog(*idle); n != 5 {
		t.Fatalf("backlog of 5 relayed ticks nobody works: %d", n)
	}
	// River's own states: one completed, one running, one retryable, one
	// scheduled, one still available.
	q := func(sql string, args ...any) {
		t.Helper()
		if _, err := r.b.Pool().Exec(ctx, strings.ReplaceAll(sql, "{r}", r.b.RiverSchema()), args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	ids := make([]int64, 0, 5)
	rows, err := r.b.Pool().Query(ctx, `SELECT id FROM `+r.b.RiverSchema()+`.river_job WHERE queue = 'idle' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Close(); rows.Err() != nil || len(ids) != 5 {
		t.Fatalf("River jobs of queue idle: %v, %v", ids, rows.Err())
	}
	q(`UPDATE {r}.river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, ids[0])
	q(`UPDATE {r}.river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1`, ids[1])
	q(`UPDATE {r}.river_job SET state = 'retryable', attempt = 1, attempted_at = now() WHERE id = $1`, ids[2])
	q(`UPDATE {r}.river_job SET state = 'scheduled', scheduled_at = now() + interval '1 hour' WHERE id = $1`, ids[3])
	if n := backlog(*idle); n != 3 {
		t.Fatalf("backlog with one completed, one running, one retryable, one scheduled and one available: %d, want 3", n)
	}
	// A queue a River client works drains: River marks a job running when
	// it fetches it, before its Work is called.
	r.rec.await(t, 2)
	if n := backlog(*reports); n != 0 {
		t.Fatalf("backlog of the worked queue: %d", n)
	}

	if _, err := r.b.RelayBacklog(ctx, onetick.Relay{Kind: onetick.RelayAsynq, Queue: "idle"}); err == nil || !strings.Contains(err.Error(), "no backlog of a asynq relay") {
		t.Fatalf("backlog of an asynq relay on PostgreSQL: %v", err)
	}
	bare := openWith(t, postgres.Options{RiverSchema: pgtest.Schema(t)})
	t.Cleanup(func() { _ = bare.Close() })
	if _, err := bare.RelayBacklog(ctx, *idle); err == nil || !strings.Contains(err.Error(), "river's tables are not in schema") {
		t.Fatalf("backlog without River's tables: %v", err)
	}
}
