package memory

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/onetick/onetick"
)

// The memory backend's keys, as DamageError names them.
const (
	keyLeader = "leader"
	keyEpoch  = "epoch"
	keyTerms  = "terms"
	keyLast   = "last"
)

// DamageLease damages the lease as an operator's mistake damages the Redis
// lease key: onetick.DamageType (another type), DamageValue (a value that
// is not "holder|epoch") or DamageNoExpiry (a lease that never expires). A
// lease held until then is lost. It is a test hook.
func (b *Backend) DamageLease(kind onetick.DamageKind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := &onetick.DamageError{Key: keyLeader, Kind: kind, Repairable: true, Reason: "damaged lease (" + string(kind) + ")"}
	if kind != onetick.DamageType {
		d.Value = "injected|1"
		if kind == onetick.DamageValue {
			d.Value = "injected"
		}
	}
	b.dmg.lease = d
	b.held = false
}

// DamageEpoch damages the epoch counter (another type, or a value that is
// not an integer). It is a test hook.
func (b *Backend) DamageEpoch(kind onetick.DamageKind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := &onetick.DamageError{Key: keyEpoch, Kind: kind, Repairable: true, Reason: "damaged epoch (" + string(kind) + ")"}
	if kind == onetick.DamageValue {
		d.Value = "not a number"
	}
	b.dmg.epoch = d
}

// DeleteEpoch forgets the epoch counter, as a deleted key would. It is a
// test hook.
func (b *Backend) DeleteEpoch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.epoch = 0
	b.dmg.epoch = nil
}

// SetEpoch sets the epoch counter, as a store that lost increments would
// have it. It is a test hook.
func (b *Backend) SetEpoch(e onetick.Epoch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.epoch = e
	b.dmg.epoch = nil
}

// DamageHistory damages the leadership history: the whole of it (another
// type) or, with whole false, one new garbage entry at its head. It is a
// test hook.
func (b *Backend) DamageHistory(whole bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if whole {
		b.dmg.terms = &onetick.DamageError{Key: keyTerms, Kind: onetick.DamageType, Repairable: true, Reason: "damaged history (type)"}
		return
	}
	b.terms = append([]entry{{garbage: "not json"}}, b.terms...)
}

// DamageLast damages the last-fired slots: of one job (a value that does
// not parse) or, with job "", the whole of them (another type). It is a
// test hook.
func (b *Backend) DamageLast(job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if job == "" {
		b.dmg.last = &onetick.DamageError{Key: keyLast, Kind: onetick.DamageType, Repairable: true, Reason: "damaged last-fired slots (type)"}
		return
	}
	if b.dmg.lastJob == nil {
		b.dmg.lastJob = map[string]*onetick.DamageError{}
	}
	b.dmg.lastJob[job] = &onetick.DamageError{Key: keyLast, Field: job, Job: job, Kind: onetick.DamageValue, Value: "garbage",
		Repairable: true, Reason: `last-fired slot "garbage" is not an integer (Unix ms)`}
}

// DamageStream makes a stream unusable, as a Redis key of another type
// where the stream should be. It is a test hook.
func (b *Backend) DamageStream(stream string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dmg.stream == nil {
		b.dmg.stream = map[string]*onetick.DamageError{}
	}
	b.dmg.stream[stream] = &onetick.DamageError{Key: stream, Kind: onetick.DamageType, Reason: "not a stream"}
}

// FixStream undoes DamageStream, as an operator deleting the key would.
// It is a test hook.
func (b *Backend) FixStream(stream string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.dmg.stream, stream)
}

