// Package memory is an in-process onetick backend with the same semantics
// as the Redis one: a lease with a fencing epoch, store-side fenced claims,
// per-tick records and streams, all judged by the backend's own clock. It
// keeps the run ledger (onetick.Ledger) under the same lock.
//
// It serves tests, the demo and the single-replica embedded default. It
// offers no high availability: its state lives and dies with the process.
package memory

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("memory: backend closed")

// Options configure a Backend.
type Options struct {
	// Clock is the store's clock; default the real clock.
	Clock clockwork.Clock
	// ClockTolerance: a claim for a slot more than this far in the future by
	// the store's clock is refused as early. Default 100ms.
	ClockTolerance time.Duration
	// HistoryLen is how many leadership terms are kept. Default 100.
	HistoryLen int
	// Ledger bounds the run ledger; zero fields take
	// onetick.DefaultLedgerMaxAge and DefaultLedgerMaxPerJob. A claim or
	// an enqueue trims the records of its jobs.
	Ledger onetick.LedgerRetention
}

// Backend is the in-process store. It is safe for concurrent use by many
// electors and schedulers in one process.
type Backend struct {
	opts Options

	mu       sync.Mutex
	lease    onetick.Lease // valid while held
	held     bool
	expires  time.Time // of the current or, once expired, the last lease
	epoch    onetick.Epoch
	terms    []entry // newest first
	last     map[string]onetick.Slot
	ticks    map[string]tickRecord
	streams  map[string][]onetick.TickRecord
	runs     map[string]*jobRuns // job -> its run ledger (ledger.go)
	seq      int64
	released storekit.Signal // the lease was released or expired
	closed   bool

	// Damage, injected by Damage (a test hook) as an operator's mistake
	// would damage the keys of a Redis store.
	dmg    damage
	ctl    controls
	jobs   storedJobs
	wstate *workerState // consumer groups of WorkerStore (worker.go); nil until used

	members map[string]time.Time // holder -> expiry (members.go); nil until used
	// Shards (shard.go): the views of a store by shard number; view is
	// true on a view, whose Close does nothing.
	views map[int]*Backend
	view  bool
	// shards is the recorded shard count (layout.go); 0: none recorded.
	shards int
}

// entry is one history entry: a term, or garbage.
type entry struct {
	term    onetick.Term
	garbage string
}

// damage is the memory backend's model of damaged state: what the Redis
// backend finds when a key holds another type or a value does not parse.
type damage struct {
	lease, epoch, terms, last *onetick.DamageError
	lastJob                   map[string]*onetick.DamageError // job -> damage
	stream                    map[string]*onetick.DamageError // stream -> damage
}

type tickRecord struct {
	token   string
	expires time.Time
}

var _ onetick.Backend = (*Backend)(nil)

// New returns an empty Backend.
func New(opts Options) *Backend {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.ClockTolerance == 0 {
		opts.ClockTolerance = 100 * time.Millisecond
	}
	if opts.HistoryLen == 0 {
		opts.HistoryLen = 100
	}
	opts.Ledger = storekit.Retention(opts.Ledger)
	return &Backend{
		opts:    opts,
		last:    map[string]onetick.Slot{},
		ticks:   map[string]tickRecord{},
		streams: map[string][]onetick.TickRecord{},
		runs:    map[string]*jobRuns{},
	}
}

// lock takes the mutex, expires a lease whose time is up, and reports the
// store's current time.
func (b *Backend) lock(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return time.Time{}, ErrClosed
	}
	now := b.opts.Clock.Now()
	if b.held && !now.Before(b.expires) {
		b.held = false
		b.released.Notify()
	}
	return now, nil
}

func (b *Backend) holds(l onetick.Lease) bool { return b.held && b.lease == l && b.dmg.lease == nil }

