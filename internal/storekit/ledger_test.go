package storekit_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

func TestNoteFates(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	r := storekit.NewRun(onetick.Tick{Job: "a", Slot: 5}, "a:5", "")
	for _, c := range []struct {
		what, detail string
		fate         onetick.Fate
		reason       string
	}{
		{onetick.EventEnqueued, "", onetick.FateEnqueued, ""},
		{onetick.EventStarted, "", onetick.FateRunning, ""},
		{onetick.EventRetried, "exit status 3", onetick.FateRetrying, "exit status 3"},
		{onetick.EventStarted, "", onetick.FateRunning, ""},
		{onetick.EventReleased, "", onetick.FateEnqueued, ""},
		{onetick.EventStarted, "", onetick.FateRunning, ""},
		{onetick.EventDead, "boom", onetick.FateDead, "boom"},
		{onetick.EventReplayed, "", onetick.FateEnqueued, ""},
		{onetick.EventStarted, "", onetick.FateRunning, ""},
		{onetick.EventSucceeded, "", onetick.FateSucceeded, ""},
		{onetick.EventSkippedDone, "", onetick.FateSucceeded, ""},
	} {
		at = at.Add(time.Second)
		storekit.Note(&r, onetick.RunEvent{What: c.what, At: at, Detail: c.detail})
		if r.Fate != c.fate || r.Reason != c.reason || !r.Updated.Equal(at) {
			t.Fatalf("after %s: fate %s reason %q updated %s; want %s %q %s", c.what, r.Fate, r.Reason, r.Updated, c.fate, c.reason, at)
		}
	}
	if n := len(r.Events); n != 11 || r.Events[0].What != onetick.EventEnqueued {
		t.Fatalf("%d events, first %+v", n, r.Events[0])
	}
	o := storekit.NewRun(onetick.Tick{Job: "a", Slot: 6}, "a:6", "")
	storekit.Note(&o, onetick.RunEvent{What: onetick.EventEnqueued, At: at})
	storekit.Note(&o, onetick.RunEvent{What: onetick.EventSkippedOverlap, At: at})
	if o.Fate != onetick.FateSkipped || o.Reason != onetick.SkipOverlap {
		t.Fatalf("overlap skip: %s %q", o.Fate, o.Reason)
	}
}

func TestNoteBounds(t *testing.T) {
	var r onetick.Run
	long := strings.Repeat("é", onetick.MaxEventDetail) // 2 bytes a rune
	for i := 0; i < onetick.MaxRunEvents+5; i++ {
		storekit.Note(&r, onetick.RunEvent{What: onetick.EventRetried, Attempt: i + 1, Detail: long})
	}
	if len(r.Events) != onetick.MaxRunEvents || r.Dropped != 5 {
		t.Fatalf("%d events, %d dropped", len(r.Events), r.Dropped)
	}
	if r.Events[0].Attempt != 1 || r.Events[1].Attempt != 7 || r.Events[len(r.Events)-1].Attempt != onetick.MaxRunEvents+5 {
		t.Fatalf("kept attempts %d, %d, ..., %d", r.Events[0].Attempt, r.Events[1].Attempt, r.Events[len(r.Events)-1].Attempt)
	}
	d := r.Events[0].Detail
	if len(d) != onetick.MaxEventDetail || !strings.HasSuffix(d, "é") {
		t.Fatalf("detail of %d bytes, not cut on a rune", len(d))
	}
}

func TestNoteOutput(t *testing.T) {
	var r onetick.Run
	long := strings.Repeat("é", onetick.MaxEventOutput) + "end" // 2 bytes a rune
	for i := 1; i <= onetick.OutputEvents+2; i++ {
		storekit.Note(&r, onetick.RunEvent{What: onetick.EventStarted, Attempt: i})
		storekit.Note(&r, onetick.RunEvent{What: onetick.EventRetried, Attempt: i, Result: onetick.Result{Output: long}})
	}
	with := 0
	for i, ev := range r.Events {
		if ev.Output == "" {
			continue
		}
		with++
		if len(ev.Output) > onetick.MaxEventOutput || !strings.HasSuffix(ev.Output, "éend") || !utf8.ValidString(ev.Output) {
			t.Fatalf("event %d: output of %d bytes, not the tail cut on a rune", i, len(ev.Output))
		}
		if ev.Attempt <= 2 {
			t.Fatalf("attempt %d kept its output; only the newest %d keep theirs", ev.Attempt, onetick.OutputEvents)
		}
	}
	if with != onetick.OutputEvents {
		t.Fatalf("%d events keep an output, want %d", with, onetick.OutputEvents)
	}
}

