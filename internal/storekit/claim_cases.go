package storekit

import (
	"context"
	"fmt"
	"time"

	"github.com/onetick/onetick"
)

// The table of cases: the kit's tests check Decide, Pause and Resume
// against it, and each store's tests set its state up for every case and
// run the store's real claim, pause and resume, so that every store, the
// Redis Lua included, answers as the kit decides.

// RecordState is the record a tick has before or after a claim case.
type RecordState int

// The records of a claim case.
const (
	NoRecord        RecordState = iota // none, or the claim writes none
	OwnRecord                          // this term's claim: the lease token
	OwnPausedRecord                    // this term's paused answer: PausedToken
	OtherRecord                        // another term's claim (OtherToken)
)

// OtherToken is the record of another term's claim in the cases.
const OtherToken = "other|1"

// Token is the record's token for the term whose lease token is own; ""
// for NoRecord.
func (r RecordState) Token(own string) string {
	switch r {
	case OwnRecord:
		return own
	case OwnPausedRecord:
		return PausedToken(own)
	case OtherRecord:
		return OtherToken
	}
	return ""
}

// ClaimCase is the state a store holds before a claim of one tick, and
// what the claim answers and writes. A store runs it on one job, one
// stream and one tick at a slot in the past; Early puts the slot beyond
// the clock tolerance instead.
type ClaimCase struct {
	Name       string
	Early      bool
	OutOfOrder bool
	Record     RecordState
	// HasLast: the job has a last-fired slot, LastDelta after the tick's.
	HasLast   bool
	LastDelta onetick.Slot
	// Paused: the tick's slot falls in an open pause interval of its job.
	Paused bool
	// JobDamaged: the job's last-fired slot (or, where a store keeps
	// them apart, its pause intervals) is damaged.
	JobDamaged bool
	// StreamDamaged: the stream holds another type.
	StreamDamaged bool
	// RecordDamaged: the tick's records hold another type (stores that
	// cannot hold such damage skip the case).
	RecordDamaged bool

	Want onetick.Outcome
	// Writes is the record the claim writes (NoRecord: it leaves the
	// record as it was).
	Writes RecordState
	// Moves: the job's last-fired slot becomes the tick's; Appends: the
	// stream gains the tick.
	Moves, Appends bool
}

