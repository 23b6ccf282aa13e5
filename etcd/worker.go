package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// WorkerStore is the worker.Store of one consumer group on the backend's
// streams. Every method is one optimistic transaction (otx): the state it
// reads is compared in the commit, and a lost compare runs the method's
// decision again on fresh state. Begin, Finish and Heartbeat are
// storekit's, over workTx.
type WorkerStore struct {
	b     *Backend
	group string
	w     string // the group's key prefix
}

var _ worker.Store = (*WorkerStore)(nil)

// WorkerStore returns the worker store of group (default "onetick").
func (b *Backend) WorkerStore(group string) *WorkerStore {
	if group == "" {
		group = "onetick"
	}
	return &WorkerStore{b: b, group: group, w: b.p + "w/" + url.PathEscape(group) + "/"}
}

// streamEntry is a stream entry's value: the claim writes a TickRecord,
// a promoted retry or a replay also its attempt and its group.
type streamEntry struct {
	onetick.TickRecord
	Attempt int    `json:"attempt,omitempty"`
	Group   string `json:"group,omitempty"`
}

// pend is a pending entry of the group: delivered and not settled.
type pend struct {
	Owner string          `json:"owner"`
	Seen  int64           `json:"seen"` // ms of the delivery or heartbeat; 0: given back
	Count int             `json:"count"`
	D     worker.Delivery `json:"d"`
}

type until struct {
	Token string `json:"token,omitempty"`
	Until int64  `json:"until"`
}

type doneVal struct {
	Rec   worker.DoneRecord `json:"rec"`
	Until int64             `json:"until"`
}

type lastVal struct {
	Outcome worker.Outcome `json:"outcome"`
	Tick    string         `json:"tick"`
	At      time.Time      `json:"at"`
}

type placeVal struct {
	Slot onetick.Slot `json:"slot"`
	Seq  int64        `json:"seq"`
	Tok  string       `json:"tok"`
}

func esc(s string) string { return url.PathEscape(s) }

func (s *WorkerStore) curKey(stream string) string { return s.w + "cur/" + esc(stream) }
func (s *WorkerStore) pendPrefix(stream string) string {
	return s.w + "pend/" + esc(stream) + "/"
}
func (s *WorkerStore) pendKey(stream, id string) string {
	return s.pendPrefix(stream) + pad(seqOf(id))
}
func (s *WorkerStore) aliveKey(c string) string { return s.w + "alive/" + esc(c) }
func (s *WorkerStore) doneKey(t string) string  { return s.w + "done/" + esc(t) }
func (s *WorkerStore) markKey(n string) string  { return s.w + "mark/" + esc(n) }
func (s *WorkerStore) placePrefix(job string) string {
	return s.w + "place/" + esc(job) + "/"
}
func (s *WorkerStore) placeKey(d *worker.Delivery) string {
	return s.placePrefix(d.Job) + esc(storekit.Token(d))
}
func (s *WorkerStore) runPrefix(job string) string { return s.w + "run/" + esc(job) + "/" }
func (s *WorkerStore) runKey(d *worker.Delivery) string {
	return s.runPrefix(d.Job) + esc(storekit.Token(d))
}
func (s *WorkerStore) lastKey(job string) string  { return s.w + "last/" + esc(job) }
func (s *WorkerStore) retryPrefix() string        { return s.w + "retry/" }
func (s *WorkerStore) deadPrefix() string         { return s.w + "dead/" }
func (s *WorkerStore) deadNKey(job string) string { return s.w + "deadn/" + esc(job) }
func (s *WorkerStore) relKey() string             { return s.w + "released" }

func ms(t time.Time) int64 { return t.UnixMilli() }

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (s *WorkerStore) deliveryOf(stream string, e streamEntry) worker.Delivery {
	d := worker.Delivery{Stream: stream, ID: e.ID, Job: e.Job, Slot: e.Slot, Tick: e.Tick, Epoch: e.Epoch,
		Replica: e.Replica, Payload: e.Payload, Attempt: max(e.Attempt, 1), Version: e.Version}
	msPart, _, _ := strings.Cut(e.ID, "-")
	if n, err := strconv.ParseInt(msPart, 10, 64); err == nil {
		d.Enqueued = time.UnixMilli(n).UTC()
	}
	return d
}

