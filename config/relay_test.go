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

// The configuration file names NATS connections (relays.nats); its jobs
// may name one or give the address inline, and the consumer's publishing
// is the connection's address, credentials and stream with the job's
// subject. Secrets stay out of every message.
func TestRelayNATSConnections(t *testing.T) {
	t.Setenv("ONETICK_TEST_NATS_TOKEN", "s3cr3t-conn")
	f, err := config.Parse("f.yaml", []byte(`relays:
  nats:
    events: {url: 'nats://a:4222', stream: TICKS, per_subject: true, token: '${ONETICK_TEST_NATS_TOKEN}'}
    audit: {url: 'tls://b:4222', creds: /etc/nats/a.creds}
jobs:
  - name: pub
    schedule: '@hourly'
    relay: {nats: {connection: events, subject: ticks.pub}}
  - name: inline
    schedule: '@hourly'
    relay: {nats: {url: 'nats://c:4222', subject: ticks.inline}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Relays.NATS["events"]; c == nil || c.URL != "nats://a:4222" || c.Stream != "TICKS" || !c.PerSubject || c.Token != "s3cr3t-conn" {
		t.Fatalf("relays.nats.events: %+v", c)
	}
	got, err := f.NATSPublish(f.Jobs[0].Relay.NATS)
	want := config.NATSRelay{Connection: "events", URL: "nats://a:4222", Subject: "ticks.pub", Stream: "TICKS", PerSubject: true, Token: "s3cr3t-conn"}
	if err != nil || got != want {
		t.Errorf("publishing of a job naming a connection: %+v, %v; want %+v", got, err, want)
	}
	if got, err := f.NATSPublish(f.Jobs[1].Relay.NATS); err != nil || got != *f.Jobs[1].Relay.NATS {
		t.Errorf("publishing of an inline relay: %+v, %v", got, err)
	}
	if _, err := f.NATSPublish(&config.NATSRelay{Connection: "gone", Subject: "x"}); err == nil ||
		err.Error() != `unknown connection "gone": f.yaml defines relays.nats audit, events` {
		t.Errorf("an unknown connection at run time: %v", err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	if r := jobs[0].Relay; r == nil || r.Kind != onetick.RelayNATS || r.Queue != "events" {
		t.Errorf("engine relay %+v, want nats with the connection as its queue", r)
	}
	if r := jobs[1].Relay; r == nil || r.Kind != onetick.RelayNATS || r.Queue != "ticks.inline" {
		t.Errorf("engine relay %+v, want nats with an inline relay's subject as its queue", r)
	}

	for _, c := range []struct{ doc, want string }{
		{"jobs:\n  - name: a\n    schedule: '@hourly'\n    relay: {nats: {connection: nope, subject: s}}\n",
			`f.yaml:4: jobs[0] (a).relay.nats.connection: unknown connection "nope": this file defines no relays.nats connection`},
		{"relays:\n  nats:\n    ev: {url: 'nats://h:1'}\njobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats:\n        connection: ev\n        subject: s\n        url: 'nats://i:1'\n",
			`f.yaml:11: jobs[0] (a).relay.nats.url: is the connection's (relays.nats.ev): give connection or url, not both`},
		{"relays:\n  nats:\n    ev: {stream: S}\n", `f.yaml:3: relays.nats.ev.url: is required`},
		{"relays:\n  nats:\n    ev:\n      url: 'http://u:s3cr3t-pw@h:1'\n", `f.yaml:4: relays.nats.ev.url: "http://u:xxxxx@h:1": must start with nats://`},
		{"relays:\n  nats:\n    'a b': {url: 'nats://h:1'}\n", `f.yaml:3: relays.nats."a b": is not a connection name`},
		{"relays:\n  nats:\n    ev: {url: 'nats://h:1', token: t0k3n-s3cr3t, creds: /c}\n", `f.yaml:3: relays.nats.ev.creds: and token both authenticate: give one`},
		{"relays:\n  nats:\n    ev: {url: 'nats://h:1', colour: red}\n", `f.yaml:3: relays.nats.ev.colour: unknown field`},
		{"relays:\n  kafka: {}\n", `f.yaml:2: relays.kafka: unknown field`},
	} {
		_, err := config.Parse("f.yaml", []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.doc, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "t0k3n")) {
			t.Errorf("%q: a secret in the message: %v", c.doc, err)
		}
	}
}

