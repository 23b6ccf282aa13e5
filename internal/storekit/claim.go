package storekit

import "github.com/onetick/onetick"

// pausedSuffix marks the record of a tick answered Paused: the token of
// the term that accounted for it, then this suffix.
const pausedSuffix = "|p"

// PausedToken is the record a claim by the term whose lease token is
// token leaves for a tick it answered Paused, so that a retry of the
// claim answers Paused again.
func PausedToken(token string) string { return token + pausedSuffix }

// ManualToken is the record of a tick enqueued by hand (a trigger or a
// backfill) by who, and the replica its stream entry names.
func ManualToken(who string) string { return "manual|" + who }

// View is what a store read, for one tick of a claim, before deciding.
type View struct {
	// Seen: the tick has an unexpired record; Record is its token.
	Seen   bool
	Record string
	// RecordDamage: the tick's record cannot be read (it is Broken).
	RecordDamage *onetick.DamageError
	// HasLast and Last: the job's last-fired slot. Read only for an
	// in-order tick; Decide ignores them for an out-of-order one.
	HasLast bool
	Last    onetick.Slot
	// JobDamage: the job's last-fired slot or pause intervals are damaged,
	// which holds its in-order ticks (Broken).
	JobDamage *onetick.DamageError
	// Paused reports whether the job's in-order slot falls in one of its
	// pause intervals; Decide asks only when the answer matters, so a
	// store may read the intervals then. Nil: the job has none.
	Paused func(job string, s onetick.Slot) (bool, error)
	// StreamDamage: the tick's stream cannot take an append (Broken).
	StreamDamage *onetick.DamageError
	// Relays is the relay kind the store hands in its claim ("" none):
	// a tick with another relay is Broken (RelayRefused).
	Relays string
}

// Decision is the claim's answer for one tick and what the store writes
// for it. A store applies it before deciding the next tick of the batch:
// a batch may hold one tick twice, or several slots of one job.
type Decision struct {
	Outcome onetick.Outcome
	// Record is the token to record for the tick; "" writes no record.
	Record string
	// Move: the job's last-fired slot becomes the tick's slot.
	Move bool
	// Append: the tick is appended to its stream.
	Append bool
	// Damage is, for Broken, what holds the tick: a copy of the view's
	// damage naming the tick's job.
	Damage *onetick.DamageError
}

// Decide decides one tick of a claim by the term whose lease token is
// token, limit being the last slot that is not early by the store's
// clock (its now plus the clock tolerance). In order:
//
//  1. Early: the slot is after limit.
//  2. Broken: the tick's record cannot be read.
//  3. The tick has a record: this term's own (a retry of its claim)
//     answers Claimed, this term's paused answer Paused, any other
//     Duplicate; nothing is written.
//  4. Broken: an in-order tick whose job's state is damaged.
//  5. Duplicate: an in-order slot not after the job's last-fired slot.
//  6. Paused: an in-order slot in a pause interval; it is recorded
//     (PausedToken) and moves the last-fired slot, never appended.
//  7. Broken: the tick names a relay the store does not hand
//     (RelayRefused), or the stream cannot take the append.
//  8. Claimed: recorded, appended (or, for a relayed tick, handed to its
//     relay in the same step), and, unless out of order, the job's
//     last-fired slot moves.
//
// The only error is the one v.Paused returns.
func Decide(t onetick.Tick, token string, limit onetick.Slot, v View) (Decision, error) {
	inOrder := !t.OutOfOrder
	switch {
	case t.Slot > limit:
		return Decision{Outcome: onetick.Early}, nil
	case v.RecordDamage != nil:
		return broken(t, v.RecordDamage), nil
	case v.Seen && v.Record == token:
		return Decision{Outcome: onetick.Claimed}, nil // a retry of this term's own claim
	case v.Seen && v.Record == PausedToken(token):
		return Decision{Outcome: onetick.Paused}, nil // a retry of this term's paused answer
	case v.Seen:
		return Decision{Outcome: onetick.Duplicate}, nil
	case inOrder && v.JobDamage != nil:
		return broken(t, v.JobDamage), nil
	case inOrder && v.HasLast && t.Slot <= v.Last:
		return Decision{Outcome: onetick.Duplicate}, nil
	}
	if inOrder && v.Paused != nil {
		p, err := v.Paused(t.Job, t.Slot)
		if err != nil {
			return Decision{}, err
		}
		if p {
			// Accounted for, never appended; the record lets a retry of
			// this claim answer paused again.
			return Decision{Outcome: onetick.Paused, Record: PausedToken(token), Move: true}, nil
		}
	}
	if d := RelayRefused(t, v.Relays); d != nil {
		return broken(t, d), nil
	}
	if v.StreamDamage != nil {
		return broken(t, v.StreamDamage), nil
	}
	return Decision{Outcome: onetick.Claimed, Record: token, Move: inOrder, Append: true}, nil
}

func broken(t onetick.Tick, d *onetick.DamageError) Decision {
	c := *d
	c.Job = t.Job
	return Decision{Outcome: onetick.Broken, Damage: &c}
}

// Answer sets the outcome of tick i of res, and its damage when Broken.
func (d Decision) Answer(res *onetick.ClaimResult, i int) {
	res.Outcomes[i] = d.Outcome
	if d.Damage != nil {
		if res.Damaged == nil {
			res.Damaged = map[int]*onetick.DamageError{}
		}
		res.Damaged[i] = d.Damage
	}
}
