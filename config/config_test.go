package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
)

// fullExample is the example of the format documentation.
const fullExample = `backend:            # optional; absent => the embedded in-process backend
  redis:
    url: redis://127.0.0.1:6379/0     # redis:// or rediss:// (TLS); may carry user:password
    prefix: onetick                    # default onetick
    username: ""                       # optional, overrides the URL's
    password: ${REDIS_PASSWORD}        # optional, overrides the URL's
    clock_tolerance: 100ms             # default 100ms
    tls:                               # optional
      enabled: false                   # implied true by rediss://
      ca_file: ""
      cert_file: ""
      key_file: ""
      server_name: ""
      insecure_skip_verify: false
lease:
  ttl: 15s
  renew: 5s          # default ttl/3
  safety_margin: 1.5s # default ttl/10
http:
  listen: 127.0.0.1:9464   # default 127.0.0.1:9464 (loopback by default); use off to disable
metrics:
  per_job: auto            # auto (default), all, listed or none
  per_job_limit: 1000      # auto: every job has its own series while there are at most this many
  jobs: [nightly-billing]  # with auto (also beyond the limit) and listed
jobs:
  - name: nightly-billing
    schedule: "0 2 * * *"
    timezone: Europe/Berlin   # IANA zone, default UTC
    prefer: missed            # or duplicate; default missed
    grace: 30s                # optional, default 2×ttl (prefer missed only)
    max_catchup: 100          # optional, default 100
    stream: billing:jobs      # default "<prefix>:stream:<name>"
    max_len: 10000            # optional approximate stream trimming; 0 = none
    payload: {task: billing.run}   # any YAML value; converted to compact JSON; default {}
`

func lineOf(t *testing.T, text, substr string) int {
	t.Helper()
	i := strings.Index(text, substr)
	if i < 0 {
		t.Fatalf("%q not in text", substr)
	}
	return strings.Count(text[:i], "\n") + 1
}

func mustParse(t *testing.T, text string, env func(string) (string, bool)) *File {
	t.Helper()
	f, err := parse("test.yaml", []byte(text), env)
	if err != nil {
		t.Fatalf("parse failed:\n%v", err)
	}
	return f
}

