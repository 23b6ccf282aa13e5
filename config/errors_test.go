package config

import (
	"errors"
	"strings"
	"testing"
)

// want is one expected problem: its line, its field and a part of its
// message.
type want struct {
	line  int
	field string
	msg   string
}

type errCase struct {
	name string
	yaml string
	env  map[string]string
	want []want
	// secret must not appear in any message.
	secret string
}

var errCases = []errCase{
	{name: "malformed YAML", yaml: "jobs:\n  - name: a\n    schedule: [\n",
		want: []want{{3, "", "invalid YAML: did not find expected node content"}}},
	{name: "misindented key", yaml: "jobs:\n  - name: a\n   schedule: x\n",
		want: []want{{3, "", "invalid YAML: did not find expected '-' indicator"}}},
	{name: "misindented mapping", yaml: "lease:\n  ttl: 15s\n renew: 5s\n",
		want: []want{{3, "", "invalid YAML: did not find expected key"}}},
	{name: "unclosed quote", yaml: "jobs:\n  - name: 'a\n    schedule: x\n",
		want: []want{{2, "", "invalid YAML: found unexpected end of stream"}}},
	{name: "malformed YAML after a multi-line flow mapping", yaml: "lease: {ttl: 15s,\n  renew: 5s}\nhttp:\n  listen: x\n bad: 1\n",
		want: []want{{5, "", "invalid YAML: did not find expected key"}}},
	{name: "malformed YAML on line 1", yaml: "a: b: c\n",
		want: []want{{1, "", "invalid YAML: mapping values are not allowed"}}},
	{name: "tab indentation", yaml: "jobs:\n\t- name: a\n",
		want: []want{{2, "", "invalid YAML: found character that cannot start any token"}}},
	{name: "invalid UTF-8", yaml: "jobs:\n  - name: a\n    stream: \xff\n",
		want: []want{{3, "", "invalid YAML"}}},
	{name: "two documents", yaml: "jobs: []\n---\njobs: []\n",
		want: []want{{2, "", "only one YAML document is allowed"}}},
	{name: "top level not a mapping", yaml: "- name: a\n",
		want: []want{{1, "", "the top level must be a mapping"}}},
	{name: "unknown top-level field", yaml: "lease:\n  ttl: 15s\ncolour: red\n",
		want: []want{{3, "colour", "unknown field (expected one of: backend, lease, http, role, shards, worker, metrics, ledger, deadlines, tracing, relays, jobs)"}}},
	{name: "unknown top-level field with suggestion", yaml: "job:\n  - name: a\n",
		want: []want{{1, "job", `unknown field (did you mean "jobs"?)`}}},
	{name: "unknown nested field", yaml: "backend:\n  redis:\n    url: redis://h:6379\n    tls:\n      enable: true\n",
		want: []want{{5, "backend.redis.tls.enable", `unknown field (did you mean "enabled"?)`}}},
	{name: "unknown lease field", yaml: "lease:\n  ttl: 15s\n  safety-margin: 1s\n",
		want: []want{{3, "lease.safety-margin", `did you mean "safety_margin"?`}}},
	{name: "unknown field in a job", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    retries: 3\n",
		want: []want{{4, "jobs[0] (a).retries", "unknown field"}}},
	{name: "bad cron", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n  - name: nightly\n    schedule: '0 0 30 2 *'\n",
		want: []want{{5, "jobs[1] (nightly).schedule", `cron: "0 0 30 2 *": day-of-month: `}}},
	{name: "bad cron field", yaml: "jobs:\n  - name: a\n    schedule: '61 * * * *'\n",
		want: []want{{3, "jobs[0] (a).schedule", `cron: "61 * * * *": minute: `}}},
	{name: "bad H", yaml: "jobs:\n  - name: a\n    schedule: 'H(30-20) * * * *'\n",
		want: []want{{3, "jobs[0] (a).schedule", `cron: "H(30-20) * * * *": minute: H(30-20): range reversed`}}},
	{name: "W in day-of-week", yaml: "jobs:\n  - name: a\n    schedule: '0 0 * * 15W'\n",
		want: []want{{3, "jobs[0] (a).schedule", "day-of-week: 15W: W is only allowed in day-of-month"}}},
	// Without a name H cannot be hashed; the missing name is the one problem.
	{name: "H without a name", yaml: "jobs:\n  - schedule: 'H H * * *'\n",
		want: []want{{2, "jobs[0].name", "is required"}}},
	{name: "unknown zone", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    timezone: Mars/Olympus\n",
		want: []want{{4, "jobs[0] (a).timezone", `unknown time zone "Mars/Olympus"`}}},
	{name: "Local zone", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    timezone: Local\n",
		want: []want{{4, "jobs[0] (a).timezone", `"Local" is not allowed`}}},
	{name: "renew not below ttl/2", yaml: "lease:\n  ttl: 10s\n  renew: 5s\n",
		want: []want{{3, "lease.renew", "5s must be below half the ttl (5s)"}}},
	{name: "margin leaves no lease", yaml: "lease:\n  ttl: 10s\n  renew: 3s\n  safety_margin: 7s\n",
		want: []want{{4, "lease.safety_margin", "7s leaves no usable lease"}}},
	{name: "lease error on a defaulted field is put on lease", yaml: "\nlease:\n  ttl: 20ms\n  safety_margin: 14ms\n",
		want: []want{{4, "lease.safety_margin", "leaves no usable lease"}}},
	{name: "ttl too short", yaml: "lease:\n  ttl: 5ms\n",
		want: []want{{2, "lease.ttl", "must be at least 10ms"}}},
	{name: "bad lease duration hides lease relations", yaml: "lease:\n  ttl: 10x\n  renew: 8s\n",
		want: []want{{2, "lease.ttl", `invalid duration "10x"`}}},
	{name: "bare-number duration", yaml: "lease:\n  ttl: 15\n",
		want: []want{{2, "lease.ttl", "is a bare number (15): use a unit, e.g. 15s"}}},
	{name: "bare-number grace", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    grace: 30\n",
		want: []want{{4, "jobs[0] (a).grace", "use a unit, e.g. 15s"}}},
	{name: "duplicate job name", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n  - name: b\n    schedule: '@daily'\n  - name: a\n    schedule: '@hourly'\n",
		want: []want{{6, "jobs[2] (a).name", `duplicate job name "a" (first defined on line 2)`}}},
	{name: "missing name and schedule", yaml: "jobs:\n  - timezone: UTC\n  - name: x\n",
		want: []want{{2, "jobs[0].name", "is required"}, {2, "jobs[0].schedule", "is required"}, {3, "jobs[1] (x).schedule", "is required"}}},
	{name: "bad name", yaml: "jobs:\n  - name: two words\n    schedule: '@daily'\n",
		want: []want{{2, "jobs[0].name", "must not contain spaces"}}},
	{name: "long name", yaml: "jobs:\n  - name: " + strings.Repeat("n", 201) + "\n    schedule: '@daily'\n",
		want: []want{{2, "jobs[0].name", "longer than 200 bytes"}}},
	{name: "empty job", yaml: "jobs:\n  -\n  - name: a\n    schedule: '@daily'\n",
		want: []want{{2, "jobs[0]", "is empty"}}},
	{name: "job not a mapping", yaml: "jobs:\n  - a\n",
		want: []want{{2, "jobs[0]", "must be a mapping"}}},
	{name: "jobs not a list", yaml: "jobs:\n  name: a\n",
		want: []want{{1, "jobs", "must be a list of jobs"}}},
	{name: "bad prefer", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    prefer: both\n",
		want: []want{{4, "jobs[0] (a).prefer", `must be "missed" or "duplicate", got "both"`}}},
	{name: "negative numbers", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    grace: -1s\n    max_catchup: -1\n    max_len: -5\n",
		want: []want{{4, "jobs[0] (a).grace", "must not be negative"}, {5, "jobs[0] (a).max_catchup", "must not be negative"},
			{6, "jobs[0] (a).max_len", "must not be negative"}}},
	{name: "grace with prefer duplicate", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    prefer: duplicate\n    grace: 1m\n",
		want: []want{{5, "jobs[0] (a).grace", "only applies to prefer: missed"}}},
	{name: "not an integer", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    max_len: lots\n    max_catchup: 1.5\n",
		want: []want{{4, "jobs[0] (a).max_len", `must be an integer, got "lots"`}, {5, "jobs[0] (a).max_catchup", "must be an integer"}}},
	{name: "wrong kinds", yaml: "jobs:\n  - name: [a]\n    schedule: {x: 1}\n",
		want: []want{{2, "jobs[0].name", "must be a string, got a list"}, {3, "jobs[0].schedule", "must be a string, got a mapping"}}},
	{name: "duplicate key", yaml: "lease:\n  ttl: 15s\n  ttl: 20s\n",
		want: []want{{3, "lease.ttl", "duplicate key (first on line 2)"}}},
	{name: "payload key not a string", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    payload:\n      x: 1\n      2: two\n",
		want: []want{{6, "jobs[0] (a).payload", `key "2" is a number, not a string`}}},
	{name: "payload infinity", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    payload: {x: [1, .inf]}\n",
		want: []want{{4, "jobs[0] (a).payload.x[1]", ".inf cannot be represented in JSON"}}},
	{name: "payload alias cycle", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    payload: &p\n      self: *p\n",
		want: []want{{5, "jobs[0] (a).payload.self", "contains itself"}}},
	{name: "merge cycle", yaml: "jobs:\n  - &j\n    name: a\n    schedule: '@daily'\n    <<: *j\n",
		want: []want{{5, "jobs[0]", "<< merges a mapping into itself"}}},
	{name: "billion laughs", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    payload:\n" +
		"      a: &a [x, x, x, x, x, x, x, x, x, x]\n      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
		"      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
		"      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n" +
		"      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
		want: []want{{5, "jobs[0] (a).payload.f[1][3][7][2][3][1]", "is larger than 1048576 bytes as JSON"}}},
	{name: "billion merges", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    payload:\n" +
		"      a: &a {}\n      b: &b {<<: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]}\n" +
		"      c: &c {<<: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]}\n      d: &d {<<: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]}\n" +
		"      e: &e {<<: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]}\n      f: &f {<<: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]}\n" +
		"      g: &g {<<: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]}\n      h: {<<: [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]}\n",
		want: []want{{5, "", "too complex"}}},
	{name: "bad listen", yaml: "http:\n  listen: localhost\n",
		want: []want{{2, "http.listen", `must be host:port (such as 127.0.0.1:9464) or off, got "localhost"`}}},
	{name: "empty listen", yaml: "http:\n  listen: ''\n",
		want: []want{{2, "http.listen", "or off"}}},
	{name: "bad port", yaml: "http:\n  listen: ':http'\n",
		want: []want{{2, "http.listen", "port must be a number"}}},
	{name: "missing url", yaml: "backend:\n  redis:\n    prefix: x\n",
		want: []want{{2, "backend.redis.url", "is required"}}},
	{name: "null redis", yaml: "backend:\n  redis:\n",
		want: []want{{2, "backend.redis.url", "is required"}}},
	{name: "empty url", yaml: "backend:\n  redis:\n    url: ''\n",
		want: []want{{3, "backend.redis.url", "is required"}}},
	{name: "bad url scheme with password", yaml: "backend:\n  redis:\n    url: http://user:hunter2@h:6379\n", secret: "hunter2",
		want: []want{{3, "backend.redis.url", `invalid URL "http://user:xxxxx@h:6379": must start with redis:// or rediss://`}}},
	{name: "bad url port with password", yaml: "backend:\n  redis:\n    url: redis://user:hunter2@h:port\n", secret: "hunter2",
		want: []want{{3, "backend.redis.url", `invalid URL "redis://user:xxxxx@h:port": invalid port`}}},
	{name: "bad url db with password", yaml: "backend:\n  redis:\n    url: redis://:hunter2@h:6379/x\n", secret: "hunter2",
		want: []want{{3, "backend.redis.url", "invalid database number"}}},
	{name: "bad url escape in password", yaml: "backend:\n  redis:\n    url: redis://u:hun%zzter2@h\n", secret: "hun",
		want: []want{{3, "backend.redis.url", "invalid URL escape"}}},
	{name: "unescaped slash in password", yaml: "backend:\n  redis:\n    url: redis://:1234/hunter2@h\n", secret: "hunter2",
		want: []want{{3, "backend.redis.url", "percent-encode"}}},
	{name: "unescaped hash in password", yaml: "backend:\n  redis:\n    url: 'redis://:hun#ter2@h'\n", secret: "hun",
		want: []want{{3, "backend.redis.url", "invalid URL"}}},
	{name: "url without scheme", yaml: "backend:\n  redis:\n    url: u:hunter2@h:6379\n", secret: "hunter2",
		want: []want{{3, "backend.redis.url", `"xxxxx@h:6379"`}}},
	{name: "url from env with password", yaml: "backend:\n  redis:\n    url: ${URL}\n", env: map[string]string{"URL": "redis://u:hunter2@h:6379/0?bogus=1"},
		secret: "hunter2", want: []want{{3, "backend.redis.url", "unexpected option"}}},
	{name: "a relay beside a run block", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    run: {command: [x]}\n    relay:\n      river: {queue: q}\n",
		want: []want{{5, "jobs[0] (a).relay", "is exclusive with run:"}}},
	{name: "a relay beside a deadline", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    deadline: {start: 1m}\n    relay:\n      river: {queue: q}\n",
		want: []want{{5, "jobs[0] (a).relay", "is exclusive with deadline"}}},
	{name: "two relays", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      river: {}\n      asynq: {}\n",
		want: []want{{6, "jobs[0] (a).relay", "names two relays"}}},
	{name: "a NATS relay without url or subject", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats: {stream: S}\n",
		want: []want{{5, "jobs[0] (a).relay.nats.url", "is required"}, {5, "jobs[0] (a).relay.nats.subject", "is required"}}},
	{name: "a NATS relay's bad URL keeps its token secret", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats:\n        url: http://s3cr3t@h:4222\n        subject: t\n",
		secret: "s3cr3t", want: []want{{6, "jobs[0] (a).relay.nats.url", "must start with nats://"}}},
	{name: "a NATS relay's wildcard subject", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats:\n        url: nats://h:4222\n        subject: ticks.>\n",
		want: []want{{7, "jobs[0] (a).relay.nats.subject", "no wildcards"}}},
	{name: "a NATS relay's token and creds", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      nats:\n        url: nats://h:4222\n        subject: t\n        token: ${TOK}\n        creds: /x.creds\n",
		env: map[string]string{"TOK": "hunter2"}, secret: "hunter2", want: []want{{9, "jobs[0] (a).relay.nats.creds", "give one"}}},
	{name: "a NATS relay beside a run block", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    run: {command: [x]}\n    relay:\n      nats: {url: 'nats://h:4222', subject: t}\n",
		want: []want{{5, "jobs[0] (a).relay", "is exclusive with run:"}}},
	{name: "an empty relay", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay: {}\n",
		want: []want{{4, "jobs[0] (a).relay", "names no relay"}}},
	{name: "a bad River queue", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      river:\n        queue: Bad Queue\n",
		want: []want{{6, "jobs[0] (a).relay.river.queue", "is not a River queue name"}}},
	{name: "an unknown relay key", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      river:\n        type: x\n",
		want: []want{{6, "jobs[0] (a).relay.river.type", "unknown field (expected one of: queue, kind, max_attempts)"}}},
	{name: "asynq max_retry and max_attempts", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      asynq:\n        max_retry: 2\n        max_attempts: 3\n",
		want: []want{{7, "jobs[0] (a).relay.asynq.max_attempts", "give one"}}},
	{name: "a negative relay attempt count", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    relay:\n      river:\n        max_attempts: -1\n",
		want: []want{{6, "jobs[0] (a).relay.river.max_attempts", "must not be negative"}}},
	{name: "a job's deadline finishing before it starts", yaml: "jobs:\n  - name: a\n    schedule: '@hourly'\n    deadline:\n      start: 5m\n      finish: 1m\n",
		want: []want{{6, "jobs[0] (a).deadline.finish", "must not be shorter than start (5m0s)"}}},
	{name: "a deadline webhook's short secret", yaml: "deadlines:\n  notify:\n    url: https://u:hunter2@h/x\n    secrets: [whsec_aHVudGVyMg==]\n",
		secret: "aHVudGVyMg", want: []want{{4, "deadlines.notify.secrets[0]", "decodes to 7 bytes"}}},
	{name: "a deadline webhook's URL with a password", yaml: "deadlines:\n  notify:\n    url: ftp://u:hunter2@h/x\n    secrets: [whsec_aHVudGVyMg==]\n",
		secret: "hunter2", want: []want{{3, "deadlines.notify.url", "must be an absolute http:// or https:// URL"}}},
	{name: "password in the query", yaml: "backend:\n  redis:\n    url: redis://h:6379/0?password=hunter2\n", secret: "hunter2",
		want: []want{{3, "backend.redis.url", `invalid URL "redis://h:6379/0?password=xxxxx": unexpected option: password`}}},
	{name: "password in a sentinel address", yaml: "backend:\n  redis:\n    sentinel:\n      primary: m\n      addrs: ['u:hunter2@10.0.0.1:26379', 'hunter2@10.0.0.2:26379']\n", secret: "hunter2",
		want: []want{{5, "backend.redis.sentinel.addrs[0]", `"xxxxx@10.0.0.1:26379": credentials go in username and password`},
			{5, "backend.redis.sentinel.addrs[1]", `"xxxxx@10.0.0.2:26379"`}}},
	{name: "password in a cluster address", yaml: "backend:\n  redis:\n    cluster:\n      addrs: ['hunter2@10.0.0.1']\n", secret: "hunter2",
		want: []want{{4, "backend.redis.cluster.addrs[0]", `"xxxxx@10.0.0.1"`}}},
	{name: "unix url", yaml: "backend:\n  redis:\n    url: unix://:hunter2@/run/redis.sock?password=hunter2\n", secret: "hunter2",
		want: []want{{3, "backend.redis.url", `"unix://:xxxxx@/run/redis.sock?password=xxxxx": must start with redis://`}}},
	{name: "url without host", yaml: "backend:\n  redis:\n    url: redis:h\n",
		want: []want{{3, "backend.redis.url", "no host"}}},
	{name: "negative clock tolerance", yaml: "backend:\n  redis:\n    url: redis://h\n    clock_tolerance: -1s\n",
		want: []want{{4, "backend.redis.clock_tolerance", "must not be negative"}}},
	{name: "tls settings with tls off", yaml: "backend:\n  redis:\n    url: redis://h\n    tls:\n      ca_file: ca.pem\n",
		want: []want{{5, "backend.redis.tls.ca_file", "has no effect: TLS is off"}}},
	{name: "rediss with tls disabled", yaml: "backend:\n  redis:\n    url: rediss://h\n    tls:\n      enabled: false\n",
		want: []want{{5, "backend.redis.tls.enabled", "rediss:// URL always uses TLS"}}},
	{name: "cert without key", yaml: "backend:\n  redis:\n    url: rediss://h\n    tls:\n      cert_file: c.pem\n",
		want: []want{{5, "backend.redis.tls.key_file", "is required with cert_file"}}},
	{name: "bad bool", yaml: "backend:\n  redis:\n    url: redis://h\n    tls:\n      enabled: yes\n",
		want: []want{{5, "backend.redis.tls.enabled", `must be true or false, got "yes"`}}},
	{name: "unset variable", yaml: "backend:\n  redis:\n    url: redis://h:6379\n    password: ${ONETICK_TEST_UNSET}\n",
		want: []want{{4, "backend.redis.password", "environment variable ONETICK_TEST_UNSET is not set"}}},
	{name: "unset variable in a job", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    payload:\n      text: |\n        one\n        ${NOPE}\n",
		want: []want{{7, "jobs[0] (a).payload.text", "environment variable NOPE is not set"}}},
	{name: "malformed references", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n    stream: ${not valid}\n    payload: x${\n",
		want: []want{{4, "jobs[0] (a).stream", "invalid variable reference ${not valid}"}, {5, "jobs[0] (a).payload", "unterminated ${"}}},
	{name: "bad per_job", yaml: "metrics:\n  per_job: some\n",
		want: []want{{2, "metrics.per_job", `must be auto, all, listed or none, got "some"`}}},
	{name: "bad per_job_limit", yaml: "metrics:\n  per_job_limit: -1\n",
		want: []want{{2, "metrics.per_job_limit", "must not be negative"}}},
	{name: "per_job_limit not an integer", yaml: "metrics:\n  per_job_limit: many\n",
		want: []want{{2, "metrics.per_job_limit", "must be an integer"}}},
	{name: "per_job_limit without auto", yaml: "metrics:\n  per_job: all\n  per_job_limit: 10\n",
		want: []want{{3, "metrics.per_job_limit", "has no effect with per_job: all"}}},
	{name: "metrics jobs with none", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n  - name: b\n    schedule: '@daily'\nmetrics:\n  per_job: none\n  jobs: [a]\n",
		want: []want{{8, "metrics.jobs", "has no effect with per_job: none"}}},
	{name: "metrics jobs unknown and repeated", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n  - name: b\n    schedule: '@daily'\nmetrics:\n  jobs:\n    - a\n    - c\n    - a\n    - [b]\n",
		want: []want{{9, "metrics.jobs[1]", `names no job of this file: "c"`}, {10, "metrics.jobs[2]", `lists "a" again (first on line 8)`},
			{11, "metrics.jobs[3]", "must be a job's name"}}},
	{name: "metrics jobs not a list", yaml: "jobs:\n  - name: a\n    schedule: '@daily'\n  - name: b\n    schedule: '@daily'\nmetrics:\n  jobs: a\n",
		want: []want{{7, "metrics.jobs", "must be a list of job names"}}},
	{name: "unknown metrics field", yaml: "metrics:\n  per_job_limt: 5\n",
		want: []want{{2, "metrics.per_job_limt", `did you mean "per_job_limit"?`}}},
	{name: "unknown fields are not expanded", yaml: "colour: ${NOPE}\n# ${NOPE} in a comment\n",
		want: []want{{1, "colour", "unknown field"}}},
}

func TestErrors(t *testing.T) { checkCases(t, errCases) }

func checkCases(t *testing.T, cases []errCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lookup := noEnv
			if c.env != nil {
				lookup = envMap(c.env)
			}
			f, err := parse("bad.yaml", []byte(c.yaml), lookup)
			if err == nil {
				t.Fatalf("no error; got %+v", f)
			}
			if f != nil {
				t.Errorf("File returned with an error")
			}
			checkErrors(t, err, c.want)
			if c.secret != "" && strings.Contains(err.Error(), c.secret) {
				t.Errorf("message contains the secret %q:\n%v", c.secret, err)
			}
		})
	}
}