// A jobs file (jobs apply, the API) relays to NATS through a connection
// the configuration file defines, and only so: it never gives an address
// or a credential, and a connection the file does not define is refused
// at its line. Its stored definition holds the connection's name and the
// subject, nothing of the connection.
func TestRelayNATSInAJobsFile(t *testing.T) {
	t.Setenv("ONETICK_TEST_NATS_TOKEN", "s3cr3t-conn")
	base, err := config.Parse("base.yaml", []byte("relays:\n  nats:\n    events: {url: 'nats://user:pw-s3cr3t@a:4222', stream: TICKS, token: '${ONETICK_TEST_NATS_TOKEN}', subjects: ['ticks.>', t]}\n    audit: {url: 'nats://b:4222', creds: /etc/nats/audit.creds, subjects: ['ticks.*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.ParseRequestJobs("body", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    prefer: duplicate\n    relay: {nats: {connection: events, subject: ticks.a}}\n  - name: b\n    schedule: '@hourly'\n    relay: {nats: {connection: audit, subject: ticks.b}}\n"), base)
	if err != nil {
		t.Fatal(err)
	}
	for i, conn := range []string{"events", "audit"} {
		def, err := f.Jobs[i].JobDef()
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"s3cr3t", "nats://", "a:4222", "b:4222", "TICKS", "creds", "Token", "user"} {
			if strings.Contains(string(def), secret) {
				t.Errorf("the stored definition holds %q: %s", secret, def)
			}
		}
		oj, cj, err := config.JobFromDef(def)
		if err != nil {
			t.Fatal(err)
		}
		if n := cj.Relay.NATS; n == nil || n.Connection != conn || n.URL != "" {
			t.Errorf("%s: relay read back %+v", def, cj.Relay.NATS)
		}
		if oj.Relay == nil || oj.Relay.Kind != onetick.RelayNATS || oj.Version != config.DefVersion(def) {
			t.Errorf("%s: engine job %+v: want a nats relay and the definition's version (ticks say which definition)", def, oj)
		}
		p, err := base.NATSPublish(cj.Relay.NATS)
		if err != nil || p.URL != base.Relays.NATS[conn].URL || p.Subject != cj.Relay.NATS.Subject {
			t.Errorf("%s: resolved %v", conn, err)
		}
	}
	for _, c := range []struct{ body, want string }{
		{"jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {connection: nope, subject: t}\n",
			`body:5: jobs[0] (a).relay.nats.connection: unknown connection "nope": the configuration file base.yaml defines relays.nats audit, events`},
		{"jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {subject: t}\n",
			`body:5: jobs[0] (a).relay.nats.connection: is required: a job applied at run time names a connection the configuration file defines (the configuration file base.yaml defines relays.nats audit, events)`},
		{"jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats:\n        connection: events\n        subject: t\n        url: 'nats://evil:4222'\n",
			`body:8: jobs[0] (a).relay.nats.url: is for jobs of the configuration file only`},
		{"jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats:\n        connection: events\n        subject: t\n        creds: /etc/passwd\n",
			`body:8: jobs[0] (a).relay.nats.creds: is for jobs of the configuration file only`},
		{"jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {connection: events, subject: 'a.*'}\n",
			`body:5: jobs[0] (a).relay.nats.subject: "a.*" is not a subject to publish to`},
	} {
		_, err := config.ParseRequestJobs("body", []byte(c.body), base)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.body, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "pw-")) {
			t.Errorf("a secret in the message: %v", err)
		}
	}
}

// A NATS relay's subject may not be one of NATS's own APIs ($JS.API...,
// $SYS..., $KV...: subjects starting with $): a job applied at run time
// would otherwise drive JetStream's API with the operator's credentials
// (a publish to $JS.API.STREAM.PURGE.<name> purges that stream, whatever
// the connection's stream), and no tick belongs there.
func TestRelayNATSSubjectNotASystemSubject(t *testing.T) {
	base, err := config.Parse("base.yaml", []byte("relays:\n  nats:\n    events: {url: 'nats://a:4222', stream: TICKS, subjects: ['>']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"$JS.API.STREAM.PURGE.ORDERS", "$SYS.REQ.SERVER.PING", "$KV.config.key", "$x"} {
		body := "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {connection: events, subject: '" + subject + "'}\n"
		want := `body:5: jobs[0] (a).relay.nats.subject: "` + subject + `" is not a subject to publish to`
		if _, err := config.ParseRequestJobs("body", []byte(body), base); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a run-time job's subject %s:\n got %v\nwant %s", subject, err, want)
		}
		doc := "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {url: 'nats://a:4222', subject: '" + subject + "'}\n"
		want = `f.yaml:5: jobs[0] (a).relay.nats.subject: "` + subject + `" is not a subject to publish to`
		if _, err := config.Parse("f.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a file's job's subject %s:\n got %v\nwant %s", subject, err, want)
		}
	}
	if _, err := config.ParseRequestJobs("body", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {connection: events, subject: 'ticks.a$b'}\n"), base); err != nil {
		t.Errorf("a subject with a $ inside: %v", err)
	}
}

