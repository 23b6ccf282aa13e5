package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// fastCases are documents whose job list the list reader takes, partly
// takes or refuses; each must parse exactly as the decoder alone parses it.
var fastCases = []string{
	"jobs:\n  - name: a\n    schedule: \"0 * * * * *\"\n    stream: s\n",
	"jobs:\n- name: a\n  schedule: '@every 1m'\n- name: b\n  schedule: '@daily'\n",
	"backend:\n  memory: {}\njobs:\n  - name: a\n    schedule: '0 2 * * *'\n\n  # a comment\n  - name: b\n    schedule: '0 3 * * *'\n    max_len: 10\n    max_catchup: 0x10\nlease:\n  ttl: 10s\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n    payload:\n      n: 1\n  - name: b\n    schedule: '0 3 * * *'\n    payload: {x: [1, 2]}\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *' # comment\n  - name: b # c\n    schedule: \"0 3 * * *\"\n",
	"jobs:\n  - &d\n    name: a\n    schedule: '0 2 * * *'\n  - <<: *d\n    name: b\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n  - name: a\n    schedule: '0 2 * * *'\n",
	"jobs:\n  - name: a\n    name: b\n    schedule: x\n",
	"jobs:\n  - name: a\n    schedule: \"0 2 * * *\\t\"\n",
	"jobs:\n  - name: a\n    schedule: 'it''s'\n",
	"jobs:\n  - name: a\n    schedul: '0 2 * * *'\n    grace: 5\n    prefer: sometimes\n",
	"jobs:\n  - name: a b\n    schedule: 0 2 * * *\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n    max_len: -1\n    grace: 1s\n    prefer: duplicate\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n    timezone: Mars/Base\n",
	"jobs:\n  - name: a\n    schedule: 'H H * * * *'\n  - name: b\n    schedule: 'H H * * * *'\n",
	"jobs:\n  - name: ${NAME}\n    schedule: ${S:-@daily}\n    max_len: ${N}\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n  -\n  - name: c\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n    run:\n      command: {argv: [echo, hi]}\n",
	"jobs:\n  - name: a\n    schedule: \"0 2 * * *\"\r\n",
	"jobs:\n  - name: é\n    schedule: '0 2 * * *'\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n     extra: 1\n",
	"jobs:\n  - name: a\n    schedule: 0 2\n      * * *\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\njobs:\n  - name: b\n",
	"jobs: # the jobs\n  - name: a\n    schedule: '0 2 * * *'\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n---\njobs: []\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n\tx: 1\n",
	"jobs:\n  - name: a\n    schedule: *x\n",
	"jobs:\n  - name: true\n    schedule: '0 2 * * *'\n    stream: 12\n    payload: null\n",
	"jobs:\n  - name: a\n    schedule: '0 2 * * *'\n    max_catchup: 1.5\n    max_len: ~\n",
	"jobs:\n    - name: a\n      schedule: '0 2 * * *'\n    - name: b\n      schedule: '0 2 * * *'\n",
	"jobs:\n  - name: a:b\n    schedule: '0 2 * * *'\n  - name: c\n    schedule: x: y\n",
}

// checkSame parses data with and without the list reader and fails when
// anything differs.
func checkSame(t *testing.T, data []byte) {
	t.Helper()
	env := envMap(map[string]string{"NAME": "n", "N": "5"})
	fast, errFast := parse("x.yaml", data, env)
	noFastJobs = true
	slow, errSlow := parse("x.yaml", data, env)
	noFastJobs = false
	if fmt.Sprint(errFast) != fmt.Sprint(errSlow) {
		t.Fatalf("%q:\nwith the list reader: %v\nwithout: %v", data, errFast, errSlow)
	}
	if (fast == nil) != (slow == nil) {
		t.Fatalf("%q: File %v vs %v", data, fast, slow)
	}
	if fast == nil {
		return
	}
	if !reflect.DeepEqual(fast.Jobs, slow.Jobs) || !reflect.DeepEqual(fast.Backend, slow.Backend) || fast.Lease != slow.Lease ||
		!reflect.DeepEqual(fast.Metrics, slow.Metrics) || !reflect.DeepEqual(fast.HTTP, slow.HTTP) {
		t.Fatalf("%q: files differ:\n%+v\n%+v", data, fast, slow)
	}
	for i := range fast.Jobs {
		for _, k := range jobKeys {
			if a, b := fast.jobLine(i, k), slow.jobLine(i, k); a != b {
				t.Fatalf("%q: line of jobs[%d].%s: %d vs %d", data, i, k, a, b)
			}
		}
	}
	ja, errA := fast.OneTickJobs()
	jb, errB := slow.OneTickJobs()
	if fmt.Sprint(errA) != fmt.Sprint(errB) || len(ja) != len(jb) {
		t.Fatalf("%q: OneTickJobs differ: %v vs %v", data, errA, errB)
	}
	for i := range ja {
		if ja[i].Name != jb[i].Name || fmt.Sprint(ja[i].Schedule) != fmt.Sprint(jb[i].Schedule) {
			t.Fatalf("%q: job %d differs", data, i)
		}
	}
}

func TestFastJobsSameAsDecoder(t *testing.T) {
	docs := append([]string{fullExample}, fastCases...)
	for _, c := range errCases {
		docs = append(docs, c.yaml)
	}
	for _, d := range docs {
		checkSame(t, []byte(d))
	}
}

// The list reader takes the plain form by itself (not through the decoder).
func TestFastJobsTakesPlainLists(t *testing.T) {
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range 3 {
		fmt.Fprintf(&b, "  - name: j%d\n    schedule: \"0 * * * * *\"\n    stream: shared\n", i)
	}
	rest, blk, ok := cutJobs([]byte(b.String()))
	if !ok {
		t.Fatal("not cut")
	}
	if strings.TrimSpace(string(rest)) != "jobs:" {
		t.Fatalf("rest %q", rest)
	}
	n := 0
	if !blk.items(func(*yaml.Node) bool {
		n++
		return true
	}) || n != 3 {
		t.Fatalf("items: %d", n)
	}
	if _, ok := blk.simple([][]byte{[]byte("  - name: j0"), []byte("    schedule: \"0 * * * * *\"")}, 2); !ok {
		t.Fatal("a plain item was not taken by itself")
	}
}

func FuzzFastJobs(f *testing.F) {
	for _, d := range fastCases {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSame(t, data) })
}
