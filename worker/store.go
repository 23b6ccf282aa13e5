package worker

import (
	"context"
	"errors"
	"time"

	"github.com/onetick/onetick"
)

// Store is what a backend implements so that workers can consume its tick
// streams: ownership of stream entries by consumers, per-tick done records,
// the retry schedule, dead letters and the fleet-wide overlap markers. One
// Store value serves one consumer group (one worker fleet); every method is
// safe for concurrent use by many workers.
//
// The store decides, not the worker process: idle times, marker expiry and
// retry due times are judged by the store's own clock, and every write that
// settles an entry is fenced by ownership: it happens only if the store
// still shows the entry as delivered to (pending for) the calling consumer,
// in the same atomic step as the check. Package workertest is the
// conformance suite every implementation runs.
type Store interface {
	// Fetch takes up to max entries of the given streams that no consumer
	// of the group has received yet, makes consumer their owner and returns
	// them (Deliveries = 1). When there are none it waits up to block for
	// new ones. It returns early, with whatever it took, when ctx is done;
	// entries it took are always returned, never dropped. Entries that
	// belong to another group (retries and replays carry their group) are
	// acknowledged for this group and not returned.
	Fetch(ctx context.Context, consumer string, streams []string, max int, block time.Duration) ([]*Delivery, error)

	// Reclaim makes consumer the owner of up to max entries of the given
	// streams whose owner is not alive (its liveness lapsed by the store's
	// clock, or it never had one), or that were given back, or (the
	// backstop) that have been pending for at least idle since their last
	// delivery or heartbeat, counting one more delivery for each, and
	// returns them with the store's delivery count. An entry whose owner
	// is alive and heartbeats it more often than every idle is never
	// reclaimed.
	Reclaim(ctx context.Context, consumer string, streams []string, idle time.Duration, max int) ([]*Delivery, error)

	// Register starts a new process of consumer: in one atomic step it
	// marks consumer alive for live (by the store's clock) and gives back
	// every entry of the given streams that the store still shows as
	// pending for consumer. Those belong to an earlier process of the
	// same name, which is dead (two live workers never share a name), so
	// any consumer may take them over at once.
	Register(ctx context.Context, consumer string, streams []string, live time.Duration) error

	// Begin decides, in one atomic step per start, whether consumer may run
	// a delivery it owns:
	//   - NotOwned: the entry is no longer pending for consumer. Nothing
	//     written.
	//   - SkipDone: the tick has a done record: the entry is acknowledged.
	//   - DeadDeliveries: the store's delivery count exceeds
	//     MaxDeliveries (> 0): the tick is appended to the dead letters and
	//     the entry acknowledged.
	//   - Run, SkipOverlap or Wait: as DecideOverlap decides from the
	//     job's run marker and waiter places (see OverlapState). On Run
	//     with OverlapSkip or OverlapQueue the job's run marker now holds
	//     this entry's token for hold (a marker that names this same entry,
	//     left by a consumer the entry was taken over from, passes to the
	//     caller), the entry's waiter place if any is dropped, and the
	//     entry is recorded as in flight for hold. On SkipOverlap the entry
	//     is acknowledged. On Wait the entry has a waiter place of the job
	//     (ordered by slot) and stays pending and owned: call Begin again
	//     when the marker may be free (Released).
	// An entry acknowledged by Begin loses its marker and waiter place.
	// Begin sets each delivery's Deliveries to the store's count.
	Begin(ctx context.Context, consumer string, hold time.Duration, starts []Start) (BeginResult, error)

	// Heartbeat marks consumer alive for live (by the store's clock),
	// resets the idle time of each held entry that is still pending for
	// consumer, without counting a delivery, and extends the run marker
	// it holds by hold. It returns the indexes of holds that are lost: the
	// entry is no longer pending for consumer, or the run marker no longer
	// holds its token, or its waiter place is gone. Each hold is atomic;
	// a call with no holds only marks consumer alive.
	Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []Hold) (lost []int, err error)

	// Finish settles deliveries. Each one is atomic and fenced: if the
	// entry is no longer pending for consumer nothing is written and its
	// owned flag is false (except that a FinishDone whose done record this
	// same consumer already wrote for this entry answers true, so a call
	// retried after a lost reply does not count as lost). Otherwise, in
	// the same step: the entry is acknowledged, the run marker and the
	// waiter place it holds are released (and Released notified), it stops
	// being in flight, and per kind:
	//   - FinishDone: the tick's done record is written, kept for
	//     Retention.
	//   - FinishRetry: a copy of the tick with Attempt+1 is scheduled
	//     to re-enter its stream after Delay (see PromoteDue).
	//   - FinishDead: the tick is appended to the dead letters with Err.
	//   - FinishRelease: nothing is acknowledged: the entry stays pending,
	//     owned by no consumer (so the caller's heartbeats find it lost)
	//     and eligible for any consumer's Reclaim at once.
	Finish(ctx context.Context, consumer string, fs []Finish) (owned []bool, err error)

	// PromoteDue moves up to max scheduled retries whose time has come
	// (by the store's clock) back into their streams, each as a new entry,
	// atomically with removing it from the schedule, so that concurrent
	// callers never promote one retry twice. Any worker may call it.
	PromoteDue(ctx context.Context, max int) (Promoted, error)

	// Released returns a channel that receives a value whenever an overlap
	// marker or a waiter place may have been released anywhere in the
	// group. Notifications
	// are coalesced and best effort; waiters must also retry on a timer.
	// The channel is closed after ctx is done.
	Released(ctx context.Context) <-chan struct{}

	Inspector
}

