package chaos

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the start of every hand-made history.
var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// ms is the slot (Unix ms) at t0 plus d.
func ms(d time.Duration) int64 { return at(d).UnixMilli() }

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// hist builds a history: a clean run of 10 s unless changed.
type hist struct {
	ev     []Event
	bounds Bounds
	jobs   []JobSpec
	length time.Duration
}

// clean returns a clean history: r1 leads (epoch 7) the whole run,
// renewing every second; jobs "dup" (prefer duplicate, run), "dupq"
// (prefer duplicate, enqueued only) and "miss" (prefer missed), every
// second from t0+1s; each slot enqueued 10 ms after it is due, each dup
// slot run 20-50 ms after, on r2; the end at t0+10s, Settle 2 s, so slots
// t0+1s..t0+8s are expected.
func clean() *hist {
	h := &hist{
		bounds: Bounds{MaxSkew: 100 * time.Millisecond, Settle: 2 * time.Second},
		jobs: []JobSpec{
			{Name: "dup", Every: time.Second, Prefer: "duplicate", Run: true, From: ms(time.Second)},
			{Name: "dupq", Every: time.Second, Prefer: "duplicate", From: ms(time.Second)},
			{Name: "miss", Every: time.Second, Prefer: "missed", Grace: time.Second, From: ms(time.Second)},
		},
		length: 10 * time.Second,
	}
	h.add(Event{T: at(0), Kind: KindLeader, Phase: "acquired", Replica: "r1", Epoch: 7, TrustUntil: at(2700 * time.Millisecond)})
	for s := time.Second; s < h.length; s += time.Second {
		h.add(Event{T: at(s), Kind: KindLeader, Phase: "renewed", Replica: "r1", Epoch: 7, TrustUntil: at(s + 2700*time.Millisecond)})
		if s > 8*time.Second {
			continue
		}
		for _, j := range []string{"dup", "dupq", "miss"} {
			h.add(Event{T: at(s + 10*time.Millisecond), Kind: KindEnqueue, Job: j, Slot: ms(s), Tick: j + ":" + itoa(ms(s)), Entry: itoa(ms(s)) + "-0", Epoch: 7})
		}
		h.add(Event{T: at(s + 20*time.Millisecond), Kind: KindRunStart, Job: "dup", Slot: ms(s), Tick: "dup:" + itoa(ms(s)), Attempt: 1, Worker: "r2", PID: 100 + int(s/time.Second)})
		h.add(Event{T: at(s + 50*time.Millisecond), Kind: KindRunEnd, Job: "dup", Slot: ms(s), Tick: "dup:" + itoa(ms(s)), Attempt: 1, Worker: "r2", PID: 100 + int(s/time.Second), OK: yes()})
	}
	return h
}

func (h *hist) add(e ...Event) *hist { h.ev = append(h.ev, e...); return h }

// drop removes the events for which f is true.
func (h *hist) drop(f func(Event) bool) *hist {
	var keep []Event
	for _, e := range h.ev {
		if !f(e) {
			keep = append(keep, e)
		}
	}
	h.ev = keep
	return h
}

// events returns the history with its run event first and its end last
// (and the final counters given).
func (h *hist) events(counters ...Event) []Event {
	b := h.bounds
	out := []Event{{T: t0.Add(-time.Millisecond), Kind: KindRun, Store: "test", Seed: 1, Jobs: h.jobs, Bounds: &b}}
	out = append(out, h.ev...)
	out = append(out, Event{T: at(h.length), Kind: KindEnd})
	for _, c := range counters {
		c.Kind, c.Name = KindCounter, MissedCounter
		if c.T.IsZero() {
			c.T = at(h.length + time.Millisecond)
		}
		out = append(out, c)
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// kinds returns the kinds of findings, in order.
func kinds(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}

// wantOnly asserts the report has exactly the violations and documented
// cases of the kinds given, and prints it on failure.
func wantOnly(t *testing.T, r Report, violations, documented []string) {
	t.Helper()
	got, gotDoc := kinds(r.Violations), kinds(r.Documented)
	if strings.Join(got, ",") != strings.Join(violations, ",") || strings.Join(gotDoc, ",") != strings.Join(documented, ",") {
		var b bytes.Buffer
		_ = r.Print(&b, PrintOptions{Windows: true})
		t.Fatalf("violations %q, documented %q; want %q and %q\n%s", got, gotDoc, violations, documented, b.String())
	}
	if r.OK() != (len(violations) == 0) {
		t.Fatalf("OK() = %v with %d violations", r.OK(), len(violations))
	}
}