// Acquire implements onetick.Leaser.
func (b *Backend) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.Grant{}, err
	}
	defer b.mu.Unlock()
	if d := b.dmg.lease; d != nil {
		return onetick.Grant{}, d
	}
	if b.held {
		return onetick.Grant{}, &onetick.HeldError{Leader: onetick.LeaderInfo{Lease: b.lease, TTL: b.expires.Sub(now), Held: true}}
	}
	if d := b.dmg.epoch; d != nil {
		return onetick.Grant{}, d
	}
	// The epoch never repeats: the largest of the stored epoch + 1, the
	// history's newest + 1 and the clock in milliseconds.
	epoch := max(b.epoch+1, onetick.Epoch(now.UnixMilli()))
	var note *onetick.DamageError
	if b.dmg.terms != nil {
		note = b.dmg.terms
	} else {
		bad := 0
		for _, e := range b.terms {
			if e.garbage != "" {
				bad++
			} else if e.term.Epoch >= epoch {
				epoch = e.term.Epoch + 1
			}
		}
		if bad > 0 {
			note = &onetick.DamageError{Key: "terms", Kind: onetick.DamageValue, Repairable: true,
				Reason: strconv.Itoa(bad) + " entries are not terms; skipped"}
		}
		if len(b.terms) > 0 && b.terms[0].garbage == "" && b.terms[0].term.End.IsZero() {
			// The previous term ended without a release: its lease expired.
			b.terms[0].term.End = b.expires.UTC()
			b.terms[0].term.Reason = onetick.EndExpired
		}
		b.terms = append([]entry{{term: onetick.Term{Epoch: epoch, Holder: holder, Start: now.UTC()}}}, b.terms...)
		if len(b.terms) > b.opts.HistoryLen {
			b.terms = b.terms[:b.opts.HistoryLen]
		}
	}
	b.epoch = epoch
	b.lease = onetick.Lease{Holder: holder, Epoch: b.epoch}
	b.held = true
	b.expires = now.Add(ttl)
	return onetick.Grant{Lease: b.lease, StoreTime: now, Damage: note}, nil
}

// headNote reports damage of the history's newest entry, which renew and
// release skip.
func (b *Backend) headNote() *onetick.DamageError {
	if b.dmg.terms != nil {
		return b.dmg.terms
	}
	if len(b.terms) > 0 && b.terms[0].garbage != "" {
		return &onetick.DamageError{Key: "terms", Kind: onetick.DamageValue, Repairable: true,
			Reason: "the newest entry is not a term; skipped"}
	}
	return nil
}

// Renew implements onetick.Leaser.
func (b *Backend) Renew(ctx context.Context, l onetick.Lease, ttl time.Duration) (onetick.Grant, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.Grant{}, err
	}
	defer b.mu.Unlock()
	if !b.holds(l) {
		return onetick.Grant{}, onetick.ErrLeaseLost
	}
	b.expires = now.Add(ttl)
	return onetick.Grant{Lease: l, StoreTime: now, Damage: b.headNote()}, nil
}

// Release implements onetick.Leaser.
func (b *Backend) Release(ctx context.Context, l onetick.Lease) error {
	now, err := b.lock(ctx)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	if !b.holds(l) {
		return onetick.ErrLeaseLost
	}
	b.held = false
	b.expires = now
	if b.headNote() == nil && len(b.terms) > 0 && b.terms[0].term.Epoch == l.Epoch {
		b.terms[0].term.End = now.UTC()
		b.terms[0].term.Reason = onetick.EndReleased
	}
	b.released.Notify()
	return nil
}

// Leader implements onetick.Leaser.
func (b *Backend) Leader(ctx context.Context) (onetick.LeaderInfo, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.LeaderInfo{}, err
	}
	defer b.mu.Unlock()
	if d := b.dmg.lease; d != nil {
		return onetick.LeaderInfo{}, d
	}
	if !b.held {
		return onetick.LeaderInfo{}, nil
	}
	return onetick.LeaderInfo{Lease: b.lease, TTL: b.expires.Sub(now), Held: true}, nil
}

// Watch implements onetick.Leaser. The memory backend notices expiry only
// when it is next called, so watchers of an expiring lease rely on their
// timers, as they must with any backend.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} { return b.released.Watch(ctx) }

