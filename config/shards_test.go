package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/onetick/onetick"
	otredis "github.com/onetick/onetick/redis"
)

func TestShards(t *testing.T) {
	const redis = "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n"
	for _, c := range []struct {
		name, doc string
		want      int
	}{
		{"default", redis, 1},
		{"null", redis + "shards:\n", 1},
		{"one on the file store", "shards: 1\n", 1},
		{"one on an explicit file store", "backend:\n  file: {path: /tmp/x.db}\nshards: 1\n", 1},
		{"redis", redis + "shards: 6\n", 6},
		{"the most", redis + "shards: 256\n", 256},
		{"postgres", "backend:\n  postgres:\n    url: postgres://h/db\nshards: 3\n", 3},
		{"memory", "backend:\n  memory: {}\nshards: 4\n", 4},
		{"from the environment", redis + "shards: ${N}\n", 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := parse("on.yaml", []byte(c.doc), envMap(map[string]string{"N": "12"}))
			if err != nil {
				t.Fatal(err)
			}
			if f.Shards != c.want {
				t.Errorf("Shards = %d, want %d", f.Shards, c.want)
			}
		})
	}
}

func TestShardsRefused(t *testing.T) {
	const redis = "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n"
	for _, c := range []struct {
		name, doc string
		line      int
		msg       string
	}{
		{"zero", redis + "shards: 0\n", 4, "must be between 1 and 256, got 0"},
		{"negative", redis + "shards: -3\n", 4, "must be between 1 and 256, got -3"},
		{"too many", redis + "shards: 257\n", 4, "must be between 1 and 256, got 257"},
		{"not a number", redis + "shards: many\n", 4, `must be an integer, got "many"`},
		{"a float", redis + "shards: 2.5\n", 4, `must be an integer, got "2.5"`},
		{"a list", redis + "shards: [2]\n", 4, "must be an integer, got a list"},
		{"the file store named", "backend:\n  file:\n    path: /tmp/x.db\nshards: 2\n", 4,
			"2 shards need a shared store (backend.redis, backend.postgres or backend.memory): backend.file at line 2 is the file store, which runs one replica and takes shards: 1 only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := parse("on.yaml", []byte(c.doc), noEnv)
			var es Errors
			if !errors.As(err, &es) || f != nil {
				t.Fatalf("got %v, %v; want Errors", f, err)
			}
			var hit *Error
			for _, e := range es {
				if e.Field == "shards" {
					hit = e
				}
			}
			if hit == nil {
				t.Fatalf("no error at shards in %v", err)
			}
			if hit.Line != c.line || !strings.Contains(hit.Msg, c.msg) {
				t.Errorf("got line %d %q, want line %d containing %q", hit.Line, hit.Msg, c.line, c.msg)
			}
			if !strings.HasPrefix(hit.Error(), "on.yaml:") {
				t.Errorf("%q does not name the file", hit.Error())
			}
		})
	}
}

// TestFileStoreShards: with no store named, the refusal waits for the
// caller, who knows the command line's overrides; it names the line.
func TestFileStoreShards(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want string // "": accepted
	}{
		{"role: both\nshards: 4\n", "on.yaml:2: shards: 4 shards need a shared store (backend.redis, backend.postgres or backend.memory): no shared store is given (backend, --redis, ONETICK_REDIS_URL), so it is the file store, which runs one replica and takes shards: 1 only"},
		{"backend: {}\nshards: 2\n", "on.yaml:2: shards: 2 shards need a shared store"},
		{"backend:\n  file:\nshards: 2\n", "on.yaml:3: shards: 2 shards need a shared store"},
		{"shards: 1\n", ""},
		{"role: both\n", ""},
	} {
		f, err := parse("on.yaml", []byte(c.doc), noEnv)
		if err != nil {
			t.Fatalf("%q: %v", c.doc, err)
		}
		err = f.FileStoreShards()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want accepted", c.doc, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%q: got %v, want %q", c.doc, err, c.want)
		}
	}
}

