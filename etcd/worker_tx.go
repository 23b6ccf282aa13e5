package etcd

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// workTx is the storekit.WorkTx of one Begin, Finish or Heartbeat: reads
// and writes of an optimistic transaction, at the store's time now.
type workTx struct {
	s      *WorkerStore
	t      *otx
	now    time.Time
	notify bool
}

var _ storekit.WorkTx = (*workTx)(nil)

func (x *workTx) pending(stream, id string) (pend, bool, error) {
	v, ok, err := x.t.get(x.s.pendKey(stream, id))
	if err != nil || !ok {
		return pend{}, false, err
	}
	var p pend
	if json.Unmarshal([]byte(v), &p) != nil {
		return pend{}, false, nil
	}
	return p, true, nil
}

func (x *workTx) putPending(d *worker.Delivery, p pend) {
	x.t.put(x.s.pendKey(d.Stream, d.ID), jsonOf(p))
}

// Owned implements storekit.WorkTx.
func (x *workTx) Owned(consumer string, d *worker.Delivery) (int, bool, error) {
	p, ok, err := x.pending(d.Stream, d.ID)
	if err != nil || !ok || p.Owner != consumer {
		return 0, false, err
	}
	return p.Count, true, nil
}

// Done implements storekit.WorkTx.
func (x *workTx) Done(tick string) (worker.DoneRecord, bool, error) {
	v, ok, err := x.t.get(x.s.doneKey(tick))
	if err != nil || !ok {
		return worker.DoneRecord{}, false, err
	}
	var d doneVal
	if json.Unmarshal([]byte(v), &d) != nil || ms(x.now) >= d.Until {
		return worker.DoneRecord{}, false, nil
	}
	return d.Rec, true, nil
}

// WriteDone implements storekit.WorkTx: the record expires with an etcd
// lease shared by records of its retention.
func (x *workTx) WriteDone(consumer string, d *worker.Delivery, retention time.Duration) error {
	v := doneVal{Rec: worker.DoneRecord{Tick: d.Tick, Entry: d.ID, Consumer: consumer, At: x.now.UTC()}, Until: ms(x.now.Add(retention))}
	l, err := x.s.b.recordLease(x.t.ctx, retention)
	if err != nil {
		return err
	}
	x.t.putLease(x.s.doneKey(d.Tick), jsonOf(v), l)
	return nil
}

// Ack implements storekit.WorkTx.
func (x *workTx) Ack(d *worker.Delivery) error {
	x.t.del(x.s.pendKey(d.Stream, d.ID))
	return nil
}

// Unown implements storekit.WorkTx.
func (x *workTx) Unown(d *worker.Delivery) error {
	p, ok, err := x.pending(d.Stream, d.ID)
	if err != nil || !ok {
		return err
	}
	p.Owner, p.Seen = "", 0
	x.putPending(d, p)
	return nil
}

// Touch implements storekit.WorkTx.
func (x *workTx) Touch(d *worker.Delivery) error {
	p, ok, err := x.pending(d.Stream, d.ID)
	if err != nil || !ok {
		return err
	}
	p.Seen = ms(x.now)
	x.putPending(d, p)
	return nil
}

// SetAlive implements storekit.WorkTx.
func (x *workTx) SetAlive(consumer string, live time.Duration) error {
	x.t.put(x.s.aliveKey(consumer), strconv.FormatInt(ms(x.now.Add(live)), 10))
	return nil
}

// Marker implements storekit.WorkTx.
func (x *workTx) Marker(name string) (string, bool, error) {
	v, ok, err := x.t.get(x.s.markKey(name))
	if err != nil || !ok {
		return "", false, err
	}
	var m until
	if json.Unmarshal([]byte(v), &m) != nil || ms(x.now) >= m.Until {
		return "", false, nil
	}
	return m.Token, true, nil
}

// SetMarker implements storekit.WorkTx.
func (x *workTx) SetMarker(name, tok string, hold time.Duration) error {
	x.t.put(x.s.markKey(name), jsonOf(until{Token: tok, Until: ms(x.now.Add(hold))}))
	return nil
}

// DropMarker implements storekit.WorkTx.
func (x *workTx) DropMarker(name, tok string) (bool, error) {
	cur, ok, err := x.Marker(name)
	if err != nil || !ok || cur != tok {
		return false, err
	}
	x.t.del(x.s.markKey(name))
	return true, nil
}

// PendingAlive implements storekit.WorkTx.
func (x *workTx) PendingAlive(tok string) (bool, error) {
	stream, id := storekit.SplitToken(tok)
	p, ok, err := x.pending(stream, id)
	if err != nil || !ok {
		return false, err
	}
	return x.s.alive(x.t, p.Owner, x.now)
}