func checkErrors(t *testing.T, err error, want []want) {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, not Errors: %v", err, err)
	}
	if len(es) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(es), len(want), err)
	}
	for i, w := range want {
		e := es[i]
		if e.File != "bad.yaml" || e.Line != w.line || e.Field != w.field || !strings.Contains(e.Msg, w.msg) {
			t.Errorf("problem %d:\n got %d %q %q\nwant %d %q containing %q", i, e.Line, e.Field, e.Msg, w.line, w.field, w.msg)
		}
	}
}

func TestErrorText(t *testing.T) {
	_, err := parse("bad.yaml", []byte("jobs:\n  - name: nightly\n    schedule: '0 0 30 2 *'\n"), noEnv)
	if want := `bad.yaml:3: jobs[0] (nightly).schedule: cron: "0 0 30 2 *": day-of-month: no fire time within 5 years`; err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestPasswordFieldNeverShown(t *testing.T) {
	text := "backend:\n  redis:\n    url: redis://h:6379/hunter2x\n    password: ${PW}\n"
	_, err := parse("bad.yaml", []byte(text), envMap(map[string]string{"PW": "hunter2x"}))
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "hunter2x") {
		t.Errorf("message contains the password: %v", err)
	}
}

func TestManyProblemsInFileOrder(t *testing.T) {
	text := `jobs:
  - name: ok
    schedule: "@daily"
  - name: bad-cron
    schedule: "* * *"
    colour: blue
lease:
  ttl: 15
http:
  listen: nowhere
backend:
  redis:
    prefix: p
    password: ${ONETICK_TEST_UNSET}
  - name: ok
`
	_, err := parse("bad.yaml", []byte(text), noEnv)
	// The last line makes the YAML malformed: only that is reported.
	checkErrors(t, err, []want{{15, "", "invalid YAML: did not find expected key"}})

	text = strings.TrimSuffix(text, "  - name: ok\n") + "extra: 1\n"
	_, err = parse("bad.yaml", []byte(text), noEnv)
	checkErrors(t, err, []want{
		{5, "jobs[1] (bad-cron).schedule", "expression"},
		{6, "jobs[1] (bad-cron).colour", "unknown field"},
		{8, "lease.ttl", "bare number"},
		{10, "http.listen", "host:port"},
		{12, "backend.redis.url", "is required"},
		{14, "backend.redis.password", "ONETICK_TEST_UNSET is not set"},
		{15, "extra", "unknown field"},
	})
}