// TestShardsJobsFile: a jobs file holds jobs only; shards there is an
// unknown key, as every other section is.
func TestShardsJobsFile(t *testing.T) {
	base, err := parse("on.yaml", []byte("backend:\n  memory: {}\nshards: 2\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseWith("jobs.yaml", []byte("shards: 3\njobs: []\n"), noEnv, base)
	if err == nil || !strings.Contains(err.Error(), "jobs.yaml:1: shards: unknown field") {
		t.Fatalf("got %v, want shards refused in a jobs file", err)
	}
}

// TestShardedStreams: with shards, a job's default stream is under its
// shard's prefix (on a Cluster, in its shard's slot); a job's own stream
// on a sharded Cluster must be in its shard's slot, and the error names
// the tag to use.
func TestShardedStreams(t *testing.T) {
	const jobs = "jobs:\n  - name: billing\n    schedule: '@daily'\n  - name: mail\n    schedule: '@daily'\n"
	for _, c := range []struct {
		name, doc, prefix string
		shards            int
	}{
		{"standalone", "backend:\n  redis:\n    url: redis://h:6379\n    prefix: p\nshards: 4\n" + jobs, "p", 4},
		{"cluster", "backend:\n  redis:\n    cluster: {addrs: ['h:7000']}\nshards: 3\n" + jobs, "{onetick}", 3},
		{"one shard", "backend:\n  redis:\n    url: redis://h:6379\n" + jobs, "onetick", 1},
		{"memory", "backend:\n  memory: {}\nshards: 2\n" + jobs, "onetick", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := parse("on.yaml", []byte(c.doc), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range f.Jobs {
				want := c.prefix + ":stream:" + j.Name
				if c.shards > 1 {
					want = otredis.ShardPrefix(c.prefix, onetick.ShardOf(j.Name, c.shards), c.shards) + ":stream:" + j.Name
					if c.name == "cluster" && otredis.Slot(j.Stream) != otredis.Slot(otredis.ShardPrefix(c.prefix, onetick.ShardOf(j.Name, c.shards), c.shards)) {
						t.Errorf("%s: stream %s is not in its shard's slot", j.Name, j.Stream)
					}
				}
				if j.Stream != want {
					t.Errorf("%s: stream %q, want %q", j.Name, j.Stream, want)
				}
			}
			// A jobs file takes its shards from the configuration.
			jf, err := parseWith("jobs.yaml", []byte(jobs), noEnv, f)
			if err != nil {
				t.Fatal(err)
			}
			for i, j := range jf.Jobs {
				if j.Stream != f.Jobs[i].Stream {
					t.Errorf("jobs file: %s: stream %q, want %q", j.Name, j.Stream, f.Jobs[i].Stream)
				}
			}
		})
	}
	shard := onetick.ShardOf("billing", 3)
	tag := otredis.ShardPrefix("{onetick}", shard, 3)
	doc := "backend:\n  redis:\n    cluster: {addrs: ['h:7000']}\nshards: 3\njobs:\n  - name: billing\n    schedule: '@daily'\n    stream: '{onetick}:billing'\n"
	_, err := parse("on.yaml", []byte(doc), noEnv)
	want := "on.yaml:8: jobs[0] (billing).stream: \"{onetick}:billing\" lands in cluster hash slot"
	if err == nil || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "job billing is in shard "+strconv.Itoa(shard)+" of 3") ||
		!strings.Contains(err.Error(), "name it like "+tag+":billing") {
		t.Fatalf("got %v, want %q naming the tag %s", err, want, tag)
	}
	// The stream the error suggests is accepted.
	ok := strings.Replace(doc, "'{onetick}:billing'", "'"+tag+":billing'", 1)
	if _, err := parse("on.yaml", []byte(ok), noEnv); err != nil {
		t.Fatalf("the suggested stream: %v", err)
	}
	// A jobs file applied to a sharded Cluster is checked the same way.
	base, err := parse("on.yaml", []byte("backend:\n  redis:\n    cluster: {addrs: ['h:7000']}\nshards: 3\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseWith("jobs.yaml", []byte("jobs:\n  - name: billing\n    schedule: '@daily'\n    stream: '{onetick}:billing'\n"), noEnv, base)
	if err == nil || !strings.Contains(err.Error(), "name it like "+tag+":billing") {
		t.Fatalf("jobs file: got %v", err)
	}
}

// TestShardedDeadlines: deadlines (the section, a job's, a job applied at
// run time) go with shards: one watcher judges each job from its shard's
// ledger while its replica leads the shard (deadlines.go).
func TestShardedDeadlines(t *testing.T) {
	const redis = "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n"
	for _, doc := range []string{
		redis + "shards: 4\ndeadlines:\n  check_every: 5s\njobs: []\n",
		redis + "shards: 2\njobs:\n  - name: a\n    schedule: '@daily'\n    deadline: {start: 1m}\n",
	} {
		if _, err := parse("on.yaml", []byte(doc), noEnv); err != nil {
			t.Errorf("%q: %v, want accepted", doc, err)
		}
	}
	base, err := parse("on.yaml", []byte("backend:\n  memory: {}\nshards: 4\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseWith("jobs.yaml", []byte("jobs:\n  - name: a\n    schedule: '@daily'\n    deadline: {start: 1m}\n"), noEnv, base); err != nil {
		t.Errorf("a jobs file with a deadline on 4 shards: %v, want accepted", err)
	}
}
