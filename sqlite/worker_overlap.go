package sqlite

import (
	"time"

	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// Liveness and overlap. A consumer is alive while its w_alive row has not
// expired. A job's run marker is the w_markers row storekit.RunMarker (a
// lease of hold); it holds the job while unexpired and while the entry it
// names is pending and owned by a live consumer (storekit decides). Its
// waiter places are w_waiters rows, which count while their entry is
// pending.

// SetAlive implements storekit.WorkTx.
func (t *workTx) SetAlive(consumer string, live time.Duration) error {
	return t.o.exec(`INSERT INTO w_alive (grp, consumer, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (grp, consumer) DO UPDATE SET expires_ms = excluded.expires_ms`, t.s.group, consumer, t.o.ms+live.Milliseconds())
}

// SetMarker implements storekit.WorkTx.
func (t *workTx) SetMarker(name, tok string, hold time.Duration) error {
	return t.o.exec(`INSERT INTO w_markers (grp, name, token, expires_ms) VALUES (?, ?, ?, ?)
		ON CONFLICT (grp, name) DO UPDATE SET token = excluded.token, expires_ms = excluded.expires_ms`,
		t.s.group, name, tok, t.o.ms+hold.Milliseconds())
}

// DropMarker implements storekit.WorkTx.
func (t *workTx) DropMarker(name, tok string) (bool, error) {
	return t.changed("DELETE FROM w_markers WHERE grp = ? AND name = ? AND token = ?", t.s.group, name, tok)
}

// PendingAlive implements storekit.WorkTx.
func (t *workTx) PendingAlive(tok string) (bool, error) {
	stream, id := storekit.SplitToken(tok)
	var alive bool
	err := t.o.row(`SELECT EXISTS (SELECT 1 FROM w_pending p JOIN w_alive a ON a.grp = p.grp AND a.consumer = p.consumer
		WHERE p.grp = ? AND p.stream = ? AND p.seq = ? AND a.expires_ms > ?)`, t.s.group, stream, seqOf(id), t.o.ms).Scan(&alive)
	return alive, err
}

// Places implements storekit.WorkTx.
func (t *workTx) Places(d *worker.Delivery) (worker.OverlapState, error) {
	var st worker.OverlapState
	if err := t.o.exec(`DELETE FROM w_waiters WHERE grp = ? AND job = ? AND NOT EXISTS (SELECT 1 FROM w_pending p
		WHERE p.grp = w_waiters.grp AND p.stream = w_waiters.stream AND p.seq = w_waiters.seq)`, t.s.group, d.Job); err != nil {
		return st, err
	}
	seq := seqOf(d.ID)
	err := t.o.row(`SELECT coalesce(max(stream = ?3 AND seq = ?4), 0), coalesce(sum(NOT (stream = ?3 AND seq = ?4)), 0),
			coalesce(max(NOT (stream = ?3 AND seq = ?4) AND (slot < ?5 OR (slot = ?5 AND seq < ?4))), 0)
		FROM w_waiters WHERE grp = ?1 AND job = ?2`, t.s.group, d.Job, d.Stream, seq, int64(d.Slot)).
		Scan(&st.HasPlace, &st.Waiting, &st.LowerWaiting)
	return st, err
}

// LowerPending implements storekit.WorkTx.
func (t *workTx) LowerPending(d *worker.Delivery) (bool, error) {
	var found bool
	err := t.o.row(`SELECT EXISTS (SELECT 1 FROM w_pending p WHERE p.grp = ? AND p.stream = ? AND p.seq < ? AND p.job = ? AND p.slot <= ?
		AND NOT EXISTS (SELECT 1 FROM w_waiters w WHERE w.grp = p.grp AND w.stream = p.stream AND w.seq = p.seq))`,
		t.s.group, d.Stream, seqOf(d.ID), d.Job, int64(d.Slot)).Scan(&found)
	return found, err
}

// AddPlace implements storekit.WorkTx.
func (t *workTx) AddPlace(d *worker.Delivery) error {
	return t.o.exec(`INSERT INTO w_waiters (grp, stream, seq, job, slot) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		t.s.group, d.Stream, seqOf(d.ID), d.Job, int64(d.Slot))
}

// HasPlace implements storekit.WorkTx.
func (t *workTx) HasPlace(d *worker.Delivery) (bool, error) {
	var has bool
	err := t.o.row("SELECT EXISTS (SELECT 1 FROM w_waiters WHERE grp = ? AND stream = ? AND seq = ?)", t.s.group, d.Stream, seqOf(d.ID)).Scan(&has)
	return has, err
}

// DropPlace implements storekit.WorkTx.
func (t *workTx) DropPlace(d *worker.Delivery) (bool, error) {
	return t.changed("DELETE FROM w_waiters WHERE grp = ? AND stream = ? AND seq = ?", t.s.group, d.Stream, seqOf(d.ID))
}

// Notify implements storekit.WorkTx: the Released channels of this
// process are told once, after the commit.
func (t *workTx) Notify() {
	if !t.notify {
		t.notify = true
		t.o.after = append(t.o.after, t.s.signal().Notify)
	}
}