func TestFullExample(t *testing.T) {
	t.Setenv("REDIS_PASSWORD", "s3cret")
	f, err := Parse("onetick.yaml", []byte(fullExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		Path: "onetick.yaml",
		Backend: Backend{Redis: &Redis{
			URL: "redis://127.0.0.1:6379/0", Prefix: "onetick", Password: "s3cret",
			ClockTolerance: Duration(100 * time.Millisecond),
			Durability:     "async", Replicas: 1, ReplicationTimeout: Duration(100 * time.Millisecond),
		}},
		Lease: Lease{TTL: Duration(15 * time.Second), Renew: Duration(5 * time.Second), SafetyMargin: Duration(1500 * time.Millisecond)},
		HTTP: HTTP{Listen: "127.0.0.1:9464", ReadTimeout: Duration(time.Minute), WriteTimeout: Duration(2 * time.Minute),
			IdleTimeout: Duration(time.Minute), MaxConnections: 128},
		Metrics: Metrics{PerJob: "auto", PerJobLimit: 1000, Jobs: []string{"nightly-billing"}},
		Jobs: []Job{{
			Name: "nightly-billing", Schedule: "0 2 * * *", Timezone: "Europe/Berlin", Prefer: "missed",
			Grace: Duration(30 * time.Second), MaxCatchup: 100, Stream: "billing:jobs", MaxLen: 10000,
			Payload: `{"task":"billing.run"}`, Line: lineOf(t, fullExample, "- name: nightly-billing"),
		}},
	}
	if f.Path != want.Path || !reflect.DeepEqual(f.Backend, want.Backend) || f.Lease != want.Lease || !reflect.DeepEqual(f.HTTP, want.HTTP) ||
		!reflect.DeepEqual(f.Metrics, want.Metrics) || !reflect.DeepEqual(f.Jobs, want.Jobs) || f.Role != RoleBoth ||
		f.Worker.Heartbeat.D() != DefaultHeartbeat {
		t.Fatalf("got\n%+v %+v\nwant\n%+v %+v", f, f.Backend.Redis, want, want.Backend.Redis)
	}
	if !f.HTTP.Enabled() {
		t.Error("HTTP not enabled")
	}
	if got := f.RedisURL(); got != "redis://:s3cret@127.0.0.1:6379/0" {
		t.Errorf("RedisURL = %q", got)
	}
	if got := f.MaskedRedisURL(); strings.Contains(got, "s3cret") {
		t.Errorf("MaskedRedisURL = %q", got)
	}
	if tc, err := f.TLSConfig(); tc != nil || err != nil {
		t.Errorf("TLSConfig = %v, %v; want nil, nil", tc, err)
	}
	if got := f.BackendOptions(); got.Prefix != "onetick" || got.ClockTolerance != 100*time.Millisecond {
		t.Errorf("BackendOptions = %+v", got)
	}
	o, err := f.RedisOptions()
	if err != nil || o.Addr != "127.0.0.1:6379" || o.Password != "s3cret" || o.DB != 0 || o.TLSConfig != nil {
		t.Errorf("RedisOptions = %+v, %v", o, err)
	}

	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0]
	if j.Name != "nightly-billing" || j.Prefer != onetick.PreferMissed || j.Grace != 30*time.Second || j.MaxCatchup != 100 ||
		j.Stream != "billing:jobs" || j.MaxLen != 10000 || j.Payload != `{"task":"billing.run"}` {
		t.Errorf("job = %+v", j)
	}
	// 02:00 Europe/Berlin in winter is 01:00Z.
	next := j.Schedule.Next(time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 1, 11, 1, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Errorf("Next = %v, want %v", next, want)
	}
	lc := f.LeaseConfig()
	if lc.TTL != 15*time.Second || lc.Renew != 5*time.Second || lc.SafetyMargin != 1500*time.Millisecond {
		t.Errorf("LeaseConfig = %+v", lc)
	}
	jm := f.JobMetrics()
	if jm.Mode != onetick.JobMetricsAuto || jm.Limit != 1000 || len(jm.Jobs) != 1 || jm.Jobs[0] != "nightly-billing" {
		t.Errorf("JobMetrics = %+v", jm)
	}
	cfg := onetick.Config{Backend: memory.New(memory.Options{}), Jobs: jobs, Lease: lc, JobMetrics: jm}
	if err := cfg.Validate(); err != nil {
		t.Errorf("onetick rejects the converted config: %v", err)
	}
}

func TestEmptyFile(t *testing.T) {
	for _, text := range []string{"", "\n", "# just a comment\n", "---\n", "---\n...\n", "jobs: []\n", "backend:\nlease:\nhttp:\nmetrics:\njobs:\n"} {
		f, err := parse("empty.yaml", []byte(text), noEnv)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if f.Backend.Redis != nil || len(f.Jobs) != 0 || f.HTTP.Listen != DefaultListen ||
			f.Lease != (Lease{TTL: Duration(15 * time.Second), Renew: Duration(5 * time.Second), SafetyMargin: Duration(1500 * time.Millisecond)}) {
			t.Errorf("%q: got %+v", text, f)
		}
		if jobs, err := f.OneTickJobs(); err != nil || len(jobs) != 0 {
			t.Errorf("%q: OneTickJobs = %v, %v", text, jobs, err)
		}
		if !reflect.DeepEqual(f.Metrics, Metrics{PerJob: "auto", PerJobLimit: onetick.DefaultJobMetricsLimit}) {
			t.Errorf("%q: metrics = %+v", text, f.Metrics)
		}
	}
}

