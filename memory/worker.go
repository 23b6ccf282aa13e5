package memory

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// WorkerStore is the in-process worker.Store of one consumer group on the
// backend's streams. Its state lives in the Backend, under the Backend's
// lock, so every WorkerStore of one group on one Backend shares it, and the
// store's clock (Options.Clock) judges idle times, expiry and due times.
type WorkerStore struct {
	b     *Backend
	group string
}

var _ worker.Store = (*WorkerStore)(nil)

// WorkerStore returns the worker store of group (default "onetick").
func (b *Backend) WorkerStore(group string) *WorkerStore {
	if group == "" {
		group = "onetick"
	}
	return &WorkerStore{b: b, group: group}
}

// workerState is every group's state, plus what the stream entries that
// workers append carry beyond a TickRecord.
type workerState struct {
	groups   map[string]*wgroup
	extras   map[string]entryExtra // entry id -> attempt and group of a retry or replay
	appended storekit.Bell         // rung when a stream grows
}

type entryExtra struct {
	attempt int
	group   string
}

type wgroup struct {
	streams   map[string]*wstream
	done      map[string]wdone
	retries   map[string]*wretry
	dead      []worker.DeadLetter // oldest first
	deadCount map[string]int64
	last      map[string]wlast
	running   map[string]wrun              // token -> in-flight run
	markers   map[string]wmarker           // storekit.RunMarker(job) -> marker
	waiters   map[string]map[string]wplace // job -> token -> waiter place
	alive     map[string]time.Time         // consumer -> liveness expiry
	released  storekit.Signal              // a run marker or waiter place was freed
	sweepAt   time.Time
	rot       int // fetch rotation
}

type wstream struct {
	last int64               // sequence of the newest entry handed to the group
	pel  map[string]*pending // entries delivered and not acknowledged
}

type pending struct {
	consumer  string
	delivered time.Time // zero: given back, idle forever
	count     int
	d         worker.Delivery
}

type wdone struct {
	rec     worker.DoneRecord
	expires time.Time
}

type wretry struct {
	due time.Time
	d   worker.Delivery
}

type wlast struct {
	outcome worker.Outcome
	tick    string
	at      time.Time
}

type wrun struct {
	job     string
	expires time.Time
}

type wmarker struct {
	token   string
	expires time.Time
}

// wakeAppendedLocked wakes fetches waiting for new entries. Claim calls it.
func (b *Backend) wakeAppendedLocked() {
	if b.wstate != nil {
		b.wstate.appended.Ring()
	}
}

// lock takes the backend's lock and returns the group's state and the
// store's time. The caller unlocks b.mu.
func (s *WorkerStore) lock(ctx context.Context) (*wgroup, time.Time, error) {
	now, err := s.b.lock(ctx)
	if err != nil {
		return nil, now, err
	}
	b := s.b
	if b.wstate == nil {
		b.wstate = &workerState{groups: map[string]*wgroup{}, extras: map[string]entryExtra{}}
	}
	g := b.wstate.groups[s.group]
	if g == nil {
		g = &wgroup{streams: map[string]*wstream{}, done: map[string]wdone{}, retries: map[string]*wretry{},
			deadCount: map[string]int64{}, last: map[string]wlast{}, running: map[string]wrun{},
			markers: map[string]wmarker{}, waiters: map[string]map[string]wplace{}, alive: map[string]time.Time{}}
		b.wstate.groups[s.group] = g
	}
	if now.After(g.sweepAt) {
		g.sweep(now)
		g.sweepAt = now.Add(time.Minute)
	}
	return g, now, nil
}

// sweep drops expired records, which every reader also ignores.
func (g *wgroup) sweep(now time.Time) {
	for k, d := range g.done {
		if !now.Before(d.expires) {
			delete(g.done, k)
		}
	}
	for k, r := range g.running {
		if !now.Before(r.expires) {
			delete(g.running, k)
		}
	}
	for k, m := range g.markers {
		if !now.Before(m.expires) {
			delete(g.markers, k)
		}
	}
	for c, e := range g.alive {
		if !now.Before(e) {
			delete(g.alive, c)
		}
	}
}