// Inspect implements onetick.Doctor.
func (b *Backend) Inspect(ctx context.Context, streams map[string]string) ([]*onetick.DamageError, error) {
	if _, err := b.lock(ctx); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	var out []*onetick.DamageError
	for _, d := range []*onetick.DamageError{b.dmg.lease, b.dmg.epoch, b.dmg.terms, b.dmg.last} {
		if d != nil {
			out = append(out, d)
		}
	}
	if b.dmg.terms == nil {
		for i, e := range b.terms {
			if e.garbage != "" {
				out = append(out, &onetick.DamageError{Key: keyTerms, Field: strconv.Itoa(i), Kind: onetick.DamageValue,
					Value: e.garbage, Repairable: true, Reason: "entry is not a term; skipped"})
			}
		}
	}
	jobs := make([]string, 0, len(streams))
	for j := range streams {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		if d := b.dmg.lastJob[j]; d != nil && b.dmg.last == nil {
			out = append(out, d)
		}
	}
	for _, j := range jobs {
		if d := b.dmg.stream[streams[j]]; d != nil {
			c := *d
			c.Job = j
			out = append(out, &c)
		}
	}
	return out, nil
}

// Repair implements onetick.Doctor. The memory backend keeps nothing it
// moves aside: the name it returns says what was dropped.
func (b *Backend) Repair(ctx context.Context, d *onetick.DamageError, confirmed bool) (string, error) {
	if _, err := b.lock(ctx); err != nil {
		return "", err
	}
	defer b.mu.Unlock()
	if d == nil || !d.Repairable {
		return "", fmt.Errorf("%w: not one of onetick's keys", onetick.ErrNotRepairable)
	}
	gone := fmt.Errorf("%s: the damage is no longer there as reported: inspect again", d.Key)
	switch {
	case d.Key == keyLeader:
		if b.dmg.lease == nil {
			return "", gone
		}
		if b.dmg.lease.Kind == onetick.DamageNoExpiry && !confirmed {
			return "", fmt.Errorf("%w without confirmation: wait one lease TTL first", onetick.ErrNotRepairable)
		}
		b.dmg.lease = nil
	case d.Key == keyEpoch:
		if b.dmg.epoch == nil {
			return "", gone
		}
		b.dmg.epoch = nil
		b.epoch = 0
	case d.Key == keyTerms && d.Field == "":
		if b.dmg.terms == nil {
			return "", gone
		}
		b.dmg.terms = nil
		b.terms = nil
	case d.Key == keyTerms:
		for i, e := range b.terms {
			if e.garbage != "" && e.garbage == d.Value {
				b.terms = append(b.terms[:i:i], b.terms[i+1:]...)
				return "damaged:" + d.Key, nil
			}
		}
		return "", gone
	case d.Key == keyLast && d.Field == "":
		if b.dmg.last == nil {
			return "", gone
		}
		b.dmg.last = nil
		b.last = map[string]onetick.Slot{}
	case d.Key == keyLast:
		if b.dmg.lastJob[d.Field] == nil {
			return "", gone
		}
		delete(b.dmg.lastJob, d.Field)
		delete(b.last, d.Field)
	default:
		return "", fmt.Errorf("%w: %s", onetick.ErrNotRepairable, d.Key)
	}
	return "damaged:" + d.Key, nil
}

// DeleteHistory forgets the leadership history, as a deleted key would. It
// is a test hook.
func (b *Backend) DeleteHistory() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.terms = nil
	b.dmg.terms = nil
}

// DeleteLast forgets every last-fired slot, as a deleted key would. It is
// a test hook.
func (b *Backend) DeleteLast() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = map[string]onetick.Slot{}
	b.dmg.last = nil
	b.dmg.lastJob = nil
}

// Restore undoes the injected damage of key ("leader", "epoch", "terms",
// "last"; with job, that job's last-fired slot), as an operator restoring
// the key from a backup would: the state under the damage is as it was.
// It is a test hook.
func (b *Backend) Restore(key, job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch key {
	case keyLeader:
		b.dmg.lease = nil
	case keyEpoch:
		b.dmg.epoch = nil
	case keyTerms:
		b.dmg.terms = nil
		kept := b.terms[:0]
		for _, e := range b.terms {
			if e.garbage == "" {
				kept = append(kept, e)
			}
		}
		b.terms = kept
	case keyLast:
		if job == "" {
			b.dmg.last = nil
		} else {
			delete(b.dmg.lastJob, job)
		}
	}
}
