// The worker store's rules, written once: the names, messages and order of
// checks every worker.Store shares, and Begin, Finish and Heartbeat over
// the primitives of one transaction (WorkTx). The package comment is in
// doc.go.

package storekit

import (
	"fmt"
	"strings"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// WorkTx is what a worker store does inside the one transaction (or under
// the one lock) of a Begin, Finish or Heartbeat call: reads and writes of
// one consumer group, judged by the store's clock at the start of the
// call. Begin, Finish and Heartbeat of this package are the algorithm over
// them; a store implements only the primitives.
//
// Entries are named by their delivery (stream and entry id), overlap
// markers by name (RunMarker) and the token of the entry that holds them
// (Token). Durations are from the store's now.
type WorkTx interface {
	// Owned returns the store's delivery count of d's entry, and true,
	// if the entry is pending for consumer.
	Owned(consumer string, d *worker.Delivery) (count int, ok bool, err error)
	// Done returns the tick's unexpired done record, if there is one.
	Done(tick string) (worker.DoneRecord, bool, error)
	// WriteDone writes the done record of d's tick (d's entry, run by
	// consumer, at the store's now), kept for retention.
	WriteDone(consumer string, d *worker.Delivery, retention time.Duration) error
	// Ack acknowledges d's entry: it is no longer pending.
	Ack(d *worker.Delivery) error
	// Unown leaves d's entry pending, owned by no consumer and idle
	// forever, so that any consumer's Reclaim takes it at once.
	Unown(d *worker.Delivery) error
	// Touch resets the idle time of d's entry, without counting a
	// delivery.
	Touch(d *worker.Delivery) error
	// SetAlive marks consumer alive for live.
	SetAlive(consumer string, live time.Duration) error

	// Marker returns the token of the named marker, if it is unexpired.
	Marker(name string) (token string, ok bool, err error)
	// SetMarker sets (or extends) the named marker to token for hold.
	SetMarker(name, token string, hold time.Duration) error
	// DropMarker removes the named marker if it holds token; true if it
	// did.
	DropMarker(name, token string) (bool, error)
	// PendingAlive reports whether the entry a token names is pending
	// and owned by a live consumer.
	PendingAlive(token string) (bool, error)
	// Places reads d's job's waiter places as worker.OverlapState's
	// HasPlace, Waiting and LowerWaiting (MarkerFree is left false),
	// dropping places whose entry is no longer pending.
	Places(d *worker.Delivery) (worker.OverlapState, error)
	// LowerPending reports whether an entry of d's job with a lower id
	// and a slot no higher is pending in d's stream without a waiter
	// place (see worker.DecideOverlap).
	LowerPending(d *worker.Delivery) (bool, error)
	// AddPlace gives d's entry a waiter place of its job, ordered by
	// slot; nothing if it has one.
	AddPlace(d *worker.Delivery) error
	// HasPlace reports whether d's entry holds a waiter place.
	HasPlace(d *worker.Delivery) (bool, error)
	// DropPlace removes d's waiter place; true if it had one.
	DropPlace(d *worker.Delivery) (bool, error)
	// Notify tells the group's Released channels (at once or after the
	// commit, as the store can) that a marker or place was released.
	Notify()

	// SetRunning records d's entry as in flight for hold.
	SetRunning(d *worker.Delivery, hold time.Duration) error
	// RefreshRunning extends the in-flight record of d's entry, if there
	// is one, to hold.
	RefreshRunning(d *worker.Delivery, hold time.Duration) error
	// DeleteRunning removes the in-flight record of d's entry.
	DeleteRunning(d *worker.Delivery) error

	// SetLast sets the job's last outcome, for tick, at the store's now.
	SetLast(job string, outcome worker.Outcome, tick string) error
	// ScheduleRetry schedules next (the tick with its next attempt,
	// keyed by its stream and entry id) to re-enter its stream after
	// delay.
	ScheduleRetry(next worker.Delivery, delay time.Duration) error
	// Dead appends d's tick to the dead letters with the store's
	// delivery count and msg, counting it for its job.
	Dead(consumer string, d *worker.Delivery, deliveries int, msg string) error

	// Note applies ev, at the store's now, to the run ledger's record of
	// d's tick (storekit.Note; RunOf(d) when the record is gone). A store
	// that keeps no ledger does nothing.
	Note(d *worker.Delivery, ev onetick.RunEvent) error
}

// Token names a delivery's stream entry in markers, waiter places and
// in-flight records: "stream\nentry id".
func Token(d *worker.Delivery) string { return d.Stream + "\n" + d.ID }

// SplitToken returns the stream and entry id a Token names.
func SplitToken(tok string) (stream, id string) {
	stream, id, _ = strings.Cut(tok, "\n")
	return stream, id
}

// RunMarker is the name of a job's run marker.
func RunMarker(job string) string { return "run:" + job }

// DeliveryLimitError is the dead letter's error of a tick delivered count
// times, more than its limit, without a result.
func DeliveryLimitError(count, limit int) string {
	return fmt.Sprintf("delivery limit: delivered %d times without a result (max_deliveries %d)", count, limit)
}

// Screen is Begin's first decision for a start whose entry the consumer
// owns, with the store's delivery count of it and whether its tick has a
// done record: SkipDone before DeadDeliveries (MaxDeliveries > 0 and
// count above it). It returns 0 when neither applies: the overlap decides
// (worker.DecideOverlap).
func Screen(st worker.Start, count int, done bool) worker.Admission {
	switch {
	case done:
		return worker.SkipDone
	case st.MaxDeliveries > 0 && count > st.MaxDeliveries:
		return worker.DeadDeliveries
	}
	return 0
}

// RetriedDone reports whether a FinishDone of d by consumer, whose entry
// is no longer pending for it, was recorded already: the tick's done
// record, rec if ok, names this entry and consumer (a call retried after a
// lost reply).
func RetriedDone(f worker.Finish, consumer string, rec worker.DoneRecord, ok bool) bool {
	return f.Kind == worker.FinishDone && ok && rec.Entry == f.D.ID && rec.Consumer == consumer
}
