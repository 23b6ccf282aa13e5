package memory

import (
	"strconv"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// workTx is the storekit.WorkTx of one Begin, Finish or Heartbeat: the
// group's state under the backend's lock, at the store's time now.
type workTx struct {
	s   *WorkerStore
	g   *wgroup
	now time.Time
}

var _ storekit.WorkTx = (*workTx)(nil)

// Owned implements storekit.WorkTx.
func (t *workTx) Owned(consumer string, d *worker.Delivery) (int, bool, error) {
	if p := t.g.owned(consumer, d); p != nil {
		return p.count, true, nil
	}
	return 0, false, nil
}

// Done implements storekit.WorkTx.
func (t *workTx) Done(tick string) (worker.DoneRecord, bool, error) {
	rec, ok := t.g.done[tick]
	if !ok || !t.now.Before(rec.expires) {
		return worker.DoneRecord{}, false, nil
	}
	return rec.rec, true, nil
}

// WriteDone implements storekit.WorkTx.
func (t *workTx) WriteDone(consumer string, d *worker.Delivery, retention time.Duration) error {
	t.g.done[d.Tick] = wdone{rec: worker.DoneRecord{Tick: d.Tick, Entry: d.ID, Consumer: consumer, At: t.now.UTC()},
		expires: t.now.Add(retention)}
	return nil
}

// Ack implements storekit.WorkTx.
func (t *workTx) Ack(d *worker.Delivery) error {
	delete(t.g.streams[d.Stream].pel, d.ID)
	return nil
}

// Unown implements storekit.WorkTx.
func (t *workTx) Unown(d *worker.Delivery) error {
	if p := t.g.streams[d.Stream].pel[d.ID]; p != nil {
		p.consumer, p.delivered = "", time.Time{}
	}
	return nil
}

// Touch implements storekit.WorkTx.
func (t *workTx) Touch(d *worker.Delivery) error {
	if p := t.g.streams[d.Stream].pel[d.ID]; p != nil {
		p.delivered = t.now
	}
	return nil
}

// SetAlive implements storekit.WorkTx.
func (t *workTx) SetAlive(consumer string, live time.Duration) error {
	t.g.alive[consumer] = t.now.Add(live)
	return nil
}

// SetRunning implements storekit.WorkTx.
func (t *workTx) SetRunning(d *worker.Delivery, hold time.Duration) error {
	t.g.running[storekit.Token(d)] = wrun{job: d.Job, expires: t.now.Add(hold)}
	return nil
}

// RefreshRunning implements storekit.WorkTx.
func (t *workTx) RefreshRunning(d *worker.Delivery, hold time.Duration) error {
	tok := storekit.Token(d)
	if r, ok := t.g.running[tok]; ok {
		r.expires = t.now.Add(hold)
		t.g.running[tok] = r
	}
	return nil
}

// DeleteRunning implements storekit.WorkTx.
func (t *workTx) DeleteRunning(d *worker.Delivery) error {
	delete(t.g.running, storekit.Token(d))
	return nil
}

// SetLast implements storekit.WorkTx.
func (t *workTx) SetLast(job string, outcome worker.Outcome, tick string) error {
	t.g.last[job] = wlast{outcome: outcome, tick: tick, at: t.now}
	return nil
}

// ScheduleRetry implements storekit.WorkTx.
func (t *workTx) ScheduleRetry(next worker.Delivery, delay time.Duration) error {
	t.g.retries[storekit.Token(&next)] = &wretry{due: t.now.Add(delay), d: next}
	return nil
}

// Dead implements storekit.WorkTx.
func (t *workTx) Dead(consumer string, d *worker.Delivery, deliveries int, msg string) error {
	b := t.s.b
	b.seq++
	t.g.dead = append(t.g.dead, worker.DeadLetter{
		ID:  strconv.FormatInt(t.now.UnixMilli(), 10) + "-" + strconv.FormatInt(b.seq, 10),
		Job: d.Job, Tick: d.Tick, Slot: d.Slot, Epoch: d.Epoch, Replica: d.Replica, Payload: d.Payload,
		Stream: d.Stream, Entry: d.ID, Attempts: d.Attempt, Deliveries: deliveries, Error: msg,
		Consumer: consumer, At: t.now.UTC(),
	})
	t.g.deadCount[d.Job]++
	return nil
}

// Note implements storekit.WorkTx.
func (t *workTx) Note(d *worker.Delivery, ev onetick.RunEvent) error {
	t.s.b.noteLocked(t.now, storekit.RunOf(d), ev)
	return nil
}
