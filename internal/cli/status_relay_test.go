package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/cron"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/postgres"
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

// TestStatusRelaysCommand: `onetick status --config FILE` on Redis shows
// the relays of the file's jobs with asynq's pending tasks, n/a with the
// reason for a damaged pending list, and the same under --json.
func TestStatusRelaysCommand(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onetick.yaml")
	cfg := fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: strelay
jobs:
  - {name: report, schedule: "@every 1h", relay: {asynq: {queue: st1}}}
  - {name: audit, schedule: "@every 1h", relay: {asynq: {queue: st1}}}
  - {name: export, schedule: "@every 1h", relay: {asynq: {queue: st2}}}
  - {name: broken, schedule: "@every 1h", relay: {asynq: {queue: st3}}}
  - {name: plain, schedule: "@every 1h"}
`, srv.URL())
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	b, err := redis.Open(srv.URL(), redis.Options{Prefix: "strelay"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ops := &onetick.Ops{Backend: b, Jobs: jobs}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := ops.Trigger(ctx, "report", k, "", onetick.Actor{Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Client().Set(ctx, "asynq:{st3}:pending", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(ctx, args, Env{Stdout: &out, Stderr: &errOut}); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out.String(), errOut.String())
		}
		return out.String()
	}
	out := run("status", "--config", path)
	for _, re := range []string{
		`(?m)^  asynq +st1 +3 +audit,report$`,
		`(?m)^  asynq +st2 +0 +export$`,
		`(?m)^  asynq +st3 +n/a +broken  \(redis: asynq:\{st3\}:pending is not a list .*\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status output lacks %s:\n%s", re, out)
		}
	}
	var st struct {
		Relays []onetick.RelayStatus `json:"relays"`
	}
	if err := json.Unmarshal([]byte(run("status", "--config", path, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Relays) != 3 || st.Relays[0].Backlog == nil || *st.Relays[0].Backlog != 3 ||
		st.Relays[2].Backlog != nil || st.Relays[2].Error == "" {
		t.Errorf("status --json relays: %+v", st.Relays)
	}
}

// TestStatusRelaysRiverAndNATS: on PostgreSQL with River's tables in
// their schema, `onetick status --config FILE` shows River's backlog (the
// queue's jobs not yet worked: two triggers no River client took), and a
// NATS relay's ticks claimed and not yet published (from the run
// ledger); --json the same.
func TestStatusRelaysRiverAndNATS(t *testing.T) {
	ctx := context.Background()
	schema, rs := pgtest.Schema(t), pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), "onetick.yaml")
	cfg := fmt.Sprintf(`backend:
  postgres: {url: %q, schema: %s, river_schema: %s}
relays:
  nats:
    events: {url: "nats://127.0.0.1:4222"}
jobs:
  - {name: report, schedule: "@every 1h", relay: {river: {queue: st1}}}
  - {name: audit, schedule: "@every 1h", relay: {river: {queue: st1, kind: audit_kind}}}
  - {name: mail, schedule: "@every 1h", relay: {nats: {connection: events, subject: ticks.mail}}}
`, pgtest.URL(), schema, rs)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	b, err := postgres.Open(ctx, pgtest.URL(), f.PostgresOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool().Exec(ctx, "CREATE SCHEMA "+rs); err != nil {
		t.Fatal(err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(b.Pool()), &rivermigrate.Config{Schema: rs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	ops := &onetick.Ops{Backend: b, Jobs: jobs}
	for _, k := range []string{"k1", "k2"} {
		if _, err := ops.Trigger(ctx, "report", k, "", onetick.Actor{Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	// Three ticks of the NATS job claimed into its stream, no worker to
	// publish them: its backlog, from the run ledger.
	for _, k := range []string{"m1", "m2", "m3"} {
		if _, err := ops.Trigger(ctx, "mail", k, "", onetick.Actor{Who: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(ctx, args, Env{Stdout: &out, Stderr: &errOut}); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out.String(), errOut.String())
		}
		return out.String()
	}
	out := run("status", "--config", path)
	for _, re := range []string{
		`(?m)^  nats +events +3 +mail  \(claimed, not yet published to JetStream .*\)$`,
		`(?m)^  river +st1 +2 +audit,report$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status output lacks %s:\n%s", re, out)
		}
	}
	var st struct {
		Relays []onetick.RelayStatus `json:"relays"`
	}
	if err := json.Unmarshal([]byte(run("status", "--config", path, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Relays) != 2 || st.Relays[0].Kind != "nats" || st.Relays[0].Backlog == nil || *st.Relays[0].Backlog != 3 || st.Relays[0].Note == "" ||
		st.Relays[1].Backlog == nil || *st.Relays[1].Backlog != 2 || st.Relays[1].Error != "" {
		t.Errorf("status --json relays: %+v", st.Relays)
	}
}
