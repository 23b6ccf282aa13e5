package onetick

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Slot is a scheduled instant: Unix milliseconds, UTC. Every replica derives
// the same slots from the same schedule, so a slot (with its job) identifies a
// tick regardless of which replica fires it or what that replica's clock says.
type Slot int64

// SlotOf converts t to a Slot (millisecond precision, truncating).
func SlotOf(t time.Time) Slot { return Slot(t.UnixMilli()) }

// Time returns the slot as a UTC time.
func (s Slot) Time() time.Time { return time.UnixMilli(int64(s)).UTC() }

// String formats the slot as RFC 3339 with milliseconds.
func (s Slot) String() string { return s.Time().Format("2006-01-02T15:04:05.000Z07:00") }

// TickID is the identity of the tick of job at slot: "job:unixmillis".
//
// Tick identities never collide, whatever the job names (which may
// contain ':'): a scheduled or backfilled tick's identity ends in ':' and
// a decimal slot, a trigger's ends in ":trigger:" and its key, and a key
// contains no ':' and is not a decimal number (ValidTriggerKey), so
// reading an identity from its end gives back the job and the slot or key
// (ParseTickID).
func TickID(job string, slot Slot) string {
	return job + ":" + strconv.FormatInt(int64(slot), 10)
}

// TickRef is a tick identity read back: the job and either the slot
// (Key empty) or a trigger's idempotency key.
type TickRef struct {
	Job  string
	Slot Slot
	Key  string
}

// ParseTickID reads a tick identity made by TickID or TriggerID.
func ParseTickID(id string) (TickRef, error) {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 {
		return TickRef{}, fmt.Errorf("onetick: malformed tick id %q", id)
	}
	job, last := id[:i], id[i+1:]
	if isDecimal(last) {
		s, err := strconv.ParseInt(last, 10, 64)
		if err != nil || strconv.FormatInt(s, 10) != last {
			return TickRef{}, fmt.Errorf("onetick: malformed slot in tick id %q", id)
		}
		return TickRef{Job: job, Slot: Slot(s)}, nil
	}
	job, ok := strings.CutSuffix(job, ":trigger")
	if !ok || job == "" || ValidTriggerKey(last) != nil {
		return TickRef{}, fmt.Errorf("onetick: malformed tick id %q", id)
	}
	return TickRef{Job: job, Key: last}, nil
}

// isDecimal reports whether s has the form of a decimal integer (an
// optional '-' and digits): the form of a slot.
func isDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MaxTriggerKey is the longest idempotency key, in bytes.
const MaxTriggerKey = 200

