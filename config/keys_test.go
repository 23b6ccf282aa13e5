package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// keySection is one section of the file, for the key lists' test.
type keySection struct {
	// path names the section as the documentation's example nests it:
	// "backend.redis", "jobs[]" for a job, "jobs[].run" for its run block.
	path string
	// keys is the list the section's walker passes to fields; nil where
	// the walker's list is not a variable (sentinel and cluster, in
	// topology.go): then only what the walker reports is compared.
	keys []string
	// typ is the struct the section is read into; nil: none.
	typ reflect.Type
	// probe is a document with an unknown key at KEY in the section, and
	// field the path its walker reports it under.
	probe, field string
}

// unknownKey is far from every key, so the walker lists them all.
const unknownKey = "zzzzzzzzzzzzzzzzzzzz"

var keySections = []keySection{
	{"", topKeys, reflect.TypeOf(File{}), "KEY: 1\n", "KEY"},
	{"backend", backendKeys, reflect.TypeOf(Backend{}), "backend:\n  KEY: 1\n", "backend.KEY"},
	{"backend.file", fileStoreKeys, reflect.TypeOf(FileStore{}), "backend:\n  file:\n    KEY: 1\n", "backend.file.KEY"},
	{"backend.memory", []string{}, nil, "backend:\n  memory:\n    KEY: 1\n", "backend.memory.KEY"},
	{"backend.redis", redisKeys, reflect.TypeOf(Redis{}), "backend:\n  redis:\n    url: redis://h:1\n    KEY: 1\n", "backend.redis.KEY"},
	{"backend.redis.tls", redisTLSKeys, reflect.TypeOf(TLS{}), "backend:\n  redis:\n    url: redis://h:1\n    tls:\n      KEY: 1\n", "backend.redis.tls.KEY"},
	{"backend.redis.sentinel", nil, reflect.TypeOf(Sentinel{}), "backend:\n  redis:\n    sentinel:\n      KEY: 1\n", "backend.redis.sentinel.KEY"},
	{"backend.redis.cluster", nil, reflect.TypeOf(Cluster{}), "backend:\n  redis:\n    cluster:\n      KEY: 1\n", "backend.redis.cluster.KEY"},
	{"backend.etcd", etcdKeys, reflect.TypeOf(Etcd{}), "backend:\n  etcd:\n    endpoints: [http://h:1]\n    KEY: 1\n", "backend.etcd.KEY"},
	{"backend.etcd.tls", redisTLSKeys, reflect.TypeOf(TLS{}), "backend:\n  etcd:\n    endpoints: [http://h:1]\n    tls:\n      KEY: 1\n", "backend.etcd.tls.KEY"},
	{"backend.postgres", postgresKeys, reflect.TypeOf(Postgres{}), "backend:\n  postgres:\n    KEY: 1\n", "backend.postgres.KEY"},
	{"lease", leaseKeys, reflect.TypeOf(Lease{}), "lease:\n  KEY: 1\n", "lease.KEY"},
	{"http", httpKeys, reflect.TypeOf(HTTP{}), "http:\n  KEY: 1\n", "http.KEY"},
	{"http.tls", httpTLSKeys, reflect.TypeOf(HTTPTLS{}), "http:\n  tls:\n    KEY: 1\n", "http.tls.KEY"},
	{"worker", workerKeys, reflect.TypeOf(Worker{}), "worker:\n  KEY: 1\n", "worker.KEY"},
	{"metrics", metricsKeys, reflect.TypeOf(Metrics{}), "metrics:\n  KEY: 1\n", "metrics.KEY"},
	{"ledger", ledgerKeys, reflect.TypeOf(Ledger{}), "ledger:\n  KEY: 1\n", "ledger.KEY"},
	{"deadlines", deadlinesKeys, reflect.TypeOf(Deadlines{}), "deadlines:\n  KEY: 1\n", "deadlines.KEY"},
	{"deadlines.notify", notifyKeys, reflect.TypeOf(DeadlineNotify{}), "deadlines:\n  notify:\n    KEY: 1\n", "deadlines.notify.KEY"},
	{"tracing", tracingKeys, reflect.TypeOf(Tracing{}), "tracing:\n  otlp_endpoint: http://h:4318\n  KEY: 1\n", "tracing.KEY"},
	{"relays", relaysKeys, reflect.TypeOf(Relays{}), "relays:\n  KEY: 1\n", "relays.KEY"},
	{"relays.nats.events", natsConnKeys, reflect.TypeOf(NATSConnection{}), "relays:\n  nats:\n    events:\n      KEY: 1\n", "relays.nats.events.KEY"},
	{"jobs[]", jobKeys[:], reflect.TypeOf(Job{}), "jobs:\n  - name: a\n    KEY: 1\n", "jobs[0] (a).KEY"},
	{"jobs[].run", runKeys, reflect.TypeOf(Run{}), "jobs:\n  - name: a\n    run:\n      KEY: 1\n", "jobs[0] (a).run.KEY"},
	{"jobs[].run.command", commandKeys, reflect.TypeOf(CommandRun{}), "jobs:\n  - name: a\n    run:\n      command:\n        KEY: 1\n", "jobs[0] (a).run.command.KEY"},
	{"jobs[].deadline", jobDeadlineKeys, reflect.TypeOf(JobDeadline{}), "jobs:\n  - name: a\n    deadline:\n      KEY: 1\n", "jobs[0] (a).deadline.KEY"},
	{"jobs[].relay", relayKeys, reflect.TypeOf(JobRelay{}), "jobs:\n  - name: a\n    relay:\n      KEY: 1\n", "jobs[0] (a).relay.KEY"},
	{"jobs[].relay.river", riverRelayKeys, reflect.TypeOf(RiverRelay{}), "jobs:\n  - name: a\n    relay:\n      river:\n        KEY: 1\n", "jobs[0] (a).relay.river.KEY"},
	{"jobs[].relay.nats", natsRelayKeys, reflect.TypeOf(NATSRelay{}), "jobs:\n  - name: a\n    relay:\n      nats:\n        KEY: 1\n", "jobs[0] (a).relay.nats.KEY"},
	{"jobs[].relay.asynq", asynqRelayKeys, reflect.TypeOf(AsynqRelay{}), "jobs:\n  - name: a\n    relay:\n      asynq:\n        KEY: 1\n", "jobs[0] (a).relay.asynq.KEY"},
	{"jobs[].run.http", httpRunKeys, reflect.TypeOf(HTTPRun{}), "jobs:\n  - name: a\n    run:\n      http:\n        KEY: 1\n", "jobs[0] (a).run.http.KEY"},
}