func TestDefaults(t *testing.T) {
	text := `
lease:
  ttl: 30s
http:
  listen: "off"
jobs:
  - name: a
    schedule: "@every 1m"
  - name: b
    schedule: "*/5 * * * *"
    prefer: duplicate
    grace: 0s
    max_catchup: 0
    max_len: 0
    payload: null
`
	f := mustParse(t, text, noEnv)
	if f.Lease != (Lease{TTL: Duration(30 * time.Second), Renew: Duration(10 * time.Second), SafetyMargin: Duration(3 * time.Second)}) {
		t.Errorf("lease = %+v", f.Lease)
	}
	if f.HTTP.Listen != "off" || f.HTTP.Enabled() {
		t.Errorf("http = %+v", f.HTTP)
	}
	want := []Job{
		{Name: "a", Schedule: "@every 1m", Timezone: "UTC", Prefer: "missed", Grace: Duration(time.Minute), MaxCatchup: 100,
			Stream: "onetick:stream:a", Payload: "{}", Line: 7},
		{Name: "b", Schedule: "*/5 * * * *", Timezone: "UTC", Prefer: "duplicate", MaxCatchup: 100,
			Stream: "onetick:stream:b", Payload: "{}", Line: 9},
	}
	if !reflect.DeepEqual(f.Jobs, want) {
		t.Errorf("jobs =\n%+v\nwant\n%+v", f.Jobs, want)
	}

	// The stream default follows the Redis prefix.
	f = mustParse(t, "backend:\n  redis:\n    url: redis://h:6379\n    prefix: grp\njobs:\n  - name: a\n    schedule: '@daily'\n", noEnv)
	if f.Jobs[0].Stream != "grp:stream:a" || f.Backend.Redis.ClockTolerance != Duration(DefaultClockTolerance) {
		t.Errorf("got %+v %+v", f.Jobs[0], f.Backend.Redis)
	}
	// An empty redis prefix is the default.
	f = mustParse(t, "backend:\n  redis:\n    url: redis://h:6379\njobs:\n  - name: a\n    schedule: '@daily'\n", noEnv)
	if f.Jobs[0].Stream != "onetick:stream:a" || f.Backend.Redis.Prefix != "onetick" {
		t.Errorf("got %+v %+v", f.Jobs[0], f.Backend.Redis)
	}
}

func TestPayload(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{`{task: billing.run}`, `{"task":"billing.run"}`},
		{`{b: 1, a: [1, 2.5, -3, true, null, "x"], c: {d: "<&>"}}`, `{"b":1,"a":[1,2.5,-3,true,null,"x"],"c":{"d":"<&>"}}`},
		{`"just a string"`, `"just a string"`},
		{`42`, `42`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`~`, `{}`},
		{`{"1": one, 'true': t, date: 2026-01-02, big: 18446744073709551615, hex: 0x10}`,
			`{"1":"one","true":"t","date":"2026-01-02","big":18446744073709551615,"hex":16}`},
		{"\n      a: |\n        multi\n        line\n      b: yes", `{"a":"multi\nline\n","b":"yes"}`},
	}
	for _, c := range cases {
		text := "jobs:\n  - name: a\n    schedule: '@daily'\n    payload: " + c.yaml + "\n"
		f := mustParse(t, text, noEnv)
		if got := f.Jobs[0].Payload; got != c.want {
			t.Errorf("payload %s: got %s, want %s", c.yaml, got, c.want)
		}
	}
	// Anchors and merge keys.
	text := `jobs:
  - &base
    name: a
    schedule: '@daily'
    timezone: Europe/Berlin
    payload: &p {kind: report, opts: {x: 1}}
  - <<: *base
    name: b
    payload: {<<: *p, extra: [*p]}
`
	f := mustParse(t, text, noEnv)
	if f.Jobs[1].Timezone != "Europe/Berlin" || f.Jobs[1].Schedule != "@daily" || f.Jobs[1].Name != "b" {
		t.Errorf("merged job = %+v", f.Jobs[1])
	}
	if want := `{"extra":[{"kind":"report","opts":{"x":1}}],"kind":"report","opts":{"x":1}}`; f.Jobs[1].Payload != want {
		t.Errorf("payload = %s, want %s", f.Jobs[1].Payload, want)
	}
	// Large payloads.
	big := strings.Repeat("x", MaxPayload)
	if _, err := parse("t.yaml", []byte("jobs:\n  - name: a\n    schedule: '@daily'\n    payload: ["+big+", y]\n"), noEnv); err == nil ||
		!strings.Contains(err.Error(), "larger than") {
		t.Errorf("big payload: %v", err)
	}
}

