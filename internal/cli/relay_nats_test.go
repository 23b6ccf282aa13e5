package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/relay/natsrelay"
	"github.com/onetick/onetick/sqlite"
	"github.com/onetick/onetick/worker"
)

// TestRelayNATSDaemon: `onetick run` with a job relayed to NATS claims its
// ticks into the stream, and its worker's relay consumer publishes them to
// JetStream (the machine's nats-server), each tick with its id as Msg-Id.
func TestRelayNATSDaemon(t *testing.T) {
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := time.Now().UnixNano()
	name, subject := fmt.Sprintf("OT_cli_%d", n), fmt.Sprintf("otcli%d", n)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("deleting stream %s: %v", name, err)
		}
	})
	startDaemon(t, writeConfig(t, fmt.Sprintf(`http:
  listen: 127.0.0.1:0
jobs:
  - name: pub
    schedule: "@every 1s"
    prefer: duplicate
    relay:
      nats: {url: "nats://127.0.0.1:4222", subject: %s, stream: %s}
`, subject, name)))
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("waiting for a published tick: %v", err)
		}
		id := m.Headers().Get(jetstream.MsgIDHeader)
		var body natsrelay.Message
		if err := json.Unmarshal(m.Data(), &body); err != nil || body.Tick != id || body.Job != "pub" || !strings.HasPrefix(id, "pub:") {
			t.Fatalf("message %s %q: %+v, %v", id, m.Data(), body, err)
		}
		if seen[id] {
			t.Fatalf("tick %s published twice", id)
		}
		seen[id] = true
	}
}

// relayToken is the test connection's token: a secret that must show
// nowhere (the machine's nats-server has no authorization configured and
// ignores it).
const relayToken = "s3cr3t-relay-token-4711"