// appendEntry appends d to its stream as a new entry of attempt for
// group ("": every group's), in t: the entry id comes from the stream
// sequence, as a claim's.
func (s *WorkerStore) appendEntry(t *otx, now time.Time, d worker.Delivery, attempt int, group string) error {
	v, ok, err := t.get(s.b.k("seq"))
	if err != nil {
		return err
	}
	var lastMs, seq int64
	if ok {
		a, c, _ := strings.Cut(v, "-")
		lastMs, _ = parseInt(a)
		seq, _ = parseInt(c)
	}
	at := max(ms(now), lastMs)
	seq++
	id := strconv.FormatInt(at, 10) + "-" + strconv.FormatInt(seq, 10)
	e := streamEntry{TickRecord: onetick.TickRecord{ID: id, Job: d.Job, Slot: d.Slot, Tick: d.Tick, Epoch: d.Epoch,
		Replica: d.Replica, Payload: d.Payload, Version: d.Version}, Attempt: attempt, Group: group}
	t.put(s.b.streamPrefix(d.Stream)+pad(seq), jsonOf(e))
	t.put(s.b.k("seq"), id)
	return nil
}

// Fetch implements worker.Store. While there is nothing new it waits on a
// watch of the stream sequence, which every append moves.
func (s *WorkerStore) Fetch(ctx context.Context, consumer string, streams []string, limit int, block time.Duration) ([]*worker.Delivery, error) {
	deadline := time.Now().Add(block)
	rot := int(time.Now().UnixNano())
	for {
		var out []*worker.Delivery
		var rev int64
		err := s.b.update(ctx, "fetch", func(t *otx) error {
			out = nil
			now := s.b.opts.Clock.Now()
			for k := range streams {
				if len(out) >= limit {
					break
				}
				key := streams[(k+rot)%len(streams)]
				var cur int64
				if v, ok, err := t.get(s.curKey(key)); err != nil {
					return err
				} else if ok {
					cur, _ = parseInt(v)
				}
				p := s.b.streamPrefix(key)
				kvs, err := t.scan(p+pad(cur+1), prefixEnd(p), int64(limit-len(out)), false)
				if err != nil {
					return err
				}
				for _, kv := range kvs {
					var e streamEntry
					if json.Unmarshal([]byte(kv.val), &e) != nil {
						continue
					}
					cur = seqOf(e.ID)
					if e.Group != "" && e.Group != s.group {
						continue // another group's retry or replay
					}
					d := s.deliveryOf(key, e)
					d.Deliveries = 1
					t.put(s.pendKey(key, d.ID), jsonOf(pend{Owner: consumer, Seen: ms(now), Count: 1, D: d}))
					out = append(out, &d)
				}
				if len(kvs) > 0 {
					t.put(s.curKey(key), strconv.FormatInt(cur, 10))
				}
			}
			rev = t.rev
			return nil
		})
		if err != nil || len(out) > 0 || limit <= 0 {
			return out, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, nil
		}
		if err := s.b.waitAppend(ctx, rev, wait); err != nil {
			return nil, nil
		}
	}
}

// waitAppend waits until the stream sequence moves after rev, for at most
// d; an error when ctx ends.
func (b *Backend) waitAppend(ctx context.Context, rev int64, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for range b.c.Watch(clientv3.WithRequireLeader(wctx), b.k("seq"), clientv3.WithRev(rev+1)) {
		return nil
	}
	return ctx.Err()
}

// alive reports whether consumer is alive at now.
func (s *WorkerStore) alive(t *otx, consumer string, now time.Time) (bool, error) {
	if consumer == "" {
		return false, nil
	}
	v, ok, err := t.get(s.aliveKey(consumer))
	if err != nil || !ok {
		return false, err
	}
	e, _ := parseInt(v)
	return ms(now) < e, nil
}

// Reclaim implements worker.Store.
func (s *WorkerStore) Reclaim(ctx context.Context, consumer string, streams []string, idle time.Duration, limit int) ([]*worker.Delivery, error) {
	var out []*worker.Delivery
	err := s.b.update(ctx, "reclaim", func(t *otx) error {
		out = nil
		now := s.b.opts.Clock.Now()
		for _, key := range streams {
			p := s.pendPrefix(key)
			kvs, err := t.scan(p, prefixEnd(p), 0, false)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				if len(out) >= limit {
					return nil
				}
				var pe pend
				if json.Unmarshal([]byte(kv.val), &pe) != nil {
					continue
				}
				if pe.Seen != 0 && ms(now)-pe.Seen < idle.Milliseconds() {
					if ok, err := s.alive(t, pe.Owner, now); err != nil {
						return err
					} else if ok {
						continue
					}
				}
				pe.Owner, pe.Seen = consumer, ms(now)
				pe.Count++
				pe.D.Deliveries = pe.Count
				t.put(kv.key, jsonOf(pe))
				d := pe.D
				out = append(out, &d)
			}
		}
		return nil
	})
	return out, err
}

