package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
)

func TestRelayParsed(t *testing.T) {
	f, err := config.Parse("f.yaml", []byte(`jobs:
  - name: report
    schedule: '@hourly'
    relay:
      river: {queue: reports, kind: nightly_report, max_attempts: 5}
  - name: mail
    schedule: '@hourly'
    relay:
      asynq: {queue: mail, type: mail:send, max_retry: 2, retention: 48h}
  - name: bare
    schedule: '@hourly'
    relay: {river: {}}
  - name: plain
    schedule: '@hourly'
`))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	want := []*onetick.Relay{
		{Kind: onetick.RelayRiver, Queue: "reports", Type: "nightly_report", MaxAttempts: 5},
		{Kind: onetick.RelayAsynq, Queue: "mail", Type: "mail:send", MaxAttempts: 3, Retention: 48 * time.Hour},
		{Kind: onetick.RelayRiver},
		nil,
	}
	for i, w := range want {
		got := jobs[i].Relay
		if (got == nil) != (w == nil) || (got != nil && *got != *w) {
			t.Errorf("job %s: relay %+v, want %+v", jobs[i].Name, got, w)
		}
		if got != nil {
			if err := got.Validate(); err != nil {
				t.Errorf("job %s: %v", jobs[i].Name, err)
			}
		}
	}
}

// A job applied at run time (a stored definition) keeps its relay, and
// the definition is checked as a file's job is.
func TestRelayOfAppliedJob(t *testing.T) {
	base, err := config.Parse("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.ParseRequestJobs("body", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    relay: {river: {queue: q, max_attempts: 2}}\n  - name: b\n    schedule: '@hourly'\n"), base)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*onetick.Relay{{Kind: onetick.RelayRiver, Queue: "q", MaxAttempts: 2}, nil} {
		def, err := f.Jobs[i].JobDef()
		if err != nil {
			t.Fatal(err)
		}
		if want == nil && strings.Contains(string(def), "Relay") {
			t.Errorf("a job without a relay stores one: %s", def)
		}
		j, _, err := config.JobFromDef(def)
		if err != nil || (j.Relay == nil) != (want == nil) || (want != nil && *j.Relay != *want) {
			t.Errorf("%s: %+v, %v; want %+v", def, j.Relay, err, want)
		}
	}
	_, _, err = config.JobFromDef([]byte(`{"Name":"x","Schedule":"@hourly","Run":{"Command":{"Argv":["x"]}},"Relay":{"River":{}}}`))
	if err == nil || !strings.Contains(err.Error(), "jobs[0] (x).relay: is exclusive with run:") {
		t.Errorf("a stored definition with a run block and a relay: %v", err)
	}
	_, err = config.ParseRequestJobs("body", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    relay: {asynq: {retention: 10ms}}\n"), base)
	if err == nil || !strings.Contains(err.Error(), "body:4: jobs[0] (a).relay.asynq.retention: must be at least 1s") {
		t.Errorf("a request's bad relay: %v", err)
	}
}

// A NATS relay is read with its fields; its token comes from the
// environment, is not in the stored definition, and is the engine's
// RelayNATS (ticks to the stream).
func TestRelayNATSParsed(t *testing.T) {
	t.Setenv("ONETICK_TEST_NATS_TOKEN", "s3cr3t")
	f, err := config.Parse("f.yaml", []byte(`jobs:
  - name: pub
    schedule: '@hourly'
    prefer: duplicate
    relay:
      nats: {url: 'nats://a:4222,nats://b:4222', subject: ticks.pub, stream: TICKS, per_subject: true, token: '${ONETICK_TEST_NATS_TOKEN}'}
`))
	if err != nil {
		t.Fatal(err)
	}
	n := f.Jobs[0].Relay.NATS
	if n == nil || n.URL != "nats://a:4222,nats://b:4222" || n.Subject != "ticks.pub" || n.Stream != "TICKS" || !n.PerSubject || n.Token != "s3cr3t" {
		t.Fatalf("relay.nats %+v", n)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	if r := jobs[0].Relay; r == nil || r.Kind != onetick.RelayNATS || r.InClaim() {
		t.Fatalf("engine relay %+v, want nats, not in the claim", r)
	}
	def, err := f.Jobs[0].JobDef()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(def), "s3cr3t") {
		t.Fatalf("the stored definition holds the token: %s", def)
	}
}

// A jobs file (jobs apply, the API) cannot relay to NATS: no worker would
// publish its ticks.
func TestRelayNATSRefusedInAJobsFile(t *testing.T) {
	base, err := config.Parse("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = config.ParseRequestJobs("body", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {url: 'nats://h:4222', subject: t}\n"), base)
	if err == nil || !strings.Contains(err.Error(), "body:5: jobs[0] (a).relay.nats: is for jobs of the configuration file only") {
		t.Errorf("a request's nats relay: %v", err)
	}
}
