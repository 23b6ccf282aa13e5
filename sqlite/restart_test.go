package sqlite_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/sqlite"
	"github.com/onetick/onetick/worker"
)

// TestStateSurvivesRestart: everything the store keeps is there after the
// process closes the file and another Backend opens it: last-fired slots,
// tick records, streams, the lease and the history, pauses and the
// control log, and the workers' state (work in flight, done records, dead
// letters).
func TestStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b1, path := open(t)
	g, err := b1.Acquire(ctx, "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s := onetick.Slot(1_600_000_000_000)
	var ticks []onetick.Tick
	for i := 0; i < 5; i++ {
		ticks = append(ticks, onetick.Tick{Job: "j", Slot: s + onetick.Slot(i*1000), Stream: "st", Payload: "{}", Retention: time.Hour})
	}
	if _, err := b1.Claim(ctx, g.Lease, ticks); err != nil {
		t.Fatal(err)
	}
	if _, err := b1.Pause(ctx, "p", onetick.Actor{Who: "alice", Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b1.Enqueue(ctx, []onetick.Tick{{Job: "j", Key: "k1", Stream: "st", Payload: "{}", Retention: time.Hour}},
		onetick.Actor{Who: "bob"}); err != nil {
		t.Fatal(err)
	}
	w1 := b1.WorkerStore("")
	ds, err := w1.Fetch(ctx, "c1", []string{"st"}, 3, time.Second)
	if err != nil || len(ds) != 3 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	if _, err := w1.Begin(ctx, "c1", time.Hour, []worker.Start{{D: ds[0], Overlap: worker.OverlapAllow},
		{D: ds[1], Overlap: worker.OverlapAllow}, {D: ds[2], Overlap: worker.OverlapAllow}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Finish(ctx, "c1", []worker.Finish{{D: ds[0], Kind: worker.FinishDone, Retention: time.Hour},
		{D: ds[1], Kind: worker.FinishDead, Err: "boom"}}); err != nil {
		t.Fatal(err)
	}
	// ds[2] stays in flight. The process stops without releasing its
	// lease, as a crash would.
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}

	b2, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if last, err := b2.LastFired(ctx, []string{"j"}); err != nil || last["j"] != s+4000 {
		t.Fatalf("last fired after the restart: %v, %v", last, err)
	}
	if info, err := b2.Leader(ctx); err != nil || !info.Held || info.Lease != g.Lease {
		t.Fatalf("leader after the restart: %+v, %v; want the lease in the file, %+v", info, err, g.Lease)
	}
	if terms, err := b2.History(ctx, 10); err != nil || len(terms) != 1 || terms[0].Epoch != g.Lease.Epoch {
		t.Fatalf("history after the restart: %+v, %v", terms, err)
	}
	// The tick records: claiming the same slots again, by the same term
	// (the retry of a lost answer) and by a later one.
	if res, err := b2.Claim(ctx, g.Lease, ticks); err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("retry after the restart: %+v, %v", res, err)
	}
	if recs, err := b2.Stream(ctx, "st"); err != nil || len(recs) != 6 || recs[5].Kind != onetick.KindTrigger {
		t.Fatalf("stream after the restart: %+v, %v", recs, err)
	}
	ctl, version, err := b2.Controls(ctx)
	if err != nil || !ctl["p"].Paused || ctl["p"].Actor.Who != "alice" || version != 1 {
		t.Fatalf("controls after the restart: %+v, %d, %v", ctl, version, err)
	}
	if log, err := b2.ControlLog(ctx, 10); err != nil || len(log) != 2 || log[0].Action != "trigger" || log[1].Action != "pause" {
		t.Fatalf("control log after the restart: %+v, %v", log, err)
	}
	w2 := b2.WorkerStore("")
	if recs, err := w2.DoneRecords(ctx, []string{ds[0].Tick}); err != nil || recs[ds[0].Tick].Consumer != "c1" {
		t.Fatalf("done records after the restart: %+v, %v", recs, err)
	}
	if dls, err := w2.DeadLetters(ctx, "", 10); err != nil || len(dls) != 1 || dls[0].Tick != ds[1].Tick || dls[0].Error != "boom" {
		t.Fatalf("dead letters after the restart: %+v, %v", dls, err)
	}
	st, err := w2.Status(ctx, []string{"j"})
	if err != nil || st.Jobs[0].InFlight != 1 || st.Dead != 1 {
		t.Fatalf("status after the restart: %+v, %v", st, err)
	}
	// The run in flight is still c1's: a takeover counts a second
	// delivery; the entries never fetched are fetched now.
	got, err := w2.Reclaim(ctx, "c2", []string{"st"}, 0, 10)
	if err != nil || len(got) != 1 || got[0].ID != ds[2].ID || got[0].Deliveries != 2 {
		t.Fatalf("takeover after the restart: %+v, %v", got, err)
	}
	rest, err := w2.Fetch(ctx, "c2", []string{"st"}, 10, time.Second)
	if err != nil || len(rest) != 3 {
		t.Fatalf("fetch after the restart: %d entries, %v; want the 3 never fetched", len(rest), err)
	}
}

// TestRestartCatchesUp is the single host's promise: a job whose process
// was down for a while fires, once restarted on the same file, every slot
// it missed when it prefers duplicates, and counts them as missed when it
// prefers missed; no slot fires twice across the restart.
func TestRestartCatchesUp(t *testing.T) {
	t.Parallel()
	_, path := open(t)
	every, err := cron.Parse("@every 100ms", nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []onetick.Job{
		{Name: "dup", Schedule: every, Prefer: onetick.PreferDuplicate, Stream: "dup", MaxCatchup: 1000},
		{Name: "miss", Schedule: every, Prefer: onetick.PreferMissed, Stream: "miss", Grace: time.Second},
	}
	run := func(replica string, until onetick.Slot) *onetick.Scheduler {
		b, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		fired := make(chan onetick.TickRecord, 1024)
		s, err := onetick.New(onetick.Config{Backend: b, Replica: replica, Jobs: jobs, Logger: slog.New(slog.DiscardHandler),
			Lease: onetick.LeaseConfig{TTL: time.Second, Renew: 300 * time.Millisecond},
			Sink: onetick.SinkFunc(func(_ context.Context, ts []onetick.TickRecord) error {
				for _, x := range ts {
					fired <- x
				}
				return nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		seen := map[string]bool{}
		deadline := time.After(20 * time.Second)
		for len(seen) < 2 {
			select {
			case x := <-fired:
				if x.Slot >= until {
					seen[x.Job] = true
				}
			case <-deadline:
				t.Fatalf("%s: no slot at or after %s within 20s", replica, until)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return s
	}
	run("first", onetick.SlotOf(time.Now())+500)
	down := onetick.SlotOf(time.Now())
	// The downtime is the scenario: longer than the 1s least grace, so
	// prefer-missed slots fall out of it.
	time.Sleep(1600 * time.Millisecond)
	s := run("second", onetick.SlotOf(time.Now())+300)

	b, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	recs, err := b.Stream(context.Background(), "dup")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Slot != recs[i-1].Slot+100 {
			t.Fatalf("dup: slot %s follows %s: every slot once, in order, across the restart", recs[i].Slot, recs[i-1].Slot)
		}
	}
	if n := len(recs); n == 0 || recs[0].Slot >= down || recs[n-1].Slot < down+1600 {
		t.Fatalf("dup: stream from %s to %s does not span the downtime from %s", recs[0].Slot, recs[n-1].Slot, down)
	}
	m := s.Metrics()
	if got := testutil.ToFloat64(m.JobCatchupTicks.WithLabelValues("dup")); got < 10 {
		t.Errorf("catch-up counter after 1.6s down: %v, want at least 10", got)
	}
	if got := testutil.ToFloat64(m.JobMissedTicks.WithLabelValues("miss", "missed")); got < 3 {
		t.Errorf("missed counter of the prefer-missed job after 1.6s down: %v, want at least 3", got)
	}
	if got := testutil.ToFloat64(m.JobMissedTicks.WithLabelValues("dup", "duplicate")); got != 0 {
		t.Errorf("missed counter of the prefer-duplicate job: %v, want 0", got)
	}
}
