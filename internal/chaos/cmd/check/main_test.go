package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/chaos"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// history writes a small history: one job enqueued every second from
// t0+1s to t0+5s, r1 leading, and extra events; it returns the file.
func history(t *testing.T, extra ...chaos.Event) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := chaos.NewWriter(f)
	from := t0.Add(time.Second).UnixMilli()
	w.Add(chaos.Event{T: t0, Kind: chaos.KindRun, Store: "redis", Seed: 7,
		Jobs:   []chaos.JobSpec{{Name: "j", Every: time.Second, Prefer: "duplicate", From: from}},
		Bounds: &chaos.Bounds{Settle: time.Second}})
	w.Add(chaos.Event{T: t0, Kind: chaos.KindLeader, Phase: "acquired", Replica: "r1", Epoch: 1, TrustUntil: t0.Add(10 * time.Second)})
	for s := int64(0); s < 5; s++ {
		w.Add(chaos.Event{T: t0.Add(time.Duration(s+1) * time.Second), Kind: chaos.KindEnqueue, Job: "j", Slot: from + 1000*s, Entry: "e" + string(rune('0'+s))})
	}
	for _, e := range extra {
		w.Add(e)
	}
	w.Add(chaos.Event{T: t0.Add(6 * time.Second), Kind: chaos.KindEnd})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckCommand(t *testing.T) {
	twice := chaos.Event{T: t0.Add(3 * time.Second), Kind: chaos.KindEnqueue, Job: "j", Slot: t0.Add(2 * time.Second).UnixMilli(), Entry: "again"}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"t":"2026-12-03T10:00:00Z","kind":"run"}`+"\n"+`{"t":"2026-12-03T10:00:01Z","kind":"enqueue","slot":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		args        []string
		stdin       string
		code        int
		out, errOut string
	}{
		{"clean", []string{history(t)}, "", 0, "verdict: PASS (0 violations, 0 documented)", ""},
		{"a violation", []string{history(t, twice)}, "", 1, "VIOLATION enqueued_twice job=j", ""},
		{"json", []string{"-json", history(t, twice)}, "", 1, `"Kind": "enqueued_twice"`, ""},
		{"stdin", []string{"-"}, `{"t":"2026-12-03T10:00:00Z","kind":"end"}`, 1, "no run event", ""},
		{"a bad line", []string{bad}, "", 2, "", "bad.jsonl: history line 2: json: cannot unmarshal"},
		{"no file", []string{filepath.Join(t.TempDir(), "none.jsonl")}, "", 2, "", "no such file"},
		{"no argument", nil, "", 2, "", "usage: check"},
		{"two arguments", []string{"a", "b"}, "", 2, "", "usage: check"},
		{"a bad flag", []string{"-x", "a"}, "", 2, "", "flag provided but not defined: -x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(c.args, strings.NewReader(c.stdin), &out, &errOut)
			if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errOut.String(), c.errOut) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant stdout with %q, stderr with %q", code, c.code, out.String(), errOut.String(), c.out, c.errOut)
			}
		})
	}
}

func TestJSONReport(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"-json", history(t)}, nil, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	var r chaos.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Store != "redis" || r.Seed != 7 || r.Totals.Enqueued != 5 || r.Totals.SlotsExpected != 5 || !r.OK() {
		t.Fatalf("report %+v", r)
	}
}
