package redis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/redistest"
)

// TestRelayStatusBacklog: ReadStatus lists each relay the jobs use, by
// kind and queue, with asynq's pending tasks as its backlog; a damaged
// pending list and a relay kind this store does not serve are n/a with
// the reason.
func TestRelayStatusBacklog(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := relayBackend(t, srv)
	every, err := cron.Parse("@every 1h", nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []onetick.Job{
		{Name: "b", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "q1"}},
		{Name: "a", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "q1"}},
		{Name: "c", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq}},
		{Name: "d", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "bad"}},
		{Name: "r", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayRiver}},
		{Name: "plain", Schedule: every},
	}
	ops := &onetick.Ops{Backend: b, Jobs: jobs}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := ops.Trigger(ctx, "a", k, "", onetick.Actor{Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Client().Set(ctx, "asynq:{bad}:pending", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := onetick.ReadStatus(ctx, b, jobs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Relays) != 4 {
		t.Fatalf("relays %+v, want 4", st.Relays)
	}
	want := []struct {
		kind, queue, jobs string
		backlog           int64 // -1: n/a
		err               string
	}{
		{"asynq", "bad", "d", -1, "not a list"},
		{"asynq", "default", "c", 0, ""},
		{"asynq", "q1", "a,b", 3, ""},
		{"river", "default", "r", -1, "no backlog of a river relay"},
	}
	for i, w := range want {
		r := st.Relays[i]
		if r.Kind != w.kind || r.Queue != w.queue || strings.Join(r.Jobs, ",") != w.jobs {
			t.Errorf("relay %d: %+v, want %s %s %s", i, r, w.kind, w.queue, w.jobs)
		}
		switch {
		case w.backlog < 0 && (r.Backlog != nil || !strings.Contains(r.Error, w.err)):
			t.Errorf("relay %s/%s: backlog %v error %q, want n/a with %q", r.Kind, r.Queue, r.Backlog, r.Error, w.err)
		case w.backlog >= 0 && (r.Backlog == nil || *r.Backlog != w.backlog || r.Error != ""):
			t.Errorf("relay %s/%s: backlog %v error %q, want %d", r.Kind, r.Queue, r.Backlog, r.Error, w.backlog)
		}
	}
}
