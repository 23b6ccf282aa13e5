package chaos

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestReadNamesTheBadLine(t *testing.T) {
	good := `{"t":"2026-12-03T10:00:00Z","kind":"run"}`
	for _, c := range []struct {
		name, text, want string
	}{
		{"not JSON", good + "\n" + "kill -9 r1\n", "history line 2: invalid character"},
		{"truncated", good + "\n\n" + `{"t":"2026-12-03T10:00:01Z","kind":"fau`, "history line 3: unexpected end of JSON input"},
		{"no kind", good + "\n" + `{"t":"2026-12-03T10:00:01Z"}`, "history line 2: no kind"},
		{"bad time", `{"t":"yesterday","kind":"end"}`, "history line 1: parsing time"},
		{"wrong type", good + "\n" + `{"t":"2026-12-03T10:00:01Z","kind":"enqueue","slot":"soon"}`, "history line 2: json: cannot unmarshal string into Go struct field Event.slot of type int64"},
		{"bad ok", good + "\n" + `{"t":"2026-12-03T10:00:01Z","kind":"run_end","ok":"yes"}`, "history line 2:"},
		{"bad duration", `{"t":"2026-12-03T10:00:00Z","kind":"run","jobs":[{"name":"a","every":"1s"}]}`, "history line 1:"},
		{"an array", `[1,2]`, "history line 1:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, err := Read(strings.NewReader(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Read = %d events, %v; want an error containing %q", len(ev), err, c.want)
			}
		})
	}
}

func TestWriterRoundTrip(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.now = func() time.Time { return at(42 * time.Millisecond) }
	want := clean().events(Event{Job: "miss", Replica: "r1", Value: 0})
	for _, e := range want {
		w.Add(e)
	}
	w.Add(Event{Kind: KindEnd}) // no T: the writer's clock
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want)+1 || !got[len(got)-1].T.Equal(at(42*time.Millisecond)) {
		t.Fatalf("read %d events (last %v), wrote %d", len(got), got[len(got)-1], len(want)+1)
	}
	if got[0].Bounds == nil || *got[0].Bounds != *want[0].Bounds || len(got[0].Jobs) != 3 || got[0].Jobs[0] != want[0].Jobs[0] {
		t.Fatalf("run event read back as %+v", got[0])
	}
	// The history read back judges as the one written: the first end
	// event counts, the later one changes nothing.
	wantOnly(t, Check(got), none, none)
}

// FuzzRead: no input panics Read or Check; Read either errors naming a
// line or returns events that all have a kind.
func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	w := NewWriter(&b)
	for _, e := range cutRun(clean()).events(Event{Job: "miss", Value: 1}) {
		w.Add(e)
	}
	if err := w.Flush(); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"t":"2026-12-03T10:00:00Z","kind":"leader","phase":"acquired","epoch":-3}` + "\n"))
	f.Add([]byte(`{"t":"2026-12-03T10:00:00Z","kind":"run","jobs":[{"name":"a","every":1,"prefer":"missed","from":1}]}` + "\n" +
		`{"t":"2026-12-03T10:00:09Z","kind":"end"}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := Read(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "history line ") && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, e := range ev {
			if e.Kind == "" {
				t.Fatalf("event without a kind: %+v", e)
			}
		}
		r := Check(ev)
		if err := r.Print(&bytes.Buffer{}, PrintOptions{Windows: true}); err != nil {
			t.Fatal(err)
		}
	})
}