// Places implements storekit.WorkTx.
func (x *workTx) Places(d *worker.Delivery) (worker.OverlapState, error) {
	var st worker.OverlapState
	p := x.s.placePrefix(d.Job)
	kvs, err := x.t.scan(p, prefixEnd(p), 0, true)
	if err != nil {
		return st, err
	}
	tok := storekit.Token(d)
	mine := placeVal{Slot: d.Slot, Seq: seqOf(d.ID)}
	for _, kv := range kvs {
		var w placeVal
		if json.Unmarshal([]byte(kv.val), &w) != nil {
			continue
		}
		stream, id := storekit.SplitToken(w.Tok)
		if _, ok, err := x.pending(stream, id); err != nil {
			return st, err
		} else if !ok {
			x.t.del(kv.key)
			continue
		}
		if w.Tok == tok {
			st.HasPlace = true
			continue
		}
		st.Waiting++
		st.LowerWaiting = st.LowerWaiting || w.Slot < mine.Slot || (w.Slot == mine.Slot && w.Seq < mine.Seq)
	}
	return st, nil
}

// LowerPending implements storekit.WorkTx.
func (x *workTx) LowerPending(d *worker.Delivery) (bool, error) {
	p := x.s.pendPrefix(d.Stream)
	kvs, err := x.t.scan(p, x.s.pendKey(d.Stream, d.ID), 0, true)
	if err != nil {
		return false, err
	}
	for _, kv := range kvs {
		var pe pend
		if json.Unmarshal([]byte(kv.val), &pe) != nil || pe.D.Job != d.Job || pe.D.Slot > d.Slot {
			continue
		}
		if has, err := x.HasPlace(&pe.D); err != nil {
			return false, err
		} else if !has {
			return true, nil
		}
	}
	return false, nil
}

// AddPlace implements storekit.WorkTx.
func (x *workTx) AddPlace(d *worker.Delivery) error {
	if has, err := x.HasPlace(d); err != nil || has {
		return err
	}
	x.t.put(x.s.placeKey(d), jsonOf(placeVal{Slot: d.Slot, Seq: seqOf(d.ID), Tok: storekit.Token(d)}))
	return nil
}

// HasPlace implements storekit.WorkTx.
func (x *workTx) HasPlace(d *worker.Delivery) (bool, error) {
	_, ok, err := x.t.get(x.s.placeKey(d))
	return ok, err
}

// DropPlace implements storekit.WorkTx.
func (x *workTx) DropPlace(d *worker.Delivery) (bool, error) {
	has, err := x.HasPlace(d)
	if err != nil || !has {
		return false, err
	}
	x.t.del(x.s.placeKey(d))
	return true, nil
}

// Notify implements storekit.WorkTx: the commit bumps the group's
// released key, which Released watches.
func (x *workTx) Notify() { x.notify = true }

// SetRunning implements storekit.WorkTx.
func (x *workTx) SetRunning(d *worker.Delivery, hold time.Duration) error {
	x.t.put(x.s.runKey(d), strconv.FormatInt(ms(x.now.Add(hold)), 10))
	return nil
}

// RefreshRunning implements storekit.WorkTx.
func (x *workTx) RefreshRunning(d *worker.Delivery, hold time.Duration) error {
	if _, ok, err := x.t.get(x.s.runKey(d)); err != nil || !ok {
		return err
	}
	return x.SetRunning(d, hold)
}

// DeleteRunning implements storekit.WorkTx.
func (x *workTx) DeleteRunning(d *worker.Delivery) error {
	x.t.del(x.s.runKey(d))
	return nil
}

// SetLast implements storekit.WorkTx.
func (x *workTx) SetLast(job string, outcome worker.Outcome, tick string) error {
	x.t.put(x.s.lastKey(job), jsonOf(lastVal{Outcome: outcome, Tick: tick, At: x.now.UTC()}))
	return nil
}

// ScheduleRetry implements storekit.WorkTx.
func (x *workTx) ScheduleRetry(next worker.Delivery, delay time.Duration) error {
	key := x.s.retryPrefix() + pad(ms(x.now.Add(delay))) + "/" + esc(storekit.Token(&next))
	x.t.put(key, jsonOf(next))
	return nil
}

// Dead implements storekit.WorkTx.
func (x *workTx) Dead(consumer string, d *worker.Delivery, deliveries int, msg string) error {
	seqKey := x.s.w + "deadseq"
	v, _, err := x.t.get(seqKey)
	if err != nil {
		return err
	}
	seq, _ := parseInt(v)
	seq++
	x.t.put(seqKey, strconv.FormatInt(seq, 10))
	dl := worker.DeadLetter{
		ID:  strconv.FormatInt(ms(x.now), 10) + "-" + strconv.FormatInt(seq, 10),
		Job: d.Job, Tick: d.Tick, Slot: d.Slot, Epoch: d.Epoch, Replica: d.Replica, Payload: d.Payload,
		Stream: d.Stream, Entry: d.ID, Attempts: d.Attempt, Deliveries: deliveries, Error: msg,
		Consumer: consumer, At: x.now.UTC(),
	}
	x.t.put(x.s.deadPrefix()+pad(seq), jsonOf(dl))
	return x.s.addDead(x.t, d.Job, 1)
}

// Note implements storekit.WorkTx.
func (x *workTx) Note(d *worker.Delivery, ev onetick.RunEvent) error {
	return x.s.b.note(x.t, x.now, storekit.RunOf(d), ev)
}
