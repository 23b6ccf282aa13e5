package storekit

import (
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Begin is worker.Store.Begin over the primitives of one transaction: it
// decides each start in order (a start's effects are seen by the next
// one) and returns one admission per start. It sets each owned delivery's
// Deliveries to the store's count.
func Begin(tx WorkTx, consumer string, hold time.Duration, starts []worker.Start) ([]worker.Admission, error) {
	out := make([]worker.Admission, len(starts))
	for i, st := range starts {
		a, err := begin(tx, consumer, hold, st)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

func begin(tx WorkTx, consumer string, hold time.Duration, st worker.Start) (worker.Admission, error) {
	d := st.D
	count, ok, err := tx.Owned(consumer, d)
	if err != nil || !ok {
		return worker.NotOwned, err
	}
	d.Deliveries = count
	_, done, err := tx.Done(d.Tick)
	if err != nil {
		return 0, err
	}
	switch a := Screen(st, count, done); a {
	case worker.SkipDone:
		if err := tx.Note(d, event(onetick.EventSkippedDone, consumer, d, "")); err != nil {
			return 0, err
		}
		return a, settle(tx, d)
	case worker.DeadDeliveries:
		if err := dead(tx, consumer, d, count, DeliveryLimitError(count, st.MaxDeliveries), onetick.Result{}); err != nil {
			return 0, err
		}
		return a, settle(tx, d)
	}
	var state worker.OverlapState
	if st.Overlap != worker.OverlapAllow {
		if state, err = overlapState(tx, d); err != nil {
			return 0, err
		}
	}
	a, err := worker.DecideOverlap(st, state, func() (bool, error) { return tx.LowerPending(d) })
	if err != nil {
		return 0, err
	}
	switch a {
	case worker.Run:
		if st.Overlap != worker.OverlapAllow {
			if err := tx.SetMarker(RunMarker(d.Job), Token(d), hold); err != nil {
				return 0, err
			}
			if _, err := tx.DropPlace(d); err != nil {
				return 0, err
			}
		}
		if err = tx.SetRunning(d, hold); err == nil {
			err = tx.Note(d, event(onetick.EventStarted, consumer, d, ""))
		}
	case worker.Wait:
		err = tx.AddPlace(d)
	case worker.SkipOverlap:
		if err = tx.Ack(d); err == nil {
			err = tx.SetLast(d.Job, worker.OutcomeSkippedOverlap, d.Tick)
		}
		if err == nil {
			err = tx.Note(d, event(onetick.EventSkippedOverlap, consumer, d, ""))
		}
	}
	return a, err
}

// overlapState reads what worker.DecideOverlap needs about d's job. The
// run marker is free when there is none, when it names d's entry, or when
// the entry it names is no longer pending or its owner is not alive.
func overlapState(tx WorkTx, d *worker.Delivery) (worker.OverlapState, error) {
	tok := Token(d)
	cur, held, err := tx.Marker(RunMarker(d.Job))
	if err != nil {
		return worker.OverlapState{}, err
	}
	free := !held || cur == tok
	if !free {
		alive, err := tx.PendingAlive(cur)
		if err != nil {
			return worker.OverlapState{}, err
		}
		free = !alive
	}
	st, err := tx.Places(d)
	st.MarkerFree = free
	return st, err
}

// release drops d's run marker and waiter place, as its entry is settled
// or given back, and tells the waiters if it had either.
func release(tx WorkTx, d *worker.Delivery) error {
	placed, err := tx.DropPlace(d)
	if err != nil {
		return err
	}
	marked, err := tx.DropMarker(RunMarker(d.Job), Token(d))
	if err != nil {
		return err
	}
	if placed || marked {
		tx.Notify()
	}
	return nil
}

// settle acknowledges d as Begin decides without running it, with its
// marker and waiter place.
func settle(tx WorkTx, d *worker.Delivery) error {
	if err := release(tx, d); err != nil {
		return err
	}
	return tx.Ack(d)
}

// dead dead-letters d and makes it its job's last outcome.
func dead(tx WorkTx, consumer string, d *worker.Delivery, deliveries int, msg string, res onetick.Result) error {
	if err := tx.Dead(consumer, d, deliveries, msg); err != nil {
		return err
	}
	if err := tx.SetLast(d.Job, worker.OutcomeDead, d.Tick); err != nil {
		return err
	}
	ev := event(onetick.EventDead, consumer, d, msg)
	ev.Result = res
	return tx.Note(d, ev)
}

// event is the ledger event what of d's attempt by consumer.
func event(what, consumer string, d *worker.Delivery, detail string) onetick.RunEvent {
	return onetick.RunEvent{What: what, Worker: consumer, Attempt: d.Attempt, Detail: detail}
}

// FinishEvent is the ledger event of finish f by consumer: succeeded,
// retried with the attempt's error, dead, or released, with the attempt's
// result (the store sets At).
func FinishEvent(consumer string, f worker.Finish) onetick.RunEvent {
	var what string
	switch f.Kind {
	case worker.FinishDone:
		what = onetick.EventSucceeded
	case worker.FinishRetry:
		what = onetick.EventRetried
	case worker.FinishDead:
		what = onetick.EventDead
	default:
		return event(onetick.EventReleased, consumer, f.D, "")
	}
	ev := event(what, consumer, f.D, f.Err)
	if f.Kind == worker.FinishDone {
		ev.Detail = ""
	}
	ev.Result = f.Result
	return ev
}

// RunOf is the ledger record a worker store starts from when d's tick
// has none (retention dropped it, or it was enqueued before the store
// kept a ledger).
func RunOf(d *worker.Delivery) onetick.Run {
	return onetick.Run{Job: d.Job, Slot: d.Slot, Tick: d.Tick}
}

// Heartbeat is worker.Store.Heartbeat over the primitives of one
// transaction: it marks consumer alive for live, and for each hold still
// pending for consumer resets its idle time and extends the run marker it
// holds and its in-flight record by hold. It returns the indexes of holds
// lost.
func Heartbeat(tx WorkTx, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	if err := tx.SetAlive(consumer, live); err != nil {
		return nil, err
	}
	var lost []int
	for i, h := range holds {
		kept, err := heartbeat(tx, consumer, hold, h)
		if err != nil {
			return nil, err
		}
		if !kept {
			lost = append(lost, i)
		}
	}
	return lost, nil
}

func heartbeat(tx WorkTx, consumer string, hold time.Duration, h worker.Hold) (bool, error) {
	d := h.D
	if _, ok, err := tx.Owned(consumer, d); err != nil || !ok {
		return false, err
	}
	if err := tx.Touch(d); err != nil {
		return false, err
	}
	switch h.Marker {
	case worker.MarkerRun:
		name, tok := RunMarker(d.Job), Token(d)
		cur, held, err := tx.Marker(name)
		if err != nil || !held || cur != tok {
			return false, err
		}
		if err := tx.SetMarker(name, tok, hold); err != nil {
			return false, err
		}
	case worker.MarkerWait:
		if has, err := tx.HasPlace(d); err != nil || !has {
			return false, err
		}
	}
	return true, tx.RefreshRunning(d, hold)
}

// Finish is worker.Store.Finish over the primitives of one transaction:
// each delivery still pending for consumer is settled (its marker and
// waiter place released, its in-flight record dropped, then per kind) and
// owned; see worker.Store.Finish.
func Finish(tx WorkTx, consumer string, fs []worker.Finish) ([]bool, error) {
	owned := make([]bool, len(fs))
	for i, f := range fs {
		ok, err := finish(tx, consumer, f)
		if err != nil {
			return nil, err
		}
		owned[i] = ok
	}
	return owned, nil
}

func finish(tx WorkTx, consumer string, f worker.Finish) (bool, error) {
	d := f.D
	count, ok, err := tx.Owned(consumer, d)
	if err != nil {
		return false, err
	}
	if !ok {
		if f.Kind != worker.FinishDone {
			return false, nil
		}
		rec, ok, err := tx.Done(d.Tick)
		return RetriedDone(f, consumer, rec, ok), err
	}
	if err := release(tx, d); err != nil {
		return false, err
	}
	if err := tx.DeleteRunning(d); err != nil {
		return false, err
	}
	switch f.Kind {
	case worker.FinishRelease:
		if err := tx.Unown(d); err != nil {
			return false, err
		}
		return true, tx.Note(d, event(onetick.EventReleased, consumer, d, ""))
	case worker.FinishDone:
		if err = tx.WriteDone(consumer, d, f.Retention); err == nil {
			err = tx.SetLast(d.Job, worker.OutcomeSucceeded, d.Tick)
		}
		if err == nil {
			err = tx.Note(d, FinishEvent(consumer, f))
		}
	case worker.FinishRetry:
		next := *d
		next.Attempt++
		if err = tx.ScheduleRetry(next, f.Delay); err == nil {
			err = tx.SetLast(d.Job, worker.OutcomeRetried, d.Tick)
		}
		if err == nil {
			err = tx.Note(d, FinishEvent(consumer, f))
		}
	case worker.FinishDead:
		err = dead(tx, consumer, d, count, f.Err, f.Result)
	}
	if err != nil {
		return false, err
	}
	return true, tx.Ack(d)
}
