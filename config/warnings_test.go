package config

import (
	"strings"
	"testing"
)

// A job's preference and its run block's overlap policy that pull apart
// are explained, each on the line that says it; agreeing ones are not.
func TestWarnings(t *testing.T) {
	f, err := Parse("w.yaml", []byte(`jobs:
  - name: dup-skip
    schedule: "@every 1s"
    prefer: duplicate
    max_catchup: 20
    run:
      command: [/bin/true]
      timeout: 1s
      overlap: skip
  - name: dup-default
    schedule: "@every 1s"
    prefer: duplicate
    run:
      http: {url: "https://example.com/h", secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=]}
  - name: dup-no-timeout
    schedule: "@every 1s"
    prefer: duplicate
    run:
      command: [/bin/true]
      overlap: queue
  - name: missed-queue
    schedule: "@every 1s"
    grace: 30s
    run:
      command: [/bin/true]
      overlap: queue
  - name: missed-skip
    schedule: "@every 1s"
    run:
      command: [/bin/true]
  - name: dup-allow
    schedule: "@every 1s"
    prefer: duplicate
    run:
      command: [/bin/true]
      overlap: allow
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range f.Warnings() {
		got = append(got, w.Error())
	}
	want := []string{
		"w.yaml:9: jobs[0] (dup-skip).run.overlap: skip does not drop ticks of a job that prefers duplicate: a tick due while a run of the job is in flight waits, and the job's ticks run one at a time in slot order (at most max_catchup, 20, wait",
		"w.yaml:18: jobs[2] (dup-no-timeout).run.timeout: is not set: with prefer: duplicate a run that never ends holds every later tick",
		"w.yaml:26: jobs[3] (missed-queue).run.overlap: queue with prefer: missed: the waiting tick runs when the previous run ends, possibly later than grace (30s)",
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d:\n%s\nwant it to start with\n%s", i, got[i], want[i])
		}
	}
}