func TestExpand(t *testing.T) {
	t.Setenv("ONETICK_T_URL", "redis://h:6379/1")
	t.Setenv("ONETICK_T_EMPTY", "")
	t.Setenv("ONETICK_T_N", "500")
	t.Setenv("ONETICK_T_TRICKY", "a: b # c\n- d")
	t.Setenv("ONETICK_T_PW", "*pw #1: 'x\"")
	os.Unsetenv("ONETICK_T_UNSET")
	text := `backend:
  redis:
    url: ${ONETICK_T_URL}
    prefix: ${ONETICK_T_UNSET:-pre}
    password: ${ONETICK_T_PW}
    username: "${ONETICK_T_EMPTY}"
    clock_tolerance: ${ONETICK_T_EMPTY:-}
jobs:
  - name: job-${ONETICK_T_N}
    schedule: '@daily'
    max_len: ${ONETICK_T_N}
    grace: ${ONETICK_T_UNSET:-45s}
    max_catchup: ${ONETICK_T_UNSET:-}
    payload: {n: ${ONETICK_T_N}, s: "${ONETICK_T_N}", lit: "$${HOME}", dollar: $5, t: ${ONETICK_T_TRICKY}, e: ${ONETICK_T_UNSET:-},
      d: ${ONETICK_T_EMPTY:-dflt}, x: ${ONETICK_T_EMPTY}}
`
	f, err := Parse("t.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	r := f.Backend.Redis
	if r.URL != "redis://h:6379/1" || r.Prefix != "pre" || r.Password != "*pw #1: 'x\"" || r.Username != "" ||
		r.ClockTolerance != Duration(DefaultClockTolerance) {
		t.Errorf("redis = %+v", r)
	}
	j := f.Jobs[0]
	if j.Name != "job-500" || j.MaxLen != 500 || j.Grace != Duration(45*time.Second) || j.Stream != "pre:stream:job-500" ||
		j.MaxCatchup != DefaultMaxCatchup {
		t.Errorf("job = %+v", j)
	}
	if want := `{"n":500,"s":"500","lit":"${HOME}","dollar":"$5","t":"a: b # c\n- d","e":null,"d":"dflt","x":null}`; j.Payload != want {
		t.Errorf("payload = %s, want %s", j.Payload, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "onetick.yaml")
	if err := os.WriteFile(path, []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path || len(f.Jobs) != 1 {
		t.Errorf("got %+v", f)
	}

	missing := filepath.Join(dir, "nope.yaml")
	_, err = Load(missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.File != missing || e.Line != 0 {
		t.Errorf("error = %#v", e)
	}

	if err := os.WriteFile(path, []byte("jobs:\n  - name: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || err.Error() != path+":2: jobs[0] (a).schedule: is required (for example \"0 2 * * *\" or \"@every 5m\")" {
		t.Errorf("Load = %v", err)
	}
}

func TestDuration(t *testing.T) {
	var v struct {
		A Duration `yaml:"a"`
		B Duration `yaml:"b"`
	}
	if err := yaml.Unmarshal([]byte("a: 1m30s\nb: 0\n"), &v); err != nil || v.A != Duration(90*time.Second) || v.B != 0 {
		t.Fatalf("got %v, %v", v, err)
	}
	for _, bad := range []string{"a: 15", "a: 1.5", "a: '15'", "a: 15 s", "a: [1s]", "a: soon"} {
		err := yaml.Unmarshal([]byte(bad), &v)
		if err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	err := yaml.Unmarshal([]byte("a: 15"), &v)
	if err == nil || !strings.Contains(err.Error(), "use a unit, e.g. 15s") {
		t.Errorf("bare number: %v", err)
	}
	out, err := yaml.Marshal(struct{ D Duration }{Duration(1500 * time.Millisecond)})
	if err != nil || string(out) != "d: 1.5s\n" {
		t.Errorf("Marshal = %q, %v", out, err)
	}
}

func TestErrorFormat(t *testing.T) {
	cases := []struct {
		e    Error
		want string
	}{
		{Error{File: "f.yaml", Line: 3, Field: "lease.ttl", Msg: "bad"}, "f.yaml:3: lease.ttl: bad"},
		{Error{File: "f.yaml", Field: "lease.ttl", Msg: "bad"}, "f.yaml: lease.ttl: bad"},
		{Error{File: "f.yaml", Line: 3, Msg: "bad"}, "f.yaml:3: bad"},
		{Error{Line: 3, Msg: "bad"}, "line 3: bad"},
		{Error{Msg: "bad"}, "bad"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
	es := Errors{&cases[0].e, &cases[2].e}
	if got := es.Error(); got != "f.yaml:3: lease.ttl: bad\nf.yaml:3: bad" {
		t.Errorf("Errors.Error() = %q", got)
	}
}

func TestOneTickJobsRejectsInvalid(t *testing.T) {
	f := &File{Path: "x", Jobs: []Job{
		{Name: "ok", Schedule: "@daily"},
		{Name: "bad name", Schedule: "@daily"},
		{Name: "s", Schedule: "nope"},
		{Name: "z", Schedule: "@daily", Timezone: "Local"},
		{Name: "p", Schedule: "@daily", Payload: "{"},
		{Name: "ok", Schedule: "@daily"},
	}}
	_, err := f.OneTickJobs()
	var es Errors
	if !errors.As(err, &es) || len(es) != 5 {
		t.Fatalf("got %v", err)
	}
	for i, want := range []string{"jobs[1].name", "jobs[2] (s).schedule", "jobs[3] (z).timezone", "jobs[4] (p).payload", "jobs[5] (ok).name"} {
		if es[i].Field != want {
			t.Errorf("error %d field %q, want %q", i, es[i].Field, want)
		}
	}
	// A valid hand-made file converts with engine defaults left to onetick.
	f = &File{Jobs: []Job{{Name: "a", Schedule: "*/10 * * * * *", Payload: `{"a":1}`}}}
	jobs, err := f.OneTickJobs()
	if err != nil || len(jobs) != 1 || jobs[0].Prefer != "" {
		t.Fatalf("got %+v, %v", jobs, err)
	}
	if p := jobs[0].Payload; !json.Valid([]byte(p)) {
		t.Errorf("payload %q", p)
	}
}

func TestManyJobs(t *testing.T) {
	var b strings.Builder
	b.WriteString("jobs:\n")
	const n = 10000
	for i := range n {
		fmt.Fprintf(&b, "  - name: job-%d\n    schedule: '*/5 * * * *'\n    timezone: Europe/Berlin\n    payload: {id: %d, tags: [a, b, c]}\n", i, i)
	}
	f := mustParse(t, b.String(), noEnv)
	if len(f.Jobs) != n || f.Jobs[n-1].Payload != fmt.Sprintf(`{"id":%d,"tags":["a","b","c"]}`, n-1) || f.Jobs[n-1].Line != 4*(n-1)+2 {
		t.Fatalf("got %d jobs, last %+v", len(f.Jobs), f.Jobs[n-1])
	}
}

// H is hashed from each job's name: one expression lands at different
// times for different jobs (the values of package cron's documented
// example), and validation runs for the job's own values.
func TestHashedSchedules(t *testing.T) {
	text := `jobs:
  - name: billing
    schedule: "H H * * *"
    timezone: Europe/Berlin
  - name: nightly-billing
    schedule: "H H * * *"
    timezone: Europe/Berlin
  - name: report
    schedule: "0 18 * * 5L"
`
	jobs, err := mustParse(t, text, noEnv).OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, want := range []string{
		"2026-01-01T07:50:00Z", // 08:50 CET
		"2026-01-01T13:05:00Z", // 14:05 CET
		"2026-01-30T18:00:00Z", // the last Friday
	} {
		if got := jobs[i].Schedule.Next(from).Format(time.RFC3339); got != want {
			t.Errorf("%s: Next = %s, want %s", jobs[i].Name, got, want)
		}
	}
}