// Register implements worker.Store.
func (s *WorkerStore) Register(ctx context.Context, consumer string, streams []string, live time.Duration) error {
	return s.b.update(ctx, "register", func(t *otx) error {
		now := s.b.opts.Clock.Now()
		for _, key := range streams {
			p := s.pendPrefix(key)
			kvs, err := t.scan(p, prefixEnd(p), 0, false)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				var pe pend
				if json.Unmarshal([]byte(kv.val), &pe) != nil || pe.Owner != consumer {
					continue
				}
				pe.Owner, pe.Seen = "", 0
				t.put(kv.key, jsonOf(pe))
			}
		}
		t.put(s.aliveKey(consumer), strconv.FormatInt(ms(now.Add(live)), 10))
		return nil
	})
}

// Begin implements worker.Store, by storekit.Begin in one transaction.
func (s *WorkerStore) Begin(ctx context.Context, consumer string, hold time.Duration, starts []worker.Start) (worker.BeginResult, error) {
	var res worker.BeginResult
	err := s.work(ctx, "begin", func(tx *workTx) error {
		a, err := storekit.Begin(tx, consumer, hold, starts)
		res = worker.BeginResult{Admissions: a, StoreTime: tx.now}
		return err
	})
	return res, err
}

// Heartbeat implements worker.Store, by storekit.Heartbeat.
func (s *WorkerStore) Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	var lost []int
	err := s.work(ctx, "heartbeat", func(tx *workTx) error {
		var err error
		lost, err = storekit.Heartbeat(tx, consumer, live, hold, holds)
		return err
	})
	return lost, err
}

// Finish implements worker.Store, by storekit.Finish.
func (s *WorkerStore) Finish(ctx context.Context, consumer string, fs []worker.Finish) ([]bool, error) {
	var owned []bool
	err := s.work(ctx, "finish", func(tx *workTx) error {
		var err error
		owned, err = storekit.Finish(tx, consumer, fs)
		return err
	})
	return owned, err
}

// work runs fn over a workTx in one optimistic transaction; a release of
// a marker or place bumps the group's released key in the same commit.
func (s *WorkerStore) work(ctx context.Context, what string, fn func(tx *workTx) error) error {
	return s.b.update(ctx, what, func(t *otx) error {
		tx := &workTx{s: s, t: t, now: s.b.opts.Clock.Now()}
		if err := fn(tx); err != nil {
			return err
		}
		if tx.notify {
			t.put(s.relKey(), strconv.FormatInt(tx.now.UnixNano(), 10))
		}
		return nil
	})
}

// PromoteDue implements worker.Store.
func (s *WorkerStore) PromoteDue(ctx context.Context, limit int) (worker.Promoted, error) {
	var p worker.Promoted
	err := s.b.update(ctx, "promote", func(t *otx) error {
		p = worker.Promoted{Next: -1}
		now := s.b.opts.Clock.Now()
		kvs, err := t.scan(s.retryPrefix(), prefixEnd(s.retryPrefix()), int64(limit+1), false)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			due, _ := parseInt(strings.SplitN(strings.TrimPrefix(kv.key, s.retryPrefix()), "/", 2)[0])
			if due > ms(now) || p.N >= limit {
				p.Next = max(time.Duration(due-ms(now))*time.Millisecond, 0)
				break
			}
			// Compare the retry key: a concurrent promoter of it loses.
			if _, _, err := t.get(kv.key); err != nil {
				return err
			}
			var d worker.Delivery
			if json.Unmarshal([]byte(kv.val), &d) == nil {
				if err := s.appendEntry(t, now, d, d.Attempt, s.group); err != nil {
					return err
				}
			}
			t.del(kv.key)
			p.N++
		}
		return nil
	})
	return p, err
}

// Released implements worker.Store: a watch of the group's released key.
func (s *WorkerStore) Released(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		for n := 0; ctx.Err() == nil && !s.b.closed.Load(); n++ {
			for range s.b.c.Watch(clientv3.WithRequireLeader(ctx), s.relKey()) {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			if backoff(ctx, min(n, 20)) != nil {
				return
			}
		}
	}()
	return ch
}

