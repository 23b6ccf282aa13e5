package storekit

import (
	"errors"
	"strconv"
	"time"

	"github.com/onetick/onetick"
)

// ErrMixedEnqueue: an Enqueue call mixed jobs, or triggers and
// backfilled slots. A store returns it prefixed with its name.
var ErrMixedEnqueue = errors.New("one Enqueue takes the triggers or the backfill of one job")

// ManualBatch is one Enqueue call: the triggers (Tick.Key set) or the
// backfilled slots of one job, made by one actor.
type ManualBatch struct {
	Job string
	// Kind is onetick.KindTrigger or onetick.KindBackfill: the kind of
	// the stream entries and the control log's action.
	Kind string
	// Token is the ticks' record, and the replica of their entries.
	Token string
	// Relay is the job's relay (its ticks'), nil for none; Relays is the
	// relay kind the store hands ("" none), set by the store: a relay
	// that is not the store's is Broken (RelayRefused).
	Relay  *onetick.Relay
	Relays string
}

// Manual checks that ticks (at least one) are the triggers or the
// backfill of one job, enqueued by a.
func Manual(ticks []onetick.Tick, a onetick.Actor) (ManualBatch, error) {
	m := ManualBatch{Job: ticks[0].Job, Kind: kindOf(ticks[0]), Token: ManualToken(a.Who), Relay: ticks[0].Relay}
	for _, t := range ticks {
		if t.Job != m.Job || kindOf(t) != m.Kind {
			return ManualBatch{}, ErrMixedEnqueue
		}
	}
	return m, nil
}

func kindOf(t onetick.Tick) string {
	if t.Key != "" {
		return onetick.KindTrigger
	}
	return onetick.KindBackfill
}

// Trigger reports whether the batch holds triggers.
func (m ManualBatch) Trigger() bool { return m.Kind == onetick.KindTrigger }

// Slot is the slot tick t is enqueued at: a trigger's is the store's
// now, a backfilled tick keeps its own.
func (m ManualBatch) Slot(t onetick.Tick, now onetick.Slot) onetick.Slot {
	if m.Trigger() {
		return now
	}
	return t.Slot
}

// Decide decides one tick enqueued at slot (see Slot): Early for a
// backfilled slot after limit (the store's now plus the clock
// tolerance), Duplicate when the tick has a record (seen), Broken when
// the job's relay is not the store's or its stream cannot take the
// append, otherwise Claimed: the store writes
// the record (Token) and appends. Enqueue is not fenced and moves no
// last-fired slot; pauses do not hold it.
func (m ManualBatch) Decide(slot, limit onetick.Slot, seen bool, stream *onetick.DamageError) Decision {
	refused := relayRefused(m.Job, m.Relay, m.Relays)
	switch {
	case !m.Trigger() && slot > limit:
		return Decision{Outcome: onetick.Early}
	case seen:
		return Decision{Outcome: onetick.Duplicate}
	case refused != nil:
		return Decision{Outcome: onetick.Broken, Damage: refused}
	case stream != nil:
		c := *stream
		c.Job = m.Job
		return Decision{Outcome: onetick.Broken, Damage: &c}
	}
	return Decision{Outcome: onetick.Claimed, Record: m.Token, Append: true}
}

// Detail is the control log's detail without the counts: a trigger's
// tick id, or a backfill's first and last slot.
func (m ManualBatch) Detail(ticks []onetick.Tick) string {
	if m.Trigger() {
		return ticks[0].ID()
	}
	return ticks[0].Slot.String() + " .. " + ticks[len(ticks)-1].Slot.String()
}

// Counts is the suffix of the control log's detail: how many of the
// call's ticks were enqueued.
func Counts(enqueued, of int) string {
	return " (" + strconv.Itoa(enqueued) + " of " + strconv.Itoa(of) + " enqueued)"
}

// Record is the control log's record of the call, made at store time at,
// that enqueued n of ticks.
func (m ManualBatch) Record(ticks []onetick.Tick, a onetick.Actor, at time.Time, n int) onetick.ControlRecord {
	return onetick.ControlRecord{Action: m.Kind, Job: m.Job, Who: a.Who, Reason: a.Reason, At: at.UTC(),
		Detail: m.Detail(ticks) + Counts(n, len(ticks))}
}
