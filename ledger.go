package onetick

import (
	"context"
	"time"
)

// The run ledger: for every tick identity (a slot that was due, a trigger,
// a backfilled slot) one record of what became of it, kept by the store
// and written in the same atomic step as the change it records (the claim
// writes "enqueued", a worker's finish writes the outcome). docs/ledger.md
// is the design; stores that keep a ledger implement Ledger.

// Fate is where a tick stands now.
type Fate string

const (
	// FateEnqueued: claimed (or triggered, backfilled, replayed) and in
	// its stream; no worker runs it now.
	FateEnqueued Fate = "enqueued"
	// FatePaused: the job was paused at the slot; never run.
	FatePaused Fate = "paused"
	// FateSkipped: never run, for Run.Reason (grace, max_catchup,
	// overlap).
	FateSkipped Fate = "skipped"
	// FateRunning: a worker began an attempt.
	FateRunning Fate = "running"
	// FateRetrying: an attempt failed and the next is scheduled.
	FateRetrying Fate = "retrying"
	// FateSucceeded: an attempt succeeded.
	FateSucceeded Fate = "succeeded"
	// FateDead: the tick went to the dead letters.
	FateDead Fate = "dead"
)

// Fates lists every Fate, for validation and help texts.
var Fates = []Fate{FateEnqueued, FatePaused, FateSkipped, FateRunning, FateRetrying, FateSucceeded, FateDead}

// Reasons a range of slots is skipped (Run.Reason, SkipRange.Reason).
const (
	SkipGrace      = "grace"       // older than the job's grace (prefer: missed)
	SkipMaxCatchup = "max_catchup" // beyond the newest max_catchup late slots (prefer: duplicate)
	SkipOverlap    = "overlap"     // a worker skipped it: another run of the job was in flight
)

// What an event says (RunEvent.What).
const (
	EventEnqueued       = "enqueued"
	EventPaused         = "paused"
	EventSkipped        = "skipped"
	EventStarted        = "started"
	EventSucceeded      = "succeeded"
	EventRetried        = "retried"
	EventDead           = "dead"
	EventSkippedOverlap = "skipped_overlap"
	EventSkippedDone    = "skipped_done"
	EventReleased       = "released"
	EventReplayed       = "replayed"
)

// MaxRunEvents is how many events a record keeps: the first, and the
// newest after it.
const MaxRunEvents = 32

// MaxEventDetail caps an event's detail (an error text) in bytes.
const MaxEventDetail = 1024

// RunEvent is one step of a tick's story.
type RunEvent struct {
	What string    `json:"what"`
	At   time.Time `json:"at"` // the store's clock
	// Epoch and Replica: the claiming term (enqueued, paused, skipped).
	Epoch   Epoch  `json:"epoch,omitempty"`
	Replica string `json:"replica,omitempty"`
	// Worker and Attempt: the consumer and the attempt (started, and the
	// outcome events).
	Worker  string `json:"worker,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Detail: an error, a reason; at most MaxEventDetail bytes.
	Detail string `json:"detail,omitempty"`
	// Result: what the attempt's executor reported (succeeded, retried,
	// dead): exit code, HTTP status, duration, output's tail.
	Result
}

// Result is what one attempt reported about itself, beside its error:
// a command's exit code, an HTTP executor's response status, how long it
// ran, and the tail of its output (a command's stdout and stderr, an
// HTTP response body). Executors fill it in; a Go handler may too
// (worker.Report). A ledger keeps Output only on its newest
// OutputEvents events, each cut to its last MaxEventOutput bytes.
type Result struct {
	// Exit is a command's exit status (nil when not a command, or when
	// it did not exit on its own: killed by a signal, not started).
	Exit *int `json:"exit,omitempty"`
	// Status is an HTTP response status (0 when none).
	Status int `json:"status,omitempty"`
	// Duration is the attempt's run time by the worker's clock.
	Duration time.Duration `json:"duration,omitempty"`
	// Output is the end of what the attempt printed or answered.
	Output string `json:"output,omitempty"`
}

// MaxEventOutput caps an event's Output (its last bytes are kept).
const MaxEventOutput = 4096

// OutputEvents is how many of a record's newest events with an Output
// keep it; older events lose their output, so a record stays bounded
// (about MaxRunEvents*MaxEventDetail + OutputEvents*MaxEventOutput).
const OutputEvents = 3

// Run is the ledger's record of one tick identity.
type Run struct {
	Job  string `json:"job"`
	Slot Slot   `json:"slot"`
	Tick string `json:"tick"`
	// Kind is "trigger" or "backfill" for a manual tick, empty for a
	// scheduled slot.
	Kind   string `json:"kind,omitempty"`
	Fate   Fate   `json:"fate"`
	Reason string `json:"reason,omitempty"`
	// Through and Count: a record of skipped slots stands for the range
	// Slot .. Through, Count slots (at least 1). Zero otherwise.
	Through Slot  `json:"through,omitempty"`
	Count   int64 `json:"count,omitempty"`
	// Events is the story, oldest first (at most MaxRunEvents; Dropped
	// counts the events dropped after the first).
	Events  []RunEvent `json:"events"`
	Dropped int        `json:"dropped,omitempty"`
	// Updated is the store's clock at the last change.
	Updated time.Time `json:"updated"`
}

// SkipRange is a range of a job's slots the leader skipped (Reason), as a
// claim records it: the claim of the job's next tick carries it
// (Tick.Skipped) and writes it in the same step that moves the job's
// last-fired slot past it.
type SkipRange struct {
	From, Through Slot
	Count         int64
	Reason        string
}

// RunQuery selects records of one job.
type RunQuery struct {
	Job string
	// From and To bound the slots (inclusive); zero: unbounded.
	From, To Slot
	// Fate keeps only records whose fate is this; empty: all.
	Fate Fate
	// After is a page's Next: records after it, in the order below.
	After string
	// Limit is the page size; 0 means DefaultRunLimit, at most MaxRunLimit.
	Limit int
}

// Page sizes of RunQuery.
const (
	DefaultRunLimit = 100
	MaxRunLimit     = 1000
)

// RunPage is one page of records, newest slot first (records of one slot,
// such as triggers, by tick id).
type RunPage struct {
	Runs []Run `json:"runs"`
	// Next continues the query (RunQuery.After); empty on the last page.
	Next string `json:"next,omitempty"`
}

// Ledger is the read side of the run ledger, implemented by the backends
// that keep one.
type Ledger interface {
	// Runs returns a page of the records of q.Job.
	Runs(ctx context.Context, q RunQuery) (RunPage, error)
	// Run returns the record of one tick identity of job, and whether
	// there is one.
	Run(ctx context.Context, job, tick string) (Run, bool, error)
}

// LedgerRetention bounds a store's ledger: records older than MaxAge (by
// their slot) and beyond the newest MaxPerJob of a job go.
type LedgerRetention struct {
	MaxAge    time.Duration
	MaxPerJob int
	// Off keeps no ledger at all: claims and workers write no record and
	// the store does not implement Ledger's reads (they fail with
	// ErrLedgerOff). For measuring the ledger's cost (make bench), and for
	// a fleet that wants none.
	Off bool
}

// Retention defaults.
const (
	DefaultLedgerMaxAge    = 7 * 24 * time.Hour
	DefaultLedgerMaxPerJob = 1000
)