// Inspector is the read and repair side of a Store, for `onetick status`
// and `onetick dead`.
type Inspector interface {
	// Status reports, for each named job, its last outcome, its runs in
	// flight and its dead letters, and the group's dead-letter total.
	Status(ctx context.Context, jobs []string) (Status, error)
	// DoneRecords returns the done records that exist for the given tick
	// ids.
	DoneRecords(ctx context.Context, ticks []string) (map[string]DoneRecord, error)
	// DeadLetters lists up to n dead letters with ids after the given one
	// ("" = from the oldest), oldest first.
	DeadLetters(ctx context.Context, after string, n int) ([]DeadLetter, error)
	// Replay atomically appends the dead letter's tick to its stream again
	// (same tick id, Attempt 1, for this group) and removes the dead
	// letter. ErrDeadLetterNotFound if there is no such dead letter.
	Replay(ctx context.Context, id string) (DeadLetter, error)
}

// ErrDeadLetterNotFound is returned by Replay for an unknown id.
var ErrDeadLetterNotFound = errors.New("worker: no such dead letter")

// Delivery is one stream entry owned by a consumer.
type Delivery struct {
	Stream  string        // stream key
	ID      string        // stream entry id
	Job     string        // fields the scheduler wrote
	Slot    onetick.Slot  //
	Tick    string        //
	Epoch   onetick.Epoch //
	Replica string        //
	Payload string        //
	// Attempt is 1 for an entry the scheduler wrote; retries carry theirs.
	Attempt int
	// Deliveries is the store's delivery count of the entry: 1 for a fresh
	// entry, more once it was taken over from another consumer.
	Deliveries int
	// Enqueued is when the entry entered the stream, by the store's clock.
	Enqueued time.Time
	// Version is the job's definition version (the entry's "version":
	// jobs defined at run time), carried by retries; empty otherwise.
	Version string
}

// Overlap is a job's policy for a tick that comes due while a previous run
// of the same job is still in flight anywhere in the fleet. What it does
// also depends on the job's preference (see DecideOverlap and the package
// documentation): for a job that prefers duplicate, skip and queue both
// make the tick wait, in slot order.
type Overlap string

const (
	// OverlapSkip (the default): the tick is acknowledged without running
	// and counted as skipped_overlap, and, for a job that prefers missed,
	// as a missed slot.
	OverlapSkip Overlap = "skip"
	// OverlapQueue: the tick waits for the run in flight to finish; at most
	// one tick per job waits, later ones are skipped.
	OverlapQueue Overlap = "queue"
	// OverlapAllow: no marker; runs may overlap.
	OverlapAllow Overlap = "allow"
)

// Start asks Begin to admit one delivery.
type Start struct {
	D       *Delivery
	Overlap Overlap
	// MaxWaiting is how many ticks of the job may hold a waiter place at
	// once, fleet-wide, with OverlapQueue (0 counts as 1).
	MaxWaiting int
	// Ordered: the job's ticks run in slot order (OverlapQueue): a tick
	// runs only when no tick of the job with a lower slot waits or is
	// pending without having begun.
	Ordered bool
	// MaxDeliveries: dead-letter the entry when the store has delivered it
	// more often than this (0: no limit).
	MaxDeliveries int
}

// Admission is Begin's answer for one start.
type Admission int

const (
	Run            Admission = iota + 1 // run the handler
	Wait                                // queue: wait for the marker
	SkipDone                            // a done record exists; acknowledged
	SkipOverlap                         // another run is in flight; acknowledged
	DeadDeliveries                      // delivery limit passed; dead-lettered
	NotOwned                            // the entry is no longer this consumer's
)