// TestRelayNATSAppliedJobs: jobs applied at run time, with `jobs apply`
// and through the HTTP API, after the daemon started, name a connection
// of the configuration file (relays.nats), and the worker's relay
// consumer publishes each of their slots to JetStream (the machine's
// nats-server) once, with the tick id as Msg-Id and the definition's
// version. A job naming a connection the file does not define, or giving
// an address, is refused at its line (exit 2, HTTP 400) and nothing is
// applied. The connection's address and token are in no stored
// definition, log line, API answer or status.
func TestRelayNATSAppliedJobs(t *testing.T) {
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := time.Now().UnixNano()
	name, subject := fmt.Sprintf("OT_apply_%d", n), fmt.Sprintf("otapply%d", n)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject + ".>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("deleting stream %s: %v", name, err)
		}
	})
	dir := t.TempDir()
	db := filepath.Join(dir, "onetick.db")
	cfg := writeConfig(t, fmt.Sprintf(`backend:
  file: {path: %s}
http:
  listen: 127.0.0.1:0
  token: %s
relays:
  nats:
    events: {url: "nats://127.0.0.1:4222", stream: %s, token: %s, subjects: [">"]}
jobs:
  - {name: base, schedule: "@every 1h"}
`, db, daemonToken, name, relayToken))
	d := startRun(t, "run", "--config", cfg, "--log-format", "json", "--replica", "t")

	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(ctx, append(args, "--config", cfg), Env{Stdout: &out, Stderr: &errOut})
		return code, out.String(), errOut.String()
	}
	file := func(body string) string {
		p := filepath.Join(dir, "set.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	put := func(body string) (int, string) {
		return d.call(t, "PUT", "/api/v1/jobsets/api", "", "Bearer "+daemonToken, strings.NewReader(body))
	}

	// Refused: an unknown connection, an address, no connection.
	for _, c := range []struct{ body, want string }{
		{"jobs:\n  - name: x\n    schedule: '@every 1s'\n    relay:\n      nats: {connection: elsewhere, subject: " + subject + ".x}\n",
			`:5: jobs[0] (x).relay.nats.connection: unknown connection "elsewhere": the configuration file ` + cfg + ` defines relays.nats events`},
		{"jobs:\n  - name: x\n    schedule: '@every 1s'\n    relay:\n      nats:\n        connection: events\n        subject: " + subject + ".x\n        url: nats://evil:4222\n",
			`:8: jobs[0] (x).relay.nats.url: is for jobs of the configuration file only`},
		{"jobs:\n  - name: x\n    schedule: '@every 1s'\n    relay:\n      nats: {subject: " + subject + ".x}\n",
			`:5: jobs[0] (x).relay.nats.connection: is required`},
	} {
		code, out, stderr := cli("jobs", "apply", "--set", "cli", "-f", file(c.body))
		if code != 2 || out != "" || !strings.Contains(stderr, "set.yaml"+c.want) {
			t.Errorf("jobs apply of %q: exit %d %q %q, want 2 and %s", c.body, code, out, stderr, c.want)
		}
		code, body := put(c.body)
		if code != 400 || !strings.Contains(body, jsonEscaped("request body"+c.want)) {
			t.Errorf("PUT of %q: %d %s, want 400 and %s", c.body, code, body, c.want)
		}
	}
	if got := strings.Join(d.jobNames(t), ","); got != "base" {
		t.Fatalf("after the refused sets the jobs are %s, want base", got)
	}

	// Applied after the daemon started: one set with the CLI, one with the API.
	job := func(name string) string {
		return fmt.Sprintf("jobs:\n  - name: %s\n    schedule: '@every 1s'\n    prefer: duplicate\n    relay: {nats: {connection: events, subject: %s.%s}}\n", name, subject, name)
	}
	if code, out, stderr := cli("jobs", "apply", "--set", "cli", "-f", file(job("by-cli"))); code != 0 || !strings.Contains(out, "1 added") {
		t.Fatalf("jobs apply: %d %q %q", code, out, stderr)
	}
	if code, body := put(job("by-api")); code != 200 || !strings.Contains(body, `"added":["by-api"]`) {
		t.Fatalf("PUT: %d %s", code, body)
	}

	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	slots := map[string][]int64{}
	// Every slot between a job's first and last published, once each: at
	// least three a job (publishes may land out of slot order).
	complete := func() bool {
		for _, j := range []string{"by-cli", "by-api"} {
			s := slots[j]
			if len(s) < 3 || int64(len(s)) != (slices.Max(s)-slices.Min(s))/1000+1 {
				return false
			}
		}
		return true
	}
	for !complete() {
		m, err := cons.Next(jetstream.FetchMaxWait(60 * time.Second))
		if err != nil {
			t.Fatalf("waiting for published ticks (have %v): %v\n%s", slots, err, d.logs.text())
		}
		id := m.Headers().Get(jetstream.MsgIDHeader)
		var body natsrelay.Message
		if err := json.Unmarshal(m.Data(), &body); err != nil || body.Tick != id || id != fmt.Sprintf("%s:%d", body.Job, body.Slot) ||
			m.Subject() != subject+"."+body.Job || body.Version == "" || body.Slot%1000 != 0 {
			t.Fatalf("message %s on %s %q: %+v, %v", id, m.Subject(), m.Data(), body, err)
		}
		if seen[id] {
			t.Fatalf("tick %s published twice", id)
		}
		seen[id] = true
		slots[body.Job] = append(slots[body.Job], body.Slot)
	}

	// No trace of the connection's address or token.
	code, jobsOut, _ := cli("jobs", "--json")
	_, statusOut, _ := cli("status", "--json")
	_, apiJobs := d.call(t, "GET", "/api/v1/jobs", "", "", nil)
	_, apiStatus := d.call(t, "GET", "/status", "", "", nil)
	if code != 0 || !strings.Contains(jobsOut, "by-cli") || !strings.Contains(statusOut, `"kind": "nats"`) {
		t.Fatalf("jobs --json (%d): %s\nstatus --json: %s", code, jobsOut, statusOut)
	}
	for what, text := range map[string]string{"jobs --json": jobsOut, "status --json": statusOut, "GET /api/v1/jobs": apiJobs,
		"GET /status": apiStatus, "the log": d.logs.text()} {
		if strings.Contains(text, relayToken) || strings.Contains(text, "127.0.0.1:4222") {
			t.Errorf("%s shows the connection's token or address:\n%s", what, text)
		}
	}
	b, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stored, _, err := b.StoredJobs(ctx)
	if err != nil || len(stored) != 2 {
		t.Fatalf("stored jobs %v, %v", stored, err)
	}
	for _, sj := range stored {
		if !strings.Contains(string(sj.Def), `"Connection":"events"`) || strings.Contains(string(sj.Def), relayToken) ||
			strings.Contains(string(sj.Def), "4222") {
			t.Errorf("stored definition %s", sj.Def)
		}
	}
}

