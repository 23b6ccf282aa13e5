package web_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/internal/web"
	otredis "github.com/onetick/onetick/redis"
)

func names(rows []web.Job) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Name
	}
	return out
}

// The Store against a real redis-server: 250 jobs, pages of 100, the name
// filter, ?attention=1 with a gap, damage and a pause filled by Annotate.
func TestStore(t *testing.T) {
	srv := redistest.Start(t)
	b, err := otredis.Open(srv.URL(), otredis.Options{Prefix: "webstore"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	every, err := cron.Parse("@every 1m", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []onetick.Job
	for i := range 250 {
		jobs = append(jobs, onetick.Job{Name: fmt.Sprintf("Job-%03d", i), Schedule: every})
	}
	g, err := b.Acquire(ctx, "leader-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// job-007 last fired ten minutes ago: a gap of about nine slots.
	old := onetick.SlotOf(g.StoreTime.Add(-10 * time.Minute).Truncate(time.Minute))
	if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{{Job: "Job-007", Slot: old, Stream: onetick.DefaultStream("Job-007"),
		Payload: "{}", Retention: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	// job-123's last-fired slot is damaged.
	if err := srv.Client().HSet(ctx, "webstore:last", "Job-123", "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	annotated := 0
	s := &web.Store{Backend: b, Jobs: jobs,
		Replica: func() web.Replica { return web.Replica{Name: "me", IsLeader: true} },
		Annotate: func(_ context.Context, rows []web.Job) error {
			annotated += len(rows)
			for i := range rows {
				if rows[i].Name == "Job-200" {
					rows[i].Paused = &web.Pause{Reason: "maintenance"}
				}
			}
			return nil
		}}

	p, err := s.Page(ctx, web.Query{Page: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Leader == nil || p.Leader.Holder != "leader-1" || p.Leader.Epoch != g.Lease.Epoch || len(p.Terms) != 1 || p.Replica.Name != "me" {
		t.Fatalf("leader %+v, terms %+v, replica %+v", p.Leader, p.Terms, p.Replica)
	}
	if p.Total != 250 || p.Matched != 250 || p.Pages() != 3 || len(p.Jobs) != 100 || p.Jobs[0].Name != "Job-000" || p.Jobs[99].Name != "Job-099" {
		t.Fatalf("page 1: total %d matched %d pages %d rows %d (%s..)", p.Total, p.Matched, p.Pages(), len(p.Jobs), p.Jobs[0].Name)
	}
	if annotated != 100 {
		t.Errorf("Annotate saw %d rows, want the page's 100: the default view reads only its page", annotated)
	}
	if j := p.Jobs[7]; j.Gap < 8 || j.LastFired == nil || *j.LastFired != old {
		t.Errorf("Job-007: gap %d, last fired %v", j.Gap, j.LastFired)
	}
	if len(p.Damage) != 0 {
		t.Errorf("page damage %v: a job's damage belongs on its row", p.Damage)
	}

	p, _ = s.Page(ctx, web.Query{Page: 2})
	if len(p.Jobs) != 100 || p.Jobs[0].Name != "Job-100" || len(p.Jobs[23].Damage) != 1 || p.Jobs[23].Name != "Job-123" {
		t.Errorf("page 2: %d rows from %s; Job-123 damage %v", len(p.Jobs), p.Jobs[0].Name, p.Jobs[23].Damage)
	}
	// A page past the end shows the last one.
	p, _ = s.Page(ctx, web.Query{Page: 99})
	if p.Query.Page != 3 || len(p.Jobs) != 50 || p.Jobs[49].Name != "Job-249" || p.First() != 201 {
		t.Errorf("page 99: shown as page %d with %d rows", p.Query.Page, len(p.Jobs))
	}

	// The filter ignores case.
	p, _ = s.Page(ctx, web.Query{Job: "job-01", Page: 1})
	want := []string{"Job-010", "Job-011", "Job-012", "Job-013", "Job-014", "Job-015", "Job-016", "Job-017", "Job-018", "Job-019"}
	if !slices.Equal(names(p.Jobs), want) || p.Matched != 10 || p.Total != 250 {
		t.Errorf("job=job-01: %v (matched %d)", names(p.Jobs), p.Matched)
	}
	p, _ = s.Page(ctx, web.Query{Job: "nothing", Page: 1})
	if len(p.Jobs) != 0 || p.Matched != 0 || p.Pages() != 1 {
		t.Errorf("job=nothing: %d rows", len(p.Jobs))
	}

	// Attention: the gap, the damage and the pause, over all pages.
	p, err = s.Page(ctx, web.Query{Attention: true, Page: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(p.Jobs); !slices.Equal(got, []string{"Job-007", "Job-123", "Job-200"}) || p.Matched != 3 {
		t.Errorf("attention: %v (matched %d)", got, p.Matched)
	}
	if j := p.Jobs[2]; j.Paused == nil || j.Paused.Reason != "maintenance" {
		t.Errorf("Job-200 paused %+v: Annotate's value is lost", j.Paused)
	}
	p, _ = s.Page(ctx, web.Query{Attention: true, Job: "-2", Page: 1})
	if got := names(p.Jobs); !slices.Equal(got, []string{"Job-200"}) {
		t.Errorf("attention with job=-2: %v", got)
	}

	// The store gone: an error, and the replica's part of the page.
	srv.Kill()
	p, err = s.Page(ctx, web.Query{Page: 1})
	if err == nil || p == nil || p.Replica.Name != "me" || p.Total != 250 {
		t.Fatalf("store down: page %+v, err %v", p, err)
	}
}

// TestStoreRelays: the page's relays are every job's, read from the store
// (asynq's pending tasks on a real Redis) whatever page is shown.
func TestStoreRelays(t *testing.T) {
	srv := redistest.Start(t)
	b, err := otredis.Open(srv.URL(), otredis.Options{Prefix: "webrelays"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	every, err := cron.Parse("@every 1h", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []onetick.Job
	for i := range 150 {
		jobs = append(jobs, onetick.Job{Name: fmt.Sprintf("job-%03d", i), Schedule: every})
	}
	q := &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "webq"}
	jobs[0].Relay, jobs[149].Relay = q, q // on pages 1 and 2
	ops := &onetick.Ops{Backend: b, Jobs: jobs}
	for _, k := range []string{"k1", "k2"} {
		if _, err := ops.Trigger(ctx, "job-149", k, "", onetick.Actor{Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	s := &web.Store{Backend: b, Jobs: jobs}
	for _, page := range []int{1, 2} {
		p, err := s.Page(ctx, web.Query{Page: page})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Relays) != 1 {
			t.Fatalf("page %d: relays %+v, want one", page, p.Relays)
		}
		r := p.Relays[0]
		if r.Kind != onetick.RelayAsynq || r.Queue != "webq" || !slices.Equal(r.Jobs, []string{"job-000", "job-149"}) || r.Backlog == nil || *r.Backlog != 2 {
			t.Errorf("page %d: relay %+v, want asynq webq of job-000 and job-149, backlog 2", page, r)
		}
	}
}