func (g *wgroup) stream(key string) *wstream {
	st := g.streams[key]
	if st == nil {
		st = &wstream{pel: map[string]*pending{}}
		g.streams[key] = st
	}
	return st
}

func (g *wgroup) marker(key string, now time.Time) (wmarker, bool) {
	m, ok := g.markers[key]
	if ok && !now.Before(m.expires) {
		delete(g.markers, key)
		return wmarker{}, false
	}
	return m, ok
}

// seqOf is the sequence number of an entry id "ms-seq": entries of every
// stream are numbered by one counter, so it orders them.
func seqOf(id string) int64 {
	_, s, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (s *WorkerStore) deliveryOf(stream string, r onetick.TickRecord) worker.Delivery {
	d := worker.Delivery{Stream: stream, ID: r.ID, Job: r.Job, Slot: r.Slot, Tick: r.Tick, Epoch: r.Epoch,
		Replica: r.Replica, Payload: r.Payload, Attempt: 1, Version: r.Version}
	if x, ok := s.b.wstate.extras[r.ID]; ok {
		d.Attempt = x.attempt
	}
	ms, _, _ := strings.Cut(r.ID, "-")
	if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
		d.Enqueued = time.UnixMilli(n).UTC()
	}
	return d
}

// appendLocked appends a worker's entry to a stream.
func (s *WorkerStore) appendLocked(now time.Time, d worker.Delivery, attempt int) string {
	b := s.b
	b.seq++
	id := strconv.FormatInt(now.UnixMilli(), 10) + "-" + strconv.FormatInt(b.seq, 10)
	b.streams[d.Stream] = append(b.streams[d.Stream], onetick.TickRecord{ID: id, Job: d.Job, Slot: d.Slot,
		Tick: d.Tick, Epoch: d.Epoch, Replica: d.Replica, Payload: d.Payload, Version: d.Version})
	b.wstate.extras[id] = entryExtra{attempt: attempt, group: s.group}
	b.wakeAppendedLocked()
	return id
}

// Fetch implements worker.Store.
func (s *WorkerStore) Fetch(ctx context.Context, consumer string, streams []string, max int, block time.Duration) ([]*worker.Delivery, error) {
	var timer <-chan time.Time
	for {
		g, now, err := s.lock(ctx)
		if err != nil {
			return nil, err
		}
		out := s.takeNewLocked(g, now, consumer, streams, max)
		if len(out) > 0 || max <= 0 {
			s.b.mu.Unlock()
			return out, nil
		}
		wake := s.b.wstate.appended.Wait()
		s.b.mu.Unlock()
		if timer == nil {
			t := s.b.opts.Clock.NewTimer(block)
			defer t.Stop()
			timer = t.Chan()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer:
			return nil, nil
		case <-wake:
		}
	}
}

func (s *WorkerStore) takeNewLocked(g *wgroup, now time.Time, consumer string, streams []string, max int) []*worker.Delivery {
	var out []*worker.Delivery
	g.rot++
	for k := range streams {
		// Start at a different stream each time, so none starves.
		key := streams[(k+g.rot)%len(streams)]
		st := g.stream(key)
		recs := s.b.streams[key]
		i := sort.Search(len(recs), func(i int) bool { return seqOf(recs[i].ID) > st.last })
		for ; i < len(recs) && len(out) < max; i++ {
			r := recs[i]
			st.last = seqOf(r.ID)
			if x, ok := s.b.wstate.extras[r.ID]; ok && x.group != s.group {
				continue // another group's retry or replay
			}
			d := s.deliveryOf(key, r)
			d.Deliveries = 1
			st.pel[r.ID] = &pending{consumer: consumer, delivered: now, count: 1, d: d}
			c := d
			out = append(out, &c)
		}
		if len(out) >= max {
			break
		}
	}
	return out
}