// Status implements worker.Inspector.
func (s *WorkerStore) Status(ctx context.Context, jobs []string) (worker.Status, error) {
	var st worker.Status
	err := s.b.update(ctx, "status", func(t *otx) error {
		now := s.b.opts.Clock.Now()
		st = worker.Status{StoreTime: now.UTC(), Jobs: make([]worker.JobStatus, len(jobs))}
		dead, err := s.b.c.Get(ctx, s.deadPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		st.Dead = dead.Count
		for i, j := range jobs {
			js := worker.JobStatus{Job: j}
			runs, err := t.scan(s.runPrefix(j), prefixEnd(s.runPrefix(j)), 0, false)
			if err != nil {
				return err
			}
			for _, r := range runs {
				if u, _ := parseInt(r.val); u > ms(now) {
					js.InFlight++
				}
			}
			if v, ok, err := t.get(s.deadNKey(j)); err != nil {
				return err
			} else if ok {
				js.Dead, _ = parseInt(v)
			}
			if v, ok, err := t.get(s.lastKey(j)); err != nil {
				return err
			} else if ok {
				var l lastVal
				if json.Unmarshal([]byte(v), &l) == nil {
					js.LastOutcome, js.LastTick, js.LastAt = l.Outcome, l.Tick, l.At.UTC()
				}
			}
			st.Jobs[i] = js
		}
		return nil
	})
	return st, err
}

// DoneRecords implements worker.Inspector.
func (s *WorkerStore) DoneRecords(ctx context.Context, ticks []string) (map[string]worker.DoneRecord, error) {
	keys := make([]string, len(ticks))
	for i, t := range ticks {
		keys[i] = s.doneKey(t)
	}
	snap, err := s.b.read(ctx, keys)
	if err != nil {
		return nil, err
	}
	now := ms(s.b.opts.Clock.Now())
	out := map[string]worker.DoneRecord{}
	for i, t := range ticks {
		var v doneVal
		if raw, ok := snap.val(keys[i]); ok && json.Unmarshal([]byte(raw), &v) == nil && now < v.Until {
			out[t] = v.Rec
		}
	}
	return out, nil
}

// DeadLetters implements worker.Inspector.
func (s *WorkerStore) DeadLetters(ctx context.Context, after string, n int) ([]worker.DeadLetter, error) {
	if err := s.b.check(ctx); err != nil {
		return nil, err
	}
	start := s.deadPrefix()
	if after != "" {
		start += pad(seqOf(after) + 1)
	}
	resp, err := s.b.c.Get(ctx, start, clientv3.WithRange(prefixEnd(s.deadPrefix())), clientv3.WithLimit(int64(n)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcd: dead letters: %w", err)
	}
	var out []worker.DeadLetter
	for _, kv := range resp.Kvs {
		var dl worker.DeadLetter
		if json.Unmarshal(kv.Value, &dl) == nil {
			out = append(out, dl)
		}
	}
	return out, nil
}

// Replay implements worker.Inspector.
func (s *WorkerStore) Replay(ctx context.Context, id string) (worker.DeadLetter, error) {
	var dl worker.DeadLetter
	err := s.b.update(ctx, "replay", func(t *otx) error {
		now := s.b.opts.Clock.Now()
		key := s.deadPrefix() + pad(seqOf(id))
		v, ok, err := t.get(key)
		if err != nil {
			return err
		}
		if !ok || json.Unmarshal([]byte(v), &dl) != nil || dl.ID != id {
			return fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
		}
		d := worker.Delivery{Stream: dl.Stream, Job: dl.Job, Slot: dl.Slot, Tick: dl.Tick, Epoch: dl.Epoch,
			Replica: dl.Replica, Payload: dl.Payload}
		if err := s.appendEntry(t, now, d, 1, s.group); err != nil {
			return err
		}
		if err := s.b.note(t, now, storekit.RunOf(&d), onetick.RunEvent{What: onetick.EventReplayed}); err != nil {
			return err
		}
		t.del(key)
		return s.addDead(t, dl.Job, -1)
	})
	return dl, err
}

func (s *WorkerStore) addDead(t *otx, job string, n int64) error {
	v, _, err := t.get(s.deadNKey(job))
	if err != nil {
		return err
	}
	c, _ := parseInt(v)
	if c+n <= 0 {
		t.del(s.deadNKey(job))
	} else {
		t.put(s.deadNKey(job), strconv.FormatInt(c+n, 10))
	}
	return nil
}

// AppendEntry appends r to a stream as a claim would, without the
// claim's checks (a duplicate of a tick, as after a store failover). A
// test hook.
func (b *Backend) AppendEntry(ctx context.Context, stream string, r onetick.TickRecord) error {
	s := b.WorkerStore("")
	return b.update(ctx, "append", func(t *otx) error {
		d := worker.Delivery{Stream: stream, Job: r.Job, Slot: r.Slot, Tick: r.Tick, Epoch: r.Epoch, Replica: r.Replica,
			Payload: r.Payload, Version: r.Version}
		// Not a group's entry: every group takes it.
		return s.appendEntry(t, b.opts.Clock.Now(), d, 0, "")
	})
}
