package config_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
)

var hookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef01234567"))

func TestDeadlinesSection(t *testing.T) {
	t.Setenv("HOOK_SECRET", hookSecret)
	doc := `deadlines:
  check_every: 30s
  lookback: 5m
  notify:
    url: https://alerts.internal/onetick
    secrets: [${HOOK_SECRET}]
jobs:
  - name: nightly
    schedule: "0 2 * * *"
    deadline: {start: 5m, finish: 1h}
  - name: only-finish
    schedule: "@hourly"
    deadline:
      finish: 10m
  - name: none
    schedule: "@hourly"
`
	f, err := config.Parse("c.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.Deadlines.Watcher()
	if err != nil || w.CheckEvery != 30*time.Second || w.Lookback != 5*time.Minute || w.Notifier == nil {
		t.Fatalf("watcher %+v, %v", w, err)
	}
	if f.Deadlines.Notify.Timeout.D() != 10*time.Second {
		t.Fatalf("notify timeout %s", f.Deadlines.Notify.Timeout)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	want := []onetick.Deadline{{Start: 5 * time.Minute, Finish: time.Hour}, {Finish: 10 * time.Minute}, {}}
	for i, j := range jobs {
		if j.Deadline != want[i] {
			t.Errorf("%s: deadline %+v, want %+v", j.Name, j.Deadline, want[i])
		}
	}

	// Defaults, and no notifier.
	f, err = config.Parse("c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := f.Deadlines.Watcher(); err != nil || w.CheckEvery != onetick.DefaultDeadlineCheckEvery ||
		w.Lookback != onetick.DefaultDeadlineLookback || w.Notifier != nil {
		t.Fatalf("defaults %+v, %v", w, err)
	}
}

// A job applied through the API (a jobs file, stored as its definition)
// keeps its deadline, and a stored definition is checked as a file's job.
func TestDeadlineOfAppliedJob(t *testing.T) {
	base, err := config.Parse("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.ParseRequestJobs("body", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    deadline: {start: 1m, finish: 2m}\n  - name: b\n    schedule: '@hourly'\n"), base)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []onetick.Deadline{{Start: time.Minute, Finish: 2 * time.Minute}, {}} {
		def, err := f.Jobs[i].JobDef()
		if err != nil {
			t.Fatal(err)
		}
		if want == (onetick.Deadline{}) && strings.Contains(string(def), "Deadline") {
			t.Errorf("a job without a deadline stores one: %s", def)
		}
		j, _, err := config.JobFromDef(def)
		if err != nil || j.Deadline != want {
			t.Errorf("%s: %+v, %v; want %+v", def, j.Deadline, err, want)
		}
	}
	_, _, err = config.JobFromDef([]byte(`{"Name":"x","Schedule":"@hourly","Deadline":{"Start":2000000000,"Finish":1000000000}}`))
	if err == nil || !strings.Contains(err.Error(), "jobs[0] (x).deadline.finish: must not be shorter than start (2s)") {
		t.Errorf("a stored definition with finish before start: %v", err)
	}
	_, err = config.ParseRequestJobs("body", []byte("jobs:\n  - name: a\n    schedule: '@hourly'\n    deadline: {start: 0.5s}\n"), base)
	if err == nil || !strings.Contains(err.Error(), "body:4: jobs[0] (a).deadline.start: must be at least 1s, got 500ms") {
		t.Errorf("a request's bad deadline: %v", err)
	}
}

func TestDeadlineErrors(t *testing.T) {
	t.Setenv("HOOK_SECRET", hookSecret)
	const job = "jobs:\n  - name: a\n    schedule: '@hourly'\n"
	for doc, want := range map[string]string{
		job + "    deadline: {start: 10m, finish: 5m}\n":                             "c.yaml:4: jobs[0] (a).deadline.finish: must not be shorter than start (10m0s)",
		job + "    deadline:\n      start: 5m\n      finish: 1m\n":                   "c.yaml:6: jobs[0] (a).deadline.finish: must not be shorter than start (5m0s)",
		job + "    deadline:\n      start: 500ms\n":                                  "c.yaml:5: jobs[0] (a).deadline.start: must be at least 1s, got 500ms",
		job + "    deadline:\n      finish: -1m\n":                                   "c.yaml:5: jobs[0] (a).deadline.finish: must be at least 1s, got -1m0s",
		job + "    deadline: {}\n":                                                   "c.yaml:4: jobs[0] (a).deadline: names no deadline",
		job + "    deadline: 5m\n":                                                   "c.yaml:4: jobs[0] (a).deadline: must be a mapping",
		job + "    deadline:\n      start: 5\n":                                      "c.yaml:5: jobs[0] (a).deadline.start: is a bare number",
		job + "    deadline:\n      begin: 5m\n":                                     "c.yaml:5: jobs[0] (a).deadline.begin: unknown field",
		"deadlines:\n  check_every: 100ms\n":                                         "c.yaml:2: deadlines.check_every: must be between 1s and 1h0m0s, got 100ms",
		"deadlines:\n  lookback: 48h\n":                                              "c.yaml:2: deadlines.lookback: must be between 0s and 24h0m0s",
		"deadlines:\n  every: 1m\n":                                                  `c.yaml:2: deadlines.every: unknown field`,
		"deadlines:\n  notify:\n    secrets: [${HOOK_SECRET}]\n":                     "c.yaml:2: deadlines.notify.url: is required",
		"deadlines:\n  notify:\n    url: ftp://h/x\n    secrets: [${HOOK_SECRET}]\n": "c.yaml:3: deadlines.notify.url: must be an absolute http:// or https:// URL",
		"deadlines:\n  notify:\n    url: https://h/x\n":                              "c.yaml:2: deadlines.notify.secrets: at least one secret is required",
		"deadlines:\n  notify:\n    url: https://h/x\n    secrets:\n      - ${HOOK_SECRET}\n      - whsec_c2hvcnQ=\n": "c.yaml:6: deadlines.notify.secrets[1]: decodes to 5 bytes",
		"deadlines:\n  notify:\n    url: https://h/x\n    secrets: [${HOOK_SECRET}]\n    timeout: 1h\n":               "c.yaml:5: deadlines.notify.timeout: must be between 0 and 5m0s",
		"deadlines:\n  notify: [https://h/x]\n": "c.yaml:2: deadlines.notify: must be a mapping",
	} {
		_, err := config.Parse("c.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %q", doc, err, want)
		}
		if err != nil && strings.Contains(err.Error(), hookSecret[6:]) {
			t.Errorf("%q: the error shows the secret: %v", doc, err)
		}
	}
}

// The fast reader of large job lists gives the same deadlines as the
// YAML decoder, inline or as a block.
func TestDeadlineFastJobs(t *testing.T) {
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range 50 {
		b.WriteString("  - name: j" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "\n    schedule: '@hourly'\n")
	}
	b.WriteString("  - name: inline\n    schedule: '@hourly'\n    deadline: {start: 2m}\n")
	b.WriteString("  - name: block\n    schedule: '@hourly'\n    deadline:\n      finish: 3m\n")
	b.WriteString("  - name: bad\n    schedule: '@hourly'\n    deadline: {finish: 1ms}\n")
	_, err := config.Parse("big.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "big.yaml:111: jobs[52] (bad).deadline.finish: must be at least 1s") {
		t.Fatalf("%v", err)
	}
	f, err := config.Parse("big.yaml", []byte(strings.Replace(b.String(), "finish: 1ms", "finish: 1s", 1)))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.OneTickJobs()
	if err != nil {
		t.Fatal(err)
	}
	if jobs[50].Deadline != (onetick.Deadline{Start: 2 * time.Minute}) || jobs[51].Deadline != (onetick.Deadline{Finish: 3 * time.Minute}) {
		t.Fatalf("deadlines %+v %+v", jobs[50].Deadline, jobs[51].Deadline)
	}
}