func (a Admission) String() string {
	switch a {
	case Run:
		return "run"
	case Wait:
		return "wait"
	case SkipDone:
		return "skipped_done"
	case SkipOverlap:
		return "skipped_overlap"
	case DeadDeliveries:
		return "dead"
	case NotOwned:
		return "not_owned"
	}
	return "unknown"
}

// BeginResult is Begin's answer.
type BeginResult struct {
	Admissions []Admission // one per start, in order
	StoreTime  time.Time   // the store's clock when it decided
}

// Marker says which overlap marker a held delivery holds.
type Marker int

const (
	MarkerNone Marker = iota // no marker (OverlapAllow, or not admitted yet)
	MarkerRun                // the job's run marker
	MarkerWait               // a waiter place of the job
)

// Hold is one delivery a consumer heartbeats.
type Hold struct {
	D      *Delivery
	Marker Marker
}

// FinishKind is how a delivery is settled.
type FinishKind int

const (
	FinishDone    FinishKind = iota + 1 // succeeded: done record, acknowledge
	FinishRetry                         // schedule the next attempt, acknowledge
	FinishDead                          // dead-letter, acknowledge
	FinishRelease                       // give up ownership without a decision
)

// Finish settles one delivery.
type Finish struct {
	D    *Delivery
	Kind FinishKind
	// Err is the last error (FinishRetry, FinishDead).
	Err string
	// Delay until the retry is due, from the store's now (FinishRetry).
	Delay time.Duration
	// Retention of the done record (FinishDone).
	Retention time.Duration
	// Result is what the attempt reported (FinishDone, FinishRetry,
	// FinishDead): the ledger keeps it on the outcome's event.
	Result onetick.Result
}

// Promoted is PromoteDue's answer.
type Promoted struct {
	// N retries were moved into their streams.
	N int
	// Next is how long until the next scheduled retry is due, by the
	// store's clock; negative when none is scheduled.
	Next time.Duration
}

// Outcome names what happened to a delivery; it is the outcome label of
// worker_runs_total and what Status reports as a job's last outcome.
type Outcome string

const (
	OutcomeSucceeded      Outcome = "succeeded"       // handler ok, done record written
	OutcomeFailed         Outcome = "failed"          // handler returned an error, panicked or timed out
	OutcomeRetried        Outcome = "retried"         // a next attempt was scheduled
	OutcomeDead           Outcome = "dead"            // the tick went to the dead letters
	OutcomeSkippedOverlap Outcome = "skipped_overlap" // another run of the job was in flight
	OutcomeSkippedDone    Outcome = "skipped_done"    // the tick had a done record already
	OutcomeLost           Outcome = "lost"            // the result was not recorded: ownership lost
)

// Status is the store's view of a group, for `onetick status`.
type Status struct {
	StoreTime time.Time   `json:"store_time"`
	Jobs      []JobStatus `json:"jobs"`
	// Dead counts the group's dead letters, of every job.
	Dead int64 `json:"dead_letters"`
}

// JobStatus is one job's worker state.
type JobStatus struct {
	Job string `json:"job"`
	// LastOutcome is succeeded, retried, dead or skipped_overlap; empty
	// when the job has not been settled yet.
	LastOutcome Outcome   `json:"last_outcome,omitempty"`
	LastTick    string    `json:"last_tick,omitempty"`
	LastAt      time.Time `json:"last_at,omitzero"`
	// InFlight counts runs admitted and not yet settled whose holders
	// still heartbeat.
	InFlight int `json:"in_flight"`
	// Dead counts this job's dead letters.
	Dead int64 `json:"dead_letters"`
}

// DoneRecord says that a tick succeeded, where and when.
type DoneRecord struct {
	Tick     string    `json:"tick"`
	Entry    string    `json:"entry"`    // the stream entry that ran
	Consumer string    `json:"consumer"` // who ran it
	At       time.Time `json:"at"`       // store time of the record
}

// DeadLetter is a tick that will not be retried on its own.
type DeadLetter struct {
	ID         string        `json:"id"` // the dead letter's own id
	Job        string        `json:"job"`
	Tick       string        `json:"tick"`
	Slot       onetick.Slot  `json:"slot"`
	Epoch      onetick.Epoch `json:"epoch"`
	Replica    string        `json:"replica"`
	Payload    string        `json:"payload"`
	Stream     string        `json:"stream"`
	Entry      string        `json:"entry"` // the stream entry it came from
	Attempts   int           `json:"attempts"`
	Deliveries int           `json:"deliveries"`
	Error      string        `json:"error"`
	Consumer   string        `json:"consumer"`
	At         time.Time     `json:"at"`
}