// jsonEscaped is s as it appears inside a JSON string.
func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// TestRelayNATSRunTimeNeedsTheConnection: a worker registers the relay
// consumer of a job applied at run time only on a connection its own
// configuration file defines; a definition naming another, or none, is
// refused with the reason in the log, once, naming no address.
func TestRelayNATSRunTimeNeedsTheConnection(t *testing.T) {
	ctx := context.Background()
	b := memory.New(memory.Options{})
	defer b.Close()
	f, err := config.Parse("worker.yaml", []byte("relays:\n  nats:\n    events: {url: 'nats://127.0.0.1:4222', token: "+relayToken+", subjects: ['t.*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := config.Parse("other.yaml", []byte("relays:\n  nats:\n    audit: {url: 'nats://127.0.0.1:4222', subjects: ['t.*']}\n    events: {url: 'nats://127.0.0.1:4222', subjects: ['t.*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Applied by a replica whose file defines audit too.
	set, err := config.ParseJobs("set.yaml", []byte("jobs:\n  - {name: ok, schedule: '@every 1h', relay: {nats: {connection: events, subject: t.ok}}}\n"+
		"  - {name: elsewhere, schedule: '@every 1h', relay: {nats: {connection: audit, subject: t.e}}}\n"), other)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := jobDefs(set, nil, config.Allow{})
	if err != nil {
		t.Fatal(err)
	}
	// And a definition without a connection, as no apply writes it.
	defs = append(defs, onetick.StoredJob{Name: "bare", Def: []byte(`{"Name":"bare","Schedule":"@every 1h","Relay":{"NATS":{"URL":"nats://evil:4222","Subject":"t.b"}}}`)})
	if _, err := b.ApplyJobs(ctx, "s", defs, false); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	w, err := worker.New(worker.Config{Store: b.WorkerStore("g"), Consumer: "c", Logger: log, Registerer: prometheus.NewRegistry(), Dynamic: true})
	if err != nil {
		t.Fatal(err)
	}
	relays := newNATSRelays(f, prometheus.NewRegistry())
	defer relays.close()
	rt := newRuntimeRuns(f, b, w, relays, log)
	for range 2 {
		if err := rt.refresh(ctx); err != nil {
			t.Fatal(err)
		}
		rt.mu.Lock()
		rt.read = false // read the definitions again: a refusal is logged once
		rt.mu.Unlock()
	}
	if got := rt.versions(); len(got) != 1 || len(got["ok"]) != 1 {
		t.Fatalf("registered %v, want ok alone", got)
	}
	text := logs.String()
	for _, want := range []string{`"job":"elsewhere","reason":"relay.nats: unknown connection \"audit\": worker.yaml defines relays.nats events"`,
		`"job":"bare","reason":"job \"bare\": relay.nats names no connection`} {
		if strings.Count(text, want) != 1 {
			t.Errorf("the log holds %q %d times, want once:\n%s", want, strings.Count(text, want), text)
		}
	}
	if strings.Contains(text, relayToken) || strings.Contains(text, "evil") {
		t.Errorf("the log shows an address or a token:\n%s", text)
	}
}
