package onetick_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// A NATS relay's backlog is its jobs' ticks claimed and not yet published
// (the ledger's enqueued records); with more jobs than
// MaxNATSBacklogJobs it is not counted (n/a, with the reason).
func TestNATSRelayBacklog(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Options{})
	every, err := cron.Parse("@every 1h", nil)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []onetick.Job
	for i := range onetick.MaxNATSBacklogJobs + 3 {
		q := "few"
		if i >= 2 {
			q = "many"
		}
		jobs = append(jobs, onetick.Job{Name: fmt.Sprintf("j%02d", i), Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayNATS, Queue: q}})
	}
	ops := &onetick.Ops{Backend: mem, Jobs: jobs}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := ops.Trigger(ctx, "j01", k, "", onetick.Actor{Who: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	rs := onetick.ReadRelays(ctx, mem, jobs)
	if len(rs) != 2 || rs[0].Queue != "few" || rs[1].Queue != "many" {
		t.Fatalf("relays %+v", rs)
	}
	if b := rs[0].Backlog; b == nil || *b != 3 || !strings.Contains(rs[0].Note, "not yet published") {
		t.Errorf("the two-job relay: %+v, want backlog 3", rs[0])
	}
	if rs[1].Backlog != nil || !strings.Contains(rs[1].Note, "not counted: 51 jobs") {
		t.Errorf("the 51-job relay: %+v, want n/a, not counted", rs[1])
	}
}