// ClaimCases returns the claim's table of cases.
func ClaimCases() []ClaimCase {
	claimed := func(c ClaimCase) ClaimCase {
		c.Want, c.Writes, c.Moves, c.Appends = onetick.Claimed, OwnRecord, !c.OutOfOrder, true
		return c
	}
	paused := func(c ClaimCase) ClaimCase {
		c.Paused, c.Want, c.Writes, c.Moves = true, onetick.Paused, OwnPausedRecord, true
		return c
	}
	return []ClaimCase{
		claimed(ClaimCase{Name: "fresh"}),
		claimed(ClaimCase{Name: "fresh out of order", OutOfOrder: true}),
		claimed(ClaimCase{Name: "after the last fired", HasLast: true, LastDelta: -1}),
		claimed(ClaimCase{Name: "out of order before the last fired", OutOfOrder: true, HasLast: true, LastDelta: 1000}),
		claimed(ClaimCase{Name: "out of order at the last fired", OutOfOrder: true, HasLast: true}),
		claimed(ClaimCase{Name: "out of order while paused", OutOfOrder: true, Paused: true}),
		claimed(ClaimCase{Name: "out of order, job damaged", OutOfOrder: true, JobDamaged: true}),
		{Name: "early", Early: true, Want: onetick.Early},
		{Name: "early beats a record", Early: true, Record: OtherRecord, Want: onetick.Early},
		{Name: "early beats damage", Early: true, JobDamaged: true, StreamDamaged: true, Want: onetick.Early},
		{Name: "early beats damaged records", Early: true, RecordDamaged: true, Want: onetick.Early},
		{Name: "retry of own claim", Record: OwnRecord, HasLast: true, Want: onetick.Claimed},
		{Name: "retry of own claim while paused", Record: OwnRecord, Paused: true, Want: onetick.Claimed},
		{Name: "retry of own claim, job damaged", Record: OwnRecord, JobDamaged: true, Want: onetick.Claimed},
		{Name: "retry of own paused answer", Record: OwnPausedRecord, HasLast: true, Want: onetick.Paused},
		{Name: "retry of own paused answer, resumed since", Record: OwnPausedRecord, Want: onetick.Paused},
		{Name: "recorded by another term", Record: OtherRecord, Want: onetick.Duplicate},
		{Name: "recorded by another term, out of order", Record: OtherRecord, OutOfOrder: true, Want: onetick.Duplicate},
		{Name: "recorded by another term while paused", Record: OtherRecord, Paused: true, Want: onetick.Duplicate},
		{Name: "at the last fired", HasLast: true, Want: onetick.Duplicate},
		{Name: "before the last fired", HasLast: true, LastDelta: 1000, Want: onetick.Duplicate},
		{Name: "fired before paused", HasLast: true, Paused: true, Want: onetick.Duplicate},
		{Name: "fired, stream damaged", HasLast: true, StreamDamaged: true, Want: onetick.Duplicate},
		paused(ClaimCase{Name: "paused"}),
		paused(ClaimCase{Name: "paused after the last fired", HasLast: true, LastDelta: -1}),
		paused(ClaimCase{Name: "paused, stream damaged", StreamDamaged: true}),
		{Name: "job damaged", JobDamaged: true, Want: onetick.Broken},
		{Name: "job damaged while paused", JobDamaged: true, Paused: true, Want: onetick.Broken},
		{Name: "stream damaged", StreamDamaged: true, Want: onetick.Broken},
		{Name: "stream damaged out of order", StreamDamaged: true, OutOfOrder: true, Want: onetick.Broken},
		{Name: "records damaged", RecordDamaged: true, Want: onetick.Broken},
	}
}

// Tick is the case's tick for a store whose time is now: of job "j",
// stream "s", at a slot ten seconds past (an hour ahead when Early),
// kept an hour.
func (c ClaimCase) Tick(now time.Time) onetick.Tick {
	slot := onetick.SlotOf(now) - 10_000
	if c.Early {
		slot += onetick.Slot(time.Hour.Milliseconds())
	}
	return onetick.Tick{Job: "j", Slot: slot, Stream: "s", Retention: time.Hour, OutOfOrder: c.OutOfOrder}
}

// Start acquires store l's lease for holder "me" and returns it, with
// the case's tick at the store's time.
func (c ClaimCase) Start(ctx context.Context, l onetick.Leaser) (onetick.Lease, onetick.Tick, error) {
	g, err := l.Acquire(ctx, "me", time.Minute)
	if err != nil {
		return onetick.Lease{}, onetick.Tick{}, err
	}
	return g.Lease, c.Tick(g.StoreTime), nil
}

// Moved reports whether the claim of tick t moved its job's last-fired
// slot, which is last after the claim (has: the job has one).
func (c ClaimCase) Moved(t onetick.Tick, last onetick.Slot, has bool) bool {
	return has && last == t.Slot && (!c.HasLast || c.LastDelta != 0)
}

// Got is what a store's claim did in a case: its outcome, the tick's
// record afterwards (its token, "" for none), whether the job's
// last-fired slot is the tick's after the claim while it was not before,
// and how many entries the stream gained.
type Got struct {
	Outcome  onetick.Outcome
	Record   string
	Moved    bool
	Appended int
}

// Check compares what a store's claim did with the case, for the term
// whose lease token is own; the error says what differs.
func (c ClaimCase) Check(own string, g Got) error {
	rec := c.Record.Token(own)
	if c.Writes != NoRecord {
		rec = c.Writes.Token(own)
	}
	want := Got{Outcome: c.Want, Record: rec, Moved: c.Moves}
	if c.Appends {
		want.Appended = 1
	}
	if g != want {
		return fmt.Errorf("claim did %+v, want %+v", g, want)
	}
	return nil
}