// Claim implements onetick.Claimer.
func (b *Backend) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	defer b.mu.Unlock()
	if !b.holds(l) {
		if b.dmg.terms == nil {
			for i := range b.terms {
				t := &b.terms[i].term
				if b.terms[i].garbage == "" && t.Epoch == l.Epoch && t.Reason != onetick.EndReleased {
					t.Reason = onetick.EndFenced
				}
			}
		}
		return onetick.ClaimResult{}, onetick.ErrFenced
	}
	if d := b.dmg.last; d != nil && len(ticks) > 0 {
		return onetick.ClaimResult{}, d
	}
	token := l.Token()
	limit := onetick.SlotOf(now.Add(b.opts.ClockTolerance))
	res := onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: now}
	for i, t := range ticks {
		id := t.ID()
		rec, seen := b.recordLocked(now, id)
		last, hasLast := b.last[t.Job]
		d, _ := storekit.Decide(t, token, limit, storekit.View{Seen: seen, Record: rec.token, HasLast: hasLast, Last: last,
			JobDamage: b.dmg.lastJob[t.Job], Paused: b.pausedLocked, StreamDamage: b.dmg.stream[t.Stream]})
		if d.Record != "" {
			b.ticks[id] = tickRecord{token: d.Record, expires: now.Add(t.Retention)}
		}
		if d.Move {
			b.last[t.Job] = t.Slot
		}
		if d.Append {
			b.appendLocked(now, t, id, onetick.TickRecord{Epoch: l.Epoch, Replica: l.Holder})
		}
		b.claimLedgerLocked(now, l, t, id, d)
		d.Answer(&res, i)
	}
	for _, t := range ticks {
		if last, ok := b.last[t.Job]; ok && b.dmg.lastJob[t.Job] == nil {
			b.dropPassedLocked(t.Job, last)
		}
	}
	for _, job := range storekit.Jobs(ticks) {
		b.trimLocked(now, job)
	}
	return res, nil
}

// recordLocked returns tick id's record unless it expired (then it is
// deleted).
func (b *Backend) recordLocked(now time.Time, id string) (tickRecord, bool) {
	rec, seen := b.ticks[id]
	if seen && !now.Before(rec.expires) {
		delete(b.ticks, id)
		return tickRecord{}, false
	}
	return rec, seen
}

// appendLocked appends tick t (identity id) to its stream; r carries the
// epoch, replica and kind of the entry.
func (b *Backend) appendLocked(now time.Time, t onetick.Tick, id string, r onetick.TickRecord) {
	b.seq++
	r.ID = strconv.FormatInt(now.UnixMilli(), 10) + "-" + strconv.FormatInt(b.seq, 10)
	r.Job, r.Slot, r.Tick, r.Payload, r.Version = t.Job, t.Slot, id, t.Payload, t.Version
	s := append(b.streams[t.Stream], r)
	if t.MaxLen > 0 && int64(len(s)) > t.MaxLen {
		s = append([]onetick.TickRecord(nil), s[int64(len(s))-t.MaxLen:]...)
	}
	b.streams[t.Stream] = s
	b.wakeAppendedLocked()
}

// LastFired implements onetick.Claimer.
func (b *Backend) LastFired(ctx context.Context, jobs []string) (map[string]onetick.Slot, error) {
	if _, err := b.lock(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if d := b.dmg.last; d != nil && len(jobs) > 0 {
		return nil, d
	}
	out := make(map[string]onetick.Slot, len(jobs))
	var bad onetick.DamageErrors
	for _, j := range jobs {
		if d := b.dmg.lastJob[j]; d != nil {
			bad = append(bad, d)
		} else if s, ok := b.last[j]; ok {
			out[j] = s
		}
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// Time implements onetick.Claimer.
func (b *Backend) Time(ctx context.Context) (time.Time, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return time.Time{}, err
	}
	b.mu.Unlock()
	return now, nil
}

// History implements onetick.Backend.
func (b *Backend) History(ctx context.Context, n int) ([]onetick.Term, error) {
	if _, err := b.lock(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if d := b.dmg.terms; d != nil {
		return nil, d
	}
	n = min(max(n, 0), len(b.terms))
	out := make([]onetick.Term, 0, n)
	var bad onetick.DamageErrors
	for i, e := range b.terms[:n] {
		if e.garbage != "" {
			bad = append(bad, &onetick.DamageError{Key: "terms", Field: strconv.Itoa(i), Kind: onetick.DamageValue,
				Value: e.garbage, Repairable: true, Reason: "entry is not a term; skipped"})
			continue
		}
		out = append(out, e.term)
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// ForceExpire makes the current lease expire now, as if its holder had
// paused past its TTL. It is a test hook.
func (b *Backend) ForceExpire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held {
		b.expires = b.opts.Clock.Now()
	}
}

// Stream returns a copy of the entries of a stream, oldest first.
func (b *Backend) Stream(key string) []onetick.TickRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]onetick.TickRecord(nil), b.streams[key]...)
}

// Close implements onetick.Backend. It closes the store and its shards'
// views; a view's Close does nothing (the views share the store).
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.view {
		return nil
	}
	b.closed = true
	b.closeViewsLocked()
	return nil
}