// ValidTriggerKey checks a trigger's idempotency key, which is part of a
// tick identity: 1 to 200 bytes, no spaces, control characters or ':',
// and not a decimal number (that is a slot's form: "job:trigger:123"
// would be the identity of slot 123 of a job named "job:trigger").
func ValidTriggerKey(k string) error {
	switch {
	case k == "" || len(k) > MaxTriggerKey:
		return fmt.Errorf("must be 1 to %d bytes", MaxTriggerKey)
	case strings.IndexFunc(k, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return errors.New("must not contain spaces or control characters")
	case strings.IndexByte(k, ':') >= 0:
		return errors.New("must not contain ':' (it is part of the tick id)")
	case isDecimal(k):
		return errors.New("must not be a number (a number is a slot's form in a tick id); add a letter")
	case !utf8.ValidString(k):
		return errors.New("must be UTF-8")
	}
	return nil
}

// Epoch is the fencing token of a leadership term. Every successful
// acquisition takes the largest of the stored epoch plus one, the newest
// epoch in the stored history plus one, and the store's clock in Unix
// milliseconds, so epochs never repeat or go backwards even when the epoch
// key is deleted or the store forgets it (a restart without persistence): a
// larger epoch always means a more recent leader.
type Epoch int64

// Lease identifies one leadership term: who holds it and with which epoch.
// The store holds the lease as "holder|epoch"; every fenced operation
// compares the whole value, so a holder that lost the lease and later
// re-acquired it cannot act with its old term.
type Lease struct {
	Holder string
	Epoch  Epoch
}

// Token is the value the store holds for the lease.
func (l Lease) Token() string { return l.Holder + "|" + strconv.FormatInt(int64(l.Epoch), 10) }

// ParseToken parses a "holder|epoch" lease value.
func ParseToken(v string) (Lease, error) {
	i := strings.LastIndexByte(v, '|')
	if i < 0 {
		return Lease{}, fmt.Errorf("onetick: malformed lease value %q", v)
	}
	e, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil {
		return Lease{}, fmt.Errorf("onetick: malformed lease epoch in %q", v)
	}
	return Lease{Holder: v[:i], Epoch: Epoch(e)}, nil
}

// Grant is the answer of a successful acquire or renew.
type Grant struct {
	Lease Lease
	// StoreTime is the store's own clock when it executed the operation. The
	// elector uses it to measure the offset between its clock and the store's.
	StoreTime time.Time
	// Damage is damaged auxiliary state (the leadership history) that the
	// operation skipped: it never blocks the lease, but it is reported.
	Damage *DamageError
}

// LeaderInfo describes the current lease as the store sees it.
type LeaderInfo struct {
	Lease Lease
	// TTL is the time the lease has left; zero when there is no leader.
	TTL time.Duration
	// Held is false when nobody holds the lease.
	Held bool
}

// EndReason says why a leadership term ended.
type EndReason string

const (
	EndReleased EndReason = "released" // the holder released the lease
	EndExpired  EndReason = "expired"  // the lease ran out and someone else acquired it
	EndFenced   EndReason = "fenced"   // the holder tried to act after its lease was gone
)

// Term is one leadership term as recorded by the store.
type Term struct {
	Epoch  Epoch     `json:"epoch"`
	Holder string    `json:"holder"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end,omitzero"`
	Reason EndReason `json:"reason,omitempty"`
}

// Prefer is a job's choice between a missed tick and a duplicate one when a
// slot's fate is uncertain.
type Prefer string

const (
	// PreferMissed (at-most-once, the default): slots that came due while no
	// leader fired are fired late only within the job's grace; older ones are
	// skipped, counted and logged as a gap.
	PreferMissed Prefer = "missed"
	// PreferDuplicate (at-least-once): every slot since the persisted
	// last-fired slot is fired, in order, up to MaxCatchup.
	PreferDuplicate Prefer = "duplicate"
)

// Tick is one claim request, and after a successful claim one enqueued tick.
type Tick struct {
	Job     string
	Slot    Slot
	Stream  string // destination stream key (without the backend's prefix)
	Payload string // JSON
	// MaxLen trims the stream approximately to this many entries; 0 = never.
	MaxLen int64
	// Retention is how long the store keeps the per-tick record.
	Retention time.Duration
	// OutOfOrder marks a manual trigger or backfill: the claim skips the
	// "slot after last fired" rule and does not move the last-fired slot,
	// relying only on the per-tick record for deduplication.
	OutOfOrder bool
	// Key is a trigger's idempotency key: its identity is
	// "job:trigger:key", whatever its slot, so it cannot be confused with a
	// scheduled slot and a retried trigger request is recognised (a key is
	// never a number and has no ':': see TickID).
	Key string
	// Version is the job's definition version (Job.Version), written
	// into the stream entry as "version" when not empty.
	Version string
	// Skipped are the ranges of the job's slots the leader skipped just
	// before this tick; a store that keeps a ledger records them in the
	// claim that writes this tick (see SkipRange).
	Skipped []SkipRange
	// Relay, when set, is where the claim hands the tick instead of
	// Stream (Job.Relay). A tick with a relay reaches only a store that
	// said it can hand it (Relayer.CanRelay, checked when the scheduler
	// starts); others must refuse it (Broken) rather than append it to
	// Stream. Only relays handed in the claim (Relay.InClaim) are set
	// here: a RelayNATS job's ticks carry none and go to Stream.
	Relay *Relay
}

// ID is the tick's identity.
func (t Tick) ID() string {
	if t.Key != "" {
		return TriggerID(t.Job, t.Key)
	}
	return TickID(t.Job, t.Slot)
}

// TriggerID is the identity of job's trigger with idempotency key.
func TriggerID(job, key string) string { return job + ":trigger:" + key }

// Kind of a tick in a stream entry's "kind" field: absent for a scheduled
// slot.
const (
	KindTrigger  = "trigger"
	KindBackfill = "backfill"
)

// Outcome is what the store said about one tick of a claim.
type Outcome int

const (
	// Claimed: recorded and appended to the stream.
	Claimed Outcome = iota + 1
	// Duplicate: the tick was claimed before, or its slot is not after the
	// job's last-fired slot.
	Duplicate
	// Early: the slot lies in the future by the store's clock by more than
	// the tolerance; nothing was written.
	Early
	// Broken: state this tick depends on is damaged (its stream key holds
	// another type, its job's last-fired slot does not parse, ...); nothing
	// was written for it. ClaimResult.Damaged says which key and why. The
	// other ticks of the claim are unaffected.
	Broken
	// Paused: the job is paused at this slot; the slot is recorded as
	// accounted for (the job's last-fired slot moves to it) and is never
	// caught up.
	Paused
)

func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case Duplicate:
		return "duplicate"
	case Early:
		return "early"
	case Broken:
		return "broken"
	case Paused:
		return "paused"
	}
	return "unknown"
}

// ClaimResult is the store's answer to a claim batch.
type ClaimResult struct {
	// Outcomes has one entry per requested tick, in request order.
	Outcomes []Outcome
	// StoreTime is the store's clock when it executed the claim.
	StoreTime time.Time
	// Damaged holds, for each Broken outcome's index, what is damaged.
	Damaged map[int]*DamageError
}

// TickRecord is a tick as a consumer reads it from a stream.
type TickRecord struct {
	ID      string `json:"id,omitempty"` // stream entry id, where the sink has one
	Job     string `json:"job"`
	Slot    Slot   `json:"slot"`
	Tick    string `json:"tick"`
	Epoch   Epoch  `json:"epoch"`
	Replica string `json:"replica"`
	Payload string `json:"payload"`
	// Kind is "trigger" or "backfill" for a manual tick, empty for a
	// scheduled slot.
	Kind string `json:"kind,omitempty"`
	// Version is the job's definition version, for jobs defined at run
	// time (Job.Version); empty otherwise.
	Version string `json:"version,omitempty"`
}
