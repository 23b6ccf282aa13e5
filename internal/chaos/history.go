// Package chaos holds the history of a chaos run (issue 22) and the checker
// that judges it. A run (`make chaos`, verify/chaos*_test.go) writes every
// observation as one JSON line; the checker reads the file afterwards,
// knowing nothing of the run but what the history says.
//
// The format is shared by the runner and the checker: change it in one
// place, here, and keep old histories readable (new fields only).
package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Kinds of events.
const (
	// KindRun opens a history: the store, the seed, the jobs (Jobs) and the
	// documented bounds (Bounds).
	KindRun = "run"
	// KindFault is a fault of the nemesis; Phase "start" or "end" (an
	// instantaneous fault such as kill -9 has only "start"). Fault names:
	// kill9, stop (SIGSTOP until its end, SIGCONT), term (SIGTERM and
	// restart: a rolling step), partition, latency, skew, store-kill,
	// store-restart, failover, worker-kill.
	KindFault = "fault"
	// KindLeader is a replica's view of its own leadership: Phase
	// "acquired" (with Epoch and TrustUntil, the local time until which the
	// replica trusts its lease), "renewed" (a new TrustUntil) or "lost".
	KindLeader = "leader"
	// KindEnqueue is a tick seen in the store's stream (or a relay's queue):
	// Job, Slot, Tick, Entry (the stream entry id or relay message id),
	// Epoch (the claim's epoch, when the entry carries it).
	KindEnqueue = "enqueue"
	// KindRunStart and KindRunEnd are a run of a tick's work (a `run:`
	// command or a handler): Job, Slot, Tick, Attempt, Worker (replica),
	// PID; KindRunEnd adds OK.
	KindRunStart = "run_start"
	KindRunEnd   = "run_end"
	// KindCounter is a counter read at the end of the run (or at a
	// replica's exit): Name (the metric, e.g.
	// scheduler_missed_ticks_total), Job, Replica, Value.
	KindCounter = "counter"
	// KindMissed is a slot the store's ledger (or a log line) reports as
	// missed/skipped and counted: Job, Slot, Replica.
	KindMissed = "missed"
	// KindOp is an operator's action through a replica's API while the
	// run goes on: Name "trigger" (Job, Tick: the key) or "backfill" (Job,
	// Slot: the first slot asked for, Note: the range and the answer). Its
	// outcome shows as enqueue events (TickKind "trigger" or "backfill").
	KindOp = "op"
	// KindLapse is a worker's own word, in its log, that a tick it ran
	// may run again elsewhere: it could not record the tick's result
	// (Note "not recorded": it no longer owned the tick, or gave up when
	// the store did not answer before the tick could be taken over), it
	// cancelled a handler or dropped a tick because its liveness lapsed
	// (Note "cancelled"), or a store call of its liveness failed (Note
	// "store call failed: <op>"). Replica (the worker), and Job and Tick
	// when the line names them. No fault is injected: this is how a
	// loaded machine stalls a worker, and the checker counts it like a
	// fault of that worker (run_twice).
	KindLapse = "lapse"
	// KindEnd closes a history: the time after which the checker expects
	// no more events; slots due before End minus Bounds.Settle must have
	// an outcome.
	KindEnd = "end"
)

// Event is one line of a history. Fields not used by a Kind are empty.
type Event struct {
	T    time.Time `json:"t"`
	Kind string    `json:"kind"`

	// run
	Store  string    `json:"store,omitempty"`
	Seed   int64     `json:"seed,omitempty"`
	Jobs   []JobSpec `json:"jobs,omitempty"`
	Bounds *Bounds   `json:"bounds,omitempty"`

	// fault
	Fault  string `json:"fault,omitempty"`
	Phase  string `json:"phase,omitempty"`
	Target string `json:"target,omitempty"` // a replica, "store", a store node, a worker

	// leader, counter, missed
	Replica    string    `json:"replica,omitempty"`
	Epoch      int64     `json:"epoch,omitempty"`
	TrustUntil time.Time `json:"trust_until,omitzero"`

	// enqueue, run_start, run_end, missed, counter
	Job     string `json:"job,omitempty"`
	Slot    int64  `json:"slot,omitempty"` // Unix ms; 0 for a trigger
	Tick    string `json:"tick,omitempty"`
	Entry   string `json:"entry,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Worker  string `json:"worker,omitempty"`
	PID     int    `json:"pid,omitempty"`
	OK      *bool  `json:"ok,omitempty"`
	// TickKind is the entry's kind (enqueue): "trigger" or "backfill" for
	// a manual tick, empty for a scheduled slot.
	TickKind string `json:"tick_kind,omitempty"`
	// At is the store's time of the append (enqueue), when the entry id
	// carries it (Redis stream ids, PostgreSQL's entry ids).
	At time.Time `json:"at,omitzero"`

	// counter
	Name  string  `json:"name,omitempty"`
	Value float64 `json:"value,omitempty"`

	// Note is free text for a human reading the history.
	Note string `json:"note,omitempty"`
}

// JobSpec is a job of the run as the checker needs it.
type JobSpec struct {
	Name string `json:"name"`
	// Every is the job's period (the chaos jobs are "@every <d>").
	Every time.Duration `json:"every"`
	// Prefer is "missed" or "duplicate".
	Prefer string `json:"prefer"`
	// Grace is the job's grace (a slot fired later than this after it was
	// due is skipped and counted, for prefer: missed).
	Grace time.Duration `json:"grace,omitempty"`
	// Run is true when ticks of the job are run by workers (run_start /
	// run_end events are expected), false when they are only enqueued.
	Run bool `json:"run,omitempty"`
	// From is the first slot (Unix ms) the run expects of the job.
	From int64 `json:"from"`
}

// Bounds are the documented limits the checker judges by.
type Bounds struct {
	// MaxSkew is the clock skew the run injects at most (within the
	// documented bound).
	MaxSkew time.Duration `json:"max_skew"`
	// Settle is how long before End a slot may still be without an outcome.
	Settle time.Duration `json:"settle"`
	// AsyncLoss is true for a store whose documented limit allows a lost
	// acknowledged claim (a Sentinel or Cluster failover, in either
	// durability mode: README "Redis failover in general"): a slot
	// enqueued twice across such a failover is reported as the documented
	// limit, not a violation. (The name is older than the finding that
	// `replicated` narrows the window without closing it.)
	AsyncLoss bool `json:"async_loss,omitempty"`
	// TickRetention is how long a scheduled tick's record is kept (three
	// intervals of its job, README): a backfill (TickKind "backfill") of
	// a slot enqueued longer ago than that enqueues it again, as
	// documented; within it the backfill is refused as a duplicate.
	TickRetention time.Duration `json:"tick_retention,omitempty"`
}

// Writer appends events to a history, one JSON line each, safe for
// concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
	now func() time.Time
}

// NewWriter returns a Writer on w; events without T get now().
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriter(w), now: time.Now}
}

// Add appends e.
func (w *Writer) Add(e Event) {
	if e.T.IsZero() {
		e.T = w.now()
	}
	b, err := json.Marshal(e)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if err != nil {
		w.err = err
		return
	}
	b = append(b, '\n')
	_, w.err = w.w.Write(b)
}

// Flush writes what is buffered and returns the first error of any Add.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// Read parses a history; a line that does not parse is an error naming it.
func Read(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var out []Event
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %v", line, err)
		}
		if e.Kind == "" {
			return nil, fmt.Errorf("history line %d: no kind", line)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