// walkerKeys returns the keys the walker of s lists when it meets an
// unknown key (what it accepts, in its order).
func walkerKeys(t *testing.T, s keySection, base *File) []string {
	t.Helper()
	doc := strings.ReplaceAll(s.probe, "KEY", unknownKey)
	field := strings.ReplaceAll(s.field, "KEY", unknownKey)
	_, err := parseWith("probe.yaml", []byte(doc), noEnv, base)
	var errs Errors
	if err != nil {
		errs = err.(Errors)
	}
	const prefix, suffix = "unknown field (expected one of: ", ")"
	for _, e := range errs {
		if e.Field == field {
			if !strings.HasPrefix(e.Msg, prefix) || !strings.HasSuffix(e.Msg, suffix) {
				t.Fatalf("%q: %s: want the list of keys, got %q", s.path, field, e.Msg)
			}
			list := strings.TrimSuffix(strings.TrimPrefix(e.Msg, prefix), suffix)
			if list == "" {
				return []string{}
			}
			return strings.Split(list, ", ")
		}
	}
	t.Fatalf("%q: no error at %s in %v", s.path, field, err)
	return nil
}

// tagKeys returns the yaml keys of the struct t (inline structs' keys
// included), failing on an exported field without an explicit key.
func tagKeys(t *testing.T, typ reflect.Type) []string {
	t.Helper()
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case opts == "inline":
			out = append(out, tagKeys(t, f.Type)...)
		case name == "":
			t.Errorf("%s.%s has no yaml key", typ.Name(), f.Name)
		default:
			out = append(out, name)
		}
	}
	return out
}

// exampleKeys returns, for each section of keySections that the YAML
// document holds, the keys written in it. A document that is a list is
// a list of jobs.
func exampleKeys(t *testing.T, name, doc string) map[string][]string {
	t.Helper()
	// ${VAR} set aside as the parser does ([${SECRET}] is a list).
	data, _ := markRefs([]byte(doc))
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, doc)
	}
	sections := map[string]bool{}
	within := map[string]bool{} // the mappings a section is in, walked through
	for _, s := range keySections {
		sections[s.path] = true
		for p := s.path; strings.Contains(p, "."); {
			p = p[:strings.LastIndexByte(p, '.')]
			within[p] = true
		}
	}
	out := map[string][]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n.Kind != yaml.MappingNode {
			return
		}
		keys := []string{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			keys = append(keys, k)
			child := join(path, k)
			switch {
			case child == "jobs" && v.Kind == yaml.SequenceNode:
				for _, item := range v.Content {
					walk(item, "jobs[]")
				}
			case sections[child] || within[child]:
				walk(v, child)
			}
		}
		if sections[path] || path == "" {
			out[path] = append(out[path], keys...)
		}
	}
	if len(root.Content) == 0 {
		return out
	}
	if top := root.Content[0]; top.Kind == yaml.SequenceNode {
		walk(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "jobs"}, top}}, "")
		delete(out, "")
	} else {
		walk(top, "")
	}
	return out
}

