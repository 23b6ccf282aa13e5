package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// TestStatusRelays: `onetick status` prints, per relay the jobs use, the
// tasks waiting in its queue (read from a real Redis), n/a where the
// store cannot tell, and the same in its JSON.
func TestStatusRelays(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b, err := redis.Open(srv.URL(), redis.Options{Prefix: "statusrelay"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	every, err := cron.Parse("@every 1h", nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []onetick.Job{
		{Name: "report", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayAsynq, Queue: "st1"}},
		{Name: "export", Schedule: every, Relay: &onetick.Relay{Kind: onetick.RelayRiver, Queue: "st1"}},
		{Name: "plain", Schedule: every},
	}
	ops := &onetick.Ops{Backend: b, Jobs: jobs}
	for _, k := range []string{"k1", "k2"} {
		if _, err := ops.Trigger(ctx, "report", k, "", onetick.Actor{Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := onetick.ReadStatus(ctx, b, jobs, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printStatus(&out, st)
	for _, re := range []string{
		`(?m)^relays \(tasks waiting in the other queue\):$`,
		`(?m)^  RELAY +QUEUE +BACKLOG +JOBS$`,
		`(?m)^  asynq +st1 +2 +report$`,
		`(?m)^  river +st1 +n/a +export  \(redis: no backlog of a river relay .*\)$`,
	} {
		if !regexp.MustCompile(re).Match(out.Bytes()) {
			t.Errorf("status output lacks %s:\n%s", re, out.String())
		}
	}
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(statusWithRuns{Status: st}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Relays []struct {
			Kind, Queue string
			Jobs        []string
			Backlog     *int64
			Error       string
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Relays) != 2 || got.Relays[0].Backlog == nil || *got.Relays[0].Backlog != 2 ||
		got.Relays[1].Backlog != nil || got.Relays[1].Error == "" {
		t.Errorf("status JSON relays: %s", js.String())
	}
}
