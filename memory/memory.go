// Package memory is an in-process onetick backend with the same semantics
// as the Redis one: a lease with a fencing epoch, store-side fenced claims,
// per-tick records and streams, all judged by the backend's own clock.
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
	terms    []onetick.Term // newest first
	last     map[string]onetick.Slot
	ticks    map[string]tickRecord
	streams  map[string][]onetick.TickRecord
	seq      int64
	watchers map[chan struct{}]struct{}
	closed   bool
	wstate   *workerState // consumer groups of WorkerStore (worker.go); nil until used
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
	return &Backend{
		opts:     opts,
		last:     map[string]onetick.Slot{},
		ticks:    map[string]tickRecord{},
		streams:  map[string][]onetick.TickRecord{},
		watchers: map[chan struct{}]struct{}{},
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
		b.notifyLocked()
	}
	return now, nil
}

func (b *Backend) notifyLocked() {
	for ch := range b.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (b *Backend) holds(l onetick.Lease) bool { return b.held && b.lease == l }

// Acquire implements onetick.Leaser.
func (b *Backend) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.Grant{}, err
	}
	defer b.mu.Unlock()
	if b.held {
		return onetick.Grant{}, &onetick.HeldError{Leader: onetick.LeaderInfo{Lease: b.lease, TTL: b.expires.Sub(now), Held: true}}
	}
	if len(b.terms) > 0 && b.terms[0].End.IsZero() {
		// The previous term ended without a release: its lease expired.
		b.terms[0].End = b.expires.UTC()
		b.terms[0].Reason = onetick.EndExpired
	}
	b.epoch++
	b.lease = onetick.Lease{Holder: holder, Epoch: b.epoch}
	b.held = true
	b.expires = now.Add(ttl)
	b.terms = append([]onetick.Term{{Epoch: b.epoch, Holder: holder, Start: now.UTC()}}, b.terms...)
	if len(b.terms) > b.opts.HistoryLen {
		b.terms = b.terms[:b.opts.HistoryLen]
	}
	return onetick.Grant{Lease: b.lease, StoreTime: now}, nil
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
	return onetick.Grant{Lease: l, StoreTime: now}, nil
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
	if len(b.terms) > 0 && b.terms[0].Epoch == l.Epoch {
		b.terms[0].End = now.UTC()
		b.terms[0].Reason = onetick.EndReleased
	}
	b.notifyLocked()
	return nil
}

// Leader implements onetick.Leaser.
func (b *Backend) Leader(ctx context.Context) (onetick.LeaderInfo, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.LeaderInfo{}, err
	}
	defer b.mu.Unlock()
	if !b.held {
		return onetick.LeaderInfo{}, nil
	}
	return onetick.LeaderInfo{Lease: b.lease, TTL: b.expires.Sub(now), Held: true}, nil
}

// Watch implements onetick.Leaser. The memory backend notices expiry only
// when it is next called, so watchers of an expiring lease rely on their
// timers, as they must with any backend.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	in := make(chan struct{}, 1)
	out := make(chan struct{}, 1)
	b.mu.Lock()
	b.watchers[in] = struct{}{}
	b.mu.Unlock()
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.watchers, in)
			b.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-in:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// Claim implements onetick.Claimer.
func (b *Backend) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	now, err := b.lock(ctx)
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	defer b.mu.Unlock()
	if !b.holds(l) {
		for i := range b.terms {
			if b.terms[i].Epoch == l.Epoch && b.terms[i].Reason != onetick.EndReleased {
				b.terms[i].Reason = onetick.EndFenced
			}
		}
		return onetick.ClaimResult{}, onetick.ErrFenced
	}
	token := l.Token()
	limit := onetick.SlotOf(now.Add(b.opts.ClockTolerance))
	res := onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: now}
	for i, t := range ticks {
		id := t.ID()
		rec, seen := b.ticks[id]
		if seen && !now.Before(rec.expires) {
			delete(b.ticks, id)
			seen = false
		}
		last, hasLast := b.last[t.Job]
		switch {
		case t.Slot > limit:
			res.Outcomes[i] = onetick.Early
		case seen && rec.token == token:
			res.Outcomes[i] = onetick.Claimed // a retry of this term's own claim
		case seen, !t.OutOfOrder && hasLast && t.Slot <= last:
			res.Outcomes[i] = onetick.Duplicate
		default:
			b.ticks[id] = tickRecord{token: token, expires: now.Add(t.Retention)}
			if !t.OutOfOrder {
				b.last[t.Job] = t.Slot
			}
			b.seq++
			s := append(b.streams[t.Stream], onetick.TickRecord{
				ID:  strconv.FormatInt(now.UnixMilli(), 10) + "-" + strconv.FormatInt(b.seq, 10),
				Job: t.Job, Slot: t.Slot, Tick: id, Epoch: l.Epoch, Replica: l.Holder, Payload: t.Payload,
			})
			if t.MaxLen > 0 && int64(len(s)) > t.MaxLen {
				s = append([]onetick.TickRecord(nil), s[int64(len(s))-t.MaxLen:]...)
			}
			b.streams[t.Stream] = s
			b.wakeAppendedLocked()
			res.Outcomes[i] = onetick.Claimed
		}
	}
	return res, nil
}

// LastFired implements onetick.Claimer.
func (b *Backend) LastFired(ctx context.Context, jobs []string) (map[string]onetick.Slot, error) {
	if _, err := b.lock(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	out := make(map[string]onetick.Slot, len(jobs))
	for _, j := range jobs {
		if s, ok := b.last[j]; ok {
			out[j] = s
		}
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
	n = min(max(n, 0), len(b.terms))
	return append([]onetick.Term(nil), b.terms[:n]...), nil
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

// Close implements onetick.Backend.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}