// docExample is the example of the Format section of doc.go, the complete
// reference of the keys.
func docExample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n// # Format\n//\n")
	if !ok {
		t.Fatal("doc.go has no # Format section")
	}
	var b strings.Builder
	for _, l := range strings.Split(rest, "\n") {
		y, ok := strings.CutPrefix(l, "//\t")
		if !ok {
			break
		}
		b.WriteString(y + "\n")
	}
	return b.String()
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestKeyLists checks, for every section, that the keys its walker accepts
// are the keys of its struct's yaml tags and the keys doc.go's example
// documents.
func TestKeyLists(t *testing.T) {
	documented := exampleKeys(t, "doc.go", docExample(t))
	for _, s := range keySections {
		accepted := walkerKeys(t, s, nil)
		if s.keys != nil && !slices.Equal(accepted, s.keys) {
			t.Errorf("%q: the walker lists %q, its key list is %q", s.path, accepted, s.keys)
		}
		if s.typ != nil {
			if tags := tagKeys(t, s.typ); !slices.Equal(sorted(tags), sorted(accepted)) {
				t.Errorf("%q: the walker accepts %q, the yaml tags of %s are %q", s.path, accepted, s.typ.Name(), tags)
			}
		}
		doc, ok := documented[s.path]
		if !ok {
			t.Errorf("%q: not in doc.go's example", s.path)
			continue
		}
		if !slices.Equal(sorted(doc), sorted(accepted)) {
			t.Errorf("%q: the walker accepts %q, doc.go documents %q", s.path, accepted, doc)
		}
	}
	// A jobs file holds only jobs.
	base, err := parse("base.yaml", nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := walkerKeys(t, keySection{path: "jobs file", probe: "KEY: 1\n", field: "KEY"}, base); !slices.Equal(got, jobsFileKeys) {
		t.Errorf("a jobs file: the walker lists %q, its key list is %q", got, jobsFileKeys)
	}
}

// TestKeyListsInMessages checks that the messages naming every key of a
// section name them all.
func TestKeyListsInMessages(t *testing.T) {
	for _, c := range []struct {
		doc  string
		keys []string
	}{
		{"[]\n", topKeys},
		{"backend: {memory: {}, file: {}}\n", backendKeys},
	} {
		_, err := parse("t.yaml", []byte(c.doc), noEnv)
		if err == nil {
			t.Fatalf("%q: no error", c.doc)
		}
		msg := err.Error()
		for _, k := range c.keys {
			if !regexp.MustCompile(`\b` + k + `\b`).MatchString(msg) {
				t.Errorf("%q: %q does not name %s", c.doc, msg, k)
			}
		}
	}
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestREADMEKeys checks that every key the README's YAML examples write in
// a section is one its walker accepts.
func TestREADMEKeys(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlock.FindAllStringSubmatch(string(data), -1)
	if len(blocks) == 0 {
		t.Fatal("no YAML example in README.md")
	}
	accepted := map[string][]string{}
	for _, s := range keySections {
		accepted[s.path] = walkerKeys(t, s, nil)
	}
	seen := 0
	for i, b := range blocks {
		for path, keys := range exampleKeys(t, fmt.Sprintf("README.md example %d", i+1), b[1]) {
			for _, k := range keys {
				seen++
				if !slices.Contains(accepted[path], k) {
					t.Errorf("README.md example %d: %s is not a key the file accepts (%q)", i+1, join(path, k), accepted[path])
				}
			}
		}
	}
	if seen < 50 {
		t.Errorf("read only %d keys from README.md's examples", seen)
	}
}

// TestExampleKeysOfNamedConnections: an example's connections, whatever
// their names, are not keys of relays.nats for the README's check.
func TestExampleKeysOfNamedConnections(t *testing.T) {
	got := exampleKeys(t, "example", "relays:\n  nats:\n    prod: {url: 'nats://h:1', stream: S}\njobs:\n  - {name: a, relay: {nats: {connection: prod, subject: s}}}\n")
	if _, ok := got["relays.nats"]; ok || !slices.Equal(got["relays"], []string{"nats"}) || !slices.Equal(got["jobs[].relay.nats"], []string{"connection", "subject"}) {
		t.Errorf("example keys %v", got)
	}
}