func TestSkippedRun(t *testing.T) {
	now := time.UnixMilli(10_000)
	r := storekit.SkippedRun("a", onetick.SkipRange{From: 1000, Through: 4000, Count: 4, Reason: onetick.SkipGrace}, 7, "r1", now)
	if r.Tick != "a:skipped:1000-4000" || r.Fate != onetick.FateSkipped || r.Reason != onetick.SkipGrace || r.Count != 4 ||
		storekit.Newest(r) != 4000 || r.Events[0].Epoch != 7 || r.Events[0].Replica != "r1" {
		t.Fatalf("%+v", r)
	}
	if _, err := onetick.ParseTickID(r.Tick); err == nil {
		t.Fatalf("a skipped range's identity %q reads as a tick identity", r.Tick)
	}
}

func TestCursorAndOrder(t *testing.T) {
	r := onetick.Run{Slot: 1234, Tick: "a:trigger:k 1"}
	s, tick, err := storekit.ParseCursor(storekit.Cursor(r))
	if err != nil || s != 1234 || tick != r.Tick {
		t.Fatalf("cursor read back as %d %q %v", s, tick, err)
	}
	for _, bad := range []string{"", "!!", "MTIz", "eCBh"} {
		if _, _, err := storekit.ParseCursor(bad); err != storekit.ErrBadCursor {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
	a, b := onetick.Run{Slot: 2, Tick: "a:2"}, onetick.Run{Slot: 1, Tick: "a:1"}
	if !storekit.Before(a, b) || storekit.Before(b, a) || !storekit.After(b, a.Slot, a.Tick) {
		t.Fatal("newest slot first")
	}
	q := onetick.RunQuery{From: 2, To: 5, Fate: onetick.FateDead}
	if !storekit.Match(q, onetick.Run{Slot: 1, Through: 3, Fate: onetick.FateDead}) || storekit.Match(q, onetick.Run{Slot: 6, Fate: onetick.FateDead}) ||
		storekit.Match(q, onetick.Run{Slot: 3, Fate: onetick.FateSucceeded}) {
		t.Fatal("Match")
	}
	if storekit.Limit(onetick.RunQuery{}) != onetick.DefaultRunLimit || storekit.Limit(onetick.RunQuery{Limit: 1e6}) != onetick.MaxRunLimit {
		t.Fatal("Limit")
	}
}

func TestClaimNotes(t *testing.T) {
	now := time.UnixMilli(50_000)
	l := onetick.Lease{Holder: "r1", Epoch: 9}
	tk := onetick.Tick{Job: "a", Slot: 20_000, Skipped: []onetick.SkipRange{{From: 1000, Through: 9000, Count: 9, Reason: onetick.SkipGrace}}}
	if _, ok := storekit.ClaimNotes(tk, "a:20000", storekit.Decision{Outcome: onetick.Claimed}, l, now); ok {
		t.Fatal("a retried claim (no record written) notes the ledger")
	}
	n, ok := storekit.ClaimNotes(tk, "a:20000", storekit.Decision{Outcome: onetick.Claimed, Record: "t"}, l, now)
	if !ok || n.Fresh.Tick != "a:20000" || n.Fresh.Slot != 20_000 || n.Event.What != onetick.EventEnqueued ||
		n.Event.Epoch != 9 || n.Event.Replica != "r1" || !n.Event.At.Equal(now) || len(n.Skipped) != 1 || n.Skipped[0].Count != 9 {
		t.Fatalf("claimed: %+v, %v", n, ok)
	}
	n, _ = storekit.ClaimNotes(tk, "a:20000", storekit.Decision{Outcome: onetick.Paused, Record: "t|p"}, l, now)
	if n.Event.What != onetick.EventPaused || len(n.Skipped) != 1 {
		t.Fatalf("paused: %+v", n)
	}
}

func TestJobs(t *testing.T) {
	got := storekit.Jobs([]onetick.Tick{{Job: "b"}, {Job: "a"}, {Job: "b"}, {Job: "c"}, {Job: "a"}})
	if strings.Join(got, ",") != "b,a,c" {
		t.Fatalf("Jobs = %v", got)
	}
	var many []onetick.Tick
	for i := 0; i < 40; i++ {
		many = append(many, onetick.Tick{Job: strconv.Itoa(i % 20)})
	}
	if got := storekit.Jobs(many); len(got) != 20 || got[0] != "0" || got[19] != "19" {
		t.Fatalf("Jobs of 20 jobs = %v", got)
	}
}

func TestNoteCases(t *testing.T) {
	for _, c := range storekit.NoteCases() {
		t.Run(c.Name, func(t *testing.T) {
			r := storekit.RunOf(&worker.Delivery{Job: storekit.NoteCaseJob, Slot: storekit.NoteCaseSlot, Tick: storekit.NoteCaseTick})
			at := time.UnixMilli(1_000_000)
			for _, ev := range c.Events {
				at = at.Add(time.Second)
				ev.At = at
				storekit.Note(&r, ev)
			}
			if err := c.Verify(r); err != nil {
				t.Fatal(err)
			}
		})
	}
}