// Reclaim implements worker.Store.
func (s *WorkerStore) Reclaim(ctx context.Context, consumer string, streams []string, idle time.Duration, max int) ([]*worker.Delivery, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.b.mu.Unlock()
	var out []*worker.Delivery
	for _, key := range streams {
		st := g.stream(key)
		ids := make([]string, 0, len(st.pel))
		for id := range st.pel {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, k int) bool { return seqOf(ids[i]) < seqOf(ids[k]) })
		for _, id := range ids {
			if len(out) >= max {
				return out, nil
			}
			p := st.pel[id]
			if !p.delivered.IsZero() && g.isAlive(p.consumer, now) && now.Sub(p.delivered) < idle {
				continue
			}
			p.consumer, p.delivered = consumer, now
			p.count++
			p.d.Deliveries = p.count
			c := p.d
			out = append(out, &c)
		}
	}
	return out, nil
}

// owned returns the pending entry of d if consumer owns it.
func (g *wgroup) owned(consumer string, d *worker.Delivery) *pending {
	st := g.streams[d.Stream]
	if st == nil {
		return nil
	}
	p := st.pel[d.ID]
	if p == nil || p.consumer != consumer {
		return nil
	}
	return p
}

// Begin implements worker.Store, by storekit.Begin under the backend's
// lock.
func (s *WorkerStore) Begin(ctx context.Context, consumer string, hold time.Duration, starts []worker.Start) (worker.BeginResult, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return worker.BeginResult{}, err
	}
	defer s.b.mu.Unlock()
	a, err := storekit.Begin(&workTx{s: s, g: g, now: now}, consumer, hold, starts)
	if err != nil {
		return worker.BeginResult{}, err
	}
	return worker.BeginResult{Admissions: a, StoreTime: now}, nil
}

// Heartbeat implements worker.Store, by storekit.Heartbeat under the
// backend's lock.
func (s *WorkerStore) Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.b.mu.Unlock()
	return storekit.Heartbeat(&workTx{s: s, g: g, now: now}, consumer, live, hold, holds)
}

// Register implements worker.Store.
func (s *WorkerStore) Register(ctx context.Context, consumer string, streams []string, live time.Duration) error {
	g, now, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer s.b.mu.Unlock()
	for _, key := range streams {
		for _, p := range g.stream(key).pel {
			if p.consumer == consumer {
				p.consumer, p.delivered = "", time.Time{}
			}
		}
	}
	g.alive[consumer] = now.Add(live)
	return nil
}

// Finish implements worker.Store, by storekit.Finish under the backend's
// lock.
func (s *WorkerStore) Finish(ctx context.Context, consumer string, fs []worker.Finish) ([]bool, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.b.mu.Unlock()
	return storekit.Finish(&workTx{s: s, g: g, now: now}, consumer, fs)
}

// PromoteDue implements worker.Store.
func (s *WorkerStore) PromoteDue(ctx context.Context, limit int) (worker.Promoted, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return worker.Promoted{}, err
	}
	defer s.b.mu.Unlock()
	keys := make([]string, 0, len(g.retries))
	for k := range g.retries {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, k int) bool {
		a, b := g.retries[keys[i]], g.retries[keys[k]]
		if !a.due.Equal(b.due) {
			return a.due.Before(b.due)
		}
		return keys[i] < keys[k]
	})
	p := worker.Promoted{Next: -1}
	for _, k := range keys {
		r := g.retries[k]
		if r.due.After(now) || p.N >= limit {
			p.Next = max(r.due.Sub(now), 0)
			break
		}
		s.appendLocked(now, r.d, r.d.Attempt)
		delete(g.retries, k)
		p.N++
	}
	return p, nil
}

// Released implements worker.Store.
func (s *WorkerStore) Released(ctx context.Context) <-chan struct{} {
	g, _, err := s.lock(context.WithoutCancel(ctx))
	if err != nil {
		out := make(chan struct{})
		close(out)
		return out
	}
	s.b.mu.Unlock()
	return g.released.Watch(ctx)
}
