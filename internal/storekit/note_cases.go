package storekit

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/onetick/onetick"
)

// NoteCase is a story of events applied in order (Note) to a fresh record
// of the tick "j:60000" of job "j", and what the record is after it. A
// store that applies Note's rules by its own means (Redis folds events
// its scripts wrote into a log) runs the same table: NoteCases is the one
// list of the rules' cases, so that a store's path to Note and Note itself
// cannot drift apart unnoticed. The events' At is the store's clock, so
// the cases do not depend on it.
type NoteCase struct {
	Name   string
	Events []onetick.RunEvent
	// Fate and Reason of the record after the last event.
	Fate   onetick.Fate
	Reason string
	// Whats are the kept events' What, oldest first.
	Whats []string
	// Dropped counts the events dropped after the first.
	Dropped int
	// Check, if set, looks at the rest of the record.
	Check func(r onetick.Run) error
}

// NoteCaseJob, NoteCaseSlot and NoteCaseTick name the record the cases
// write.
const (
	NoteCaseJob  = "j"
	NoteCaseSlot = onetick.Slot(60000)
	NoteCaseTick = "j:60000"
)

// NoteCases returns the ledger rules' table of cases.
func NoteCases() []NoteCase {
	ev := func(what string, attempt int, detail string) onetick.RunEvent {
		return onetick.RunEvent{What: what, Worker: "w1", Attempt: attempt, Detail: detail}
	}
	enq := onetick.RunEvent{What: onetick.EventEnqueued, Epoch: 7, Replica: "r1"}
	many := []onetick.RunEvent{enq}
	for i := 1; i < onetick.MaxRunEvents+5; i++ {
		many = append(many, ev(onetick.EventRetried, i, "exit status 1"))
	}
	longDetail := strings.Repeat("é", onetick.MaxEventDetail) // 2 bytes a rune
	longOutput := strings.Repeat("é", onetick.MaxEventOutput) + "end"
	outputs := []onetick.RunEvent{enq}
	for i := 1; i <= onetick.OutputEvents+2; i++ {
		o := ev(onetick.EventRetried, i, "boom")
		o.Output = longOutput
		outputs = append(outputs, ev(onetick.EventStarted, i, ""), o)
	}
	exit := 3
	withResult := ev(onetick.EventSucceeded, 1, "")
	withResult.Result = onetick.Result{Exit: &exit, Status: 201, Duration: 1500 * time.Millisecond, Output: "ok\n"}
	return []NoteCase{
		{Name: "enqueued", Events: []onetick.RunEvent{enq}, Fate: onetick.FateEnqueued,
			Whats: []string{onetick.EventEnqueued}, Check: func(r onetick.Run) error {
				if e := r.Events[0]; e.Epoch != 7 || e.Replica != "r1" || e.Worker != "" {
					return fmt.Errorf("event %+v: want epoch 7, replica r1, no worker", e)
				}
				return nil
			}},
		{Name: "paused", Events: []onetick.RunEvent{{What: onetick.EventPaused, Epoch: 7, Replica: "r1"}},
			Fate: onetick.FatePaused, Whats: []string{onetick.EventPaused}},
		{Name: "skipped by the leader", Events: []onetick.RunEvent{{What: onetick.EventSkipped, Epoch: 7, Replica: "r1", Detail: onetick.SkipGrace}},
			Fate: onetick.FateSkipped, Reason: onetick.SkipGrace, Whats: []string{onetick.EventSkipped}},
		{Name: "run and succeeded", Events: []onetick.RunEvent{enq, ev(onetick.EventStarted, 1, ""), withResult},
			Fate: onetick.FateSucceeded, Whats: []string{onetick.EventEnqueued, onetick.EventStarted, onetick.EventSucceeded},
			Check: func(r onetick.Run) error {
				e := r.Events[2]
				if e.Worker != "w1" || e.Attempt != 1 || e.Exit == nil || *e.Exit != 3 || e.Status != 201 ||
					e.Duration != 1500*time.Millisecond || e.Output != "ok\n" {
					return fmt.Errorf("outcome %+v: want worker w1, attempt 1 and its result", e)
				}
				return nil
			}},
		{Name: "retried, released, dead, replayed", Events: []onetick.RunEvent{enq, ev(onetick.EventStarted, 1, ""),
			ev(onetick.EventRetried, 1, "exit status 3"), ev(onetick.EventStarted, 2, ""), ev(onetick.EventReleased, 2, ""),
			ev(onetick.EventStarted, 2, ""), ev(onetick.EventDead, 2, "boom"), {What: onetick.EventReplayed}},
			Fate: onetick.FateEnqueued, Whats: []string{onetick.EventEnqueued, onetick.EventStarted, onetick.EventRetried,
				onetick.EventStarted, onetick.EventReleased, onetick.EventStarted, onetick.EventDead, onetick.EventReplayed}},
		{Name: "retrying keeps the error", Events: []onetick.RunEvent{enq, ev(onetick.EventStarted, 1, ""), ev(onetick.EventRetried, 1, "exit status 3")},
			Fate: onetick.FateRetrying, Reason: "exit status 3", Whats: []string{onetick.EventEnqueued, onetick.EventStarted, onetick.EventRetried}},
		{Name: "dead keeps the error", Events: []onetick.RunEvent{enq, ev(onetick.EventDead, 4, "delivery limit")},
			Fate: onetick.FateDead, Reason: "delivery limit", Whats: []string{onetick.EventEnqueued, onetick.EventDead}},
		{Name: "skipped_done keeps the fate", Events: []onetick.RunEvent{enq, ev(onetick.EventStarted, 1, ""),
			ev(onetick.EventSucceeded, 1, ""), ev(onetick.EventSkippedDone, 1, "")},
			Fate: onetick.FateSucceeded, Whats: []string{onetick.EventEnqueued, onetick.EventStarted, onetick.EventSucceeded, onetick.EventSkippedDone}},
		{Name: "skipped for overlap", Events: []onetick.RunEvent{enq, ev(onetick.EventSkippedOverlap, 1, "")},
			Fate: onetick.FateSkipped, Reason: onetick.SkipOverlap, Whats: []string{onetick.EventEnqueued, onetick.EventSkippedOverlap}},
		{Name: "a worker's event without a record", Events: []onetick.RunEvent{ev(onetick.EventStarted, 3, "")},
			Fate: onetick.FateRunning, Whats: []string{onetick.EventStarted}},
		{Name: "the first and the newest events kept", Events: many, Fate: onetick.FateRetrying, Reason: "exit status 1",
			Dropped: len(many) - onetick.MaxRunEvents, Check: func(r onetick.Run) error {
				if len(r.Events) != onetick.MaxRunEvents || r.Events[0].What != onetick.EventEnqueued ||
					r.Events[1].Attempt != len(many)-onetick.MaxRunEvents+1 || r.Events[len(r.Events)-1].Attempt != len(many)-1 {
					return fmt.Errorf("%d events, first %s, then attempts %d .. %d", len(r.Events), r.Events[0].What,
						r.Events[1].Attempt, r.Events[len(r.Events)-1].Attempt)
				}
				return nil
			}},
		{Name: "a detail cut on a rune", Events: []onetick.RunEvent{enq, ev(onetick.EventDead, 1, longDetail)},
			Fate: onetick.FateDead, Reason: longDetail[:onetick.MaxEventDetail], Whats: []string{onetick.EventEnqueued, onetick.EventDead},
			Check: func(r onetick.Run) error {
				if d := r.Events[1].Detail; len(d) != onetick.MaxEventDetail || !utf8.ValidString(d) {
					return fmt.Errorf("detail of %d bytes (valid UTF-8: %v)", len(d), utf8.ValidString(d))
				}
				return nil
			}},
		{Name: "outputs: the newest keep their tails", Events: outputs, Fate: onetick.FateRetrying, Reason: "boom",
			Check: func(r onetick.Run) error {
				with := 0
				for i, e := range r.Events {
					if e.Output == "" {
						continue
					}
					with++
					if e.Attempt <= 2 || len(e.Output) > onetick.MaxEventOutput || !strings.HasSuffix(e.Output, "éend") || !utf8.ValidString(e.Output) {
						return fmt.Errorf("event %d (attempt %d): output of %d bytes kept", i, e.Attempt, len(e.Output))
					}
				}
				if with != onetick.OutputEvents {
					return fmt.Errorf("%d events keep an output, want %d", with, onetick.OutputEvents)
				}
				return nil
			}},
	}
}