// A connection's subjects bound what its jobs may publish to: a job
// applied at run time is refused on a connection that lists none, and
// every job naming a connection that lists some must match one (NATS
// wildcards; with per_subject, the subjects <subject>.<job>.<slot>). The
// worker checks again (NATSPublish).
func TestRelayNATSSubjectsAllowList(t *testing.T) {
	base, err := config.Parse("base.yaml", []byte(`relays:
  nats:
    open: {url: 'nats://a:4222'}
    ticks: {url: 'nats://a:4222', subjects: ['ticks.*', 'reports.>']}
    each: {url: 'nats://a:4222', per_subject: true, subjects: ['ticks.*.*.*']}
`))
	if err != nil {
		t.Fatal(err)
	}
	job := func(conn, subject string) string {
		return "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay: {nats: {connection: " + conn + ", subject: '" + subject + "'}}\n"
	}
	for _, c := range []struct{ conn, subject, want string }{
		{"ticks", "ticks.a", ""},
		{"ticks", "reports.x.y", ""},
		{"each", "ticks.a", ""},
		{"ticks", "ticks.a.b", `body:4: jobs[0] (a).relay.nats.subject: "ticks.a.b" is not among the subjects connection "ticks" allows (ticks.*, reports.>)`},
		{"ticks", "reports", `is not among the subjects connection "ticks" allows`},
		{"ticks", "orders.delete", `is not among the subjects connection "ticks" allows`},
		{"each", "ticks.a.b", `is not among the subjects connection "each" allows`},
		{"open", "ticks.a", `body:4: jobs[0] (a).relay.nats.subject: connection "open" lists no subjects that jobs applied at run time may publish to (relays.nats.open.subjects in the configuration file base.yaml)`},
	} {
		_, err := config.ParseRequestJobs("body", []byte(job(c.conn, c.subject)), base)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s on %s: %v", c.subject, c.conn, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s on %s: %v, want %s", c.subject, c.conn, err, c.want)
		}
	}
	// The file's own jobs: free on a connection without subjects, bound
	// on one with them.
	if _, err := config.Parse("f.yaml", []byte(`relays:
  nats:
    open: {url: 'nats://a:4222'}
jobs:
  - {name: a, schedule: '@hourly', relay: {nats: {connection: open, subject: anything.at.all}}}
`)); err != nil {
		t.Errorf("a file's job on a connection without subjects: %v", err)
	}
	_, err = config.Parse("f.yaml", []byte(`relays:
  nats:
    ticks: {url: 'nats://a:4222', subjects: ['ticks.*']}
jobs:
  - {name: a, schedule: '@hourly', relay: {nats: {connection: ticks, subject: orders.delete}}}
`))
	if err == nil || !strings.Contains(err.Error(), `f.yaml:5: jobs[0] (a).relay.nats.subject: "orders.delete" is not among the subjects connection "ticks" allows`) {
		t.Errorf("a file's job outside its connection's subjects: %v", err)
	}
	_, err = config.Parse("f.yaml", []byte("relays:\n  nats:\n    x: {url: 'nats://a:4222', subjects: ['a.>.b', '$JS.>']}\n"))
	if err == nil || !strings.Contains(err.Error(), `relays.nats.x.subjects[0]: "a.>.b" is not a subject pattern`) ||
		!strings.Contains(err.Error(), `relays.nats.x.subjects[1]: "$JS.>" is not a subject pattern`) {
		t.Errorf("bad patterns: %v", err)
	}
	// The worker's own check, with a file whose connection changed since
	// the job was applied.
	worker, err := config.Parse("worker.yaml", []byte("relays:\n  nats:\n    ticks: {url: 'nats://a:4222', subjects: ['other.*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worker.NATSPublish(&config.NATSRelay{Connection: "ticks", Subject: "ticks.a"}); err == nil ||
		!strings.Contains(err.Error(), `subject "ticks.a" is not among the subjects connection "ticks" allows (other.*)`) {
		t.Errorf("the worker's check: %v", err)
	}
}