// Verify compares a store's record after the case's events with the case;
// the error says what differs.
func (c NoteCase) Verify(r onetick.Run) error {
	if r.Job != NoteCaseJob || r.Tick != NoteCaseTick || r.Slot != NoteCaseSlot {
		return fmt.Errorf("record of %s %s slot %d, want %s %s slot %d", r.Job, r.Tick, r.Slot, NoteCaseJob, NoteCaseTick, NoteCaseSlot)
	}
	if r.Fate != c.Fate || r.Reason != c.Reason {
		return fmt.Errorf("fate %s, reason %q; want %s, %q", r.Fate, short(r.Reason), c.Fate, short(c.Reason))
	}
	if r.Dropped != c.Dropped {
		return fmt.Errorf("%d events dropped, want %d", r.Dropped, c.Dropped)
	}
	whats := make([]string, len(r.Events))
	for i, e := range r.Events {
		whats[i] = e.What
		if e.At.IsZero() {
			return fmt.Errorf("event %d (%s) without its time", i, e.What)
		}
	}
	if c.Whats != nil && !slices.Equal(whats, c.Whats) {
		return fmt.Errorf("events %v, want %v", whats, c.Whats)
	}
	if len(r.Events) > 0 && !r.Updated.Equal(r.Events[len(r.Events)-1].At) {
		return fmt.Errorf("updated %s, the last event at %s", r.Updated, r.Events[len(r.Events)-1].At)
	}
	if c.Check != nil {
		return c.Check(r)
	}
	return nil
}

// short bounds a text quoted in a message.
func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
