package onetick

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults of Ops.
const (
	// DefaultBackfillMax is how many slots one backfill request may
	// enqueue unless it asks for more; BackfillMaxLimit is the most it may
	// ask for.
	DefaultBackfillMax = 1000
	BackfillMaxLimit   = 10000
	// DefaultTriggerRetention is how long a trigger's idempotency key is
	// remembered: a retried request within it enqueues nothing.
	DefaultTriggerRetention = 24 * time.Hour
	// DefaultBackfillRetention is how long a backfilled slot's record
	// lives past its slot: repeating the backfill within it enqueues
	// nothing.
	DefaultBackfillRetention = 7 * 24 * time.Hour
)

// Ops are the operator's actions on a set of jobs (pause, resume,
// trigger, backfill, listing), against the store. The CLI and the HTTP
// API both call them, so both validate and behave alike.
type Ops struct {
	Backend Backend
	// Jobs are the configuration file's jobs.
	Jobs []Job
	// Source, when set, adds the jobs defined at run time (jobs apply):
	// every operation and listing sees them beside Jobs.
	Source JobSource
	// TriggerRetention and BackfillRetention: defaults above.
	TriggerRetention, BackfillRetention time.Duration
	// Now is the local clock, for validating backfill ranges; default
	// time.Now. The store's clock still decides early slots.
	Now func() time.Time
	// Sink, when set, is told of the ticks a trigger or a backfill
	// enqueued, after the store took them, as a scheduler's Sink is of
	// its claims (the tracer's claim spans; ClaimWindow gives the
	// enqueue's times). Its error is ignored: the ticks are enqueued.
	Sink Sink
	// Metrics, when set, count the relayed ticks of triggers and
	// backfills (scheduler_relayed_ticks_total and its kin), as the
	// scheduler counts its claims'.
	Metrics *Metrics

	mu      sync.Mutex
	stored  []Job // Source's jobs as of version
	version int64
	read    bool
}

// AllJobs returns the file's jobs followed by the jobs defined at run time
// (read from Source; reread only when its version changed).
func (o *Ops) AllJobs(ctx context.Context) ([]Job, error) {
	if o.Source == nil {
		return o.Jobs, nil
	}
	v, err := o.Source.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs defined at run time: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.read || v != o.version {
		jobs, v2, err := o.Source.Jobs(ctx)
		if err != nil {
			return nil, fmt.Errorf("jobs defined at run time: %w", err)
		}
		o.stored, o.version, o.read = jobs, v2, true
	}
	if len(o.stored) == 0 {
		return o.Jobs, nil
	}
	all := make([]Job, 0, len(o.Jobs)+len(o.stored))
	return append(append(all, o.Jobs...), o.stored...), nil
}

func (o *Ops) job(ctx context.Context, name string) (Job, error) {
	for _, j := range o.Jobs {
		if j.Name == name {
			return withJobDefaults(j, 0), nil
		}
	}
	all, err := o.AllJobs(ctx)
	if err != nil {
		return Job{}, err
	}
	for _, j := range all[len(o.Jobs):] {
		if j.Name == name {
			return withJobDefaults(j, 0), nil
		}
	}
	names := make([]string, 0, len(all))
	for _, j := range all {
		names = append(names, j.Name)
	}
	sort.Strings(names)
	if len(names) > 10 {
		names = append(names[:10], fmt.Sprintf("... (%d jobs)", len(all)))
	}
	return Job{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownJob, name, strings.Join(names, ", "))
}

// withJobDefaults fills a job's defaults as the scheduler does (grace
// from ttl when given).
func withJobDefaults(j Job, ttl time.Duration) Job {
	if j.Prefer == "" {
		j.Prefer = PreferMissed
	}
	if j.Grace == 0 && ttl > 0 {
		j.Grace = 2 * ttl
	}
	if j.MaxCatchup == 0 {
		j.MaxCatchup = 100
	}
	j.Stream = jobStream(j)
	if j.Payload == "" {
		j.Payload = "{}"
	}
	return j
}

// Limits on what an operator's request may carry; every control is kept
// in the store and shown by status, so none may be unbounded.
const (
	MaxWho     = 200      // bytes of Actor.Who
	MaxReason  = 1000     // bytes of Actor.Reason
	MaxPayload = 64 << 10 // bytes of a trigger's payload
)

// validActor checks who and why: bounded, UTF-8, no control characters
// (they would forge lines and terminal output wherever they are shown).
func validActor(op string, a Actor) error {
	for _, f := range [...]struct {
		name, v string
		max     int
	}{{"who", a.Who, MaxWho}, {"reason", a.Reason, MaxReason}} {
		switch {
		case len(f.v) > f.max:
			return inputErr("%s: %s is %d bytes, at most %d", op, f.name, len(f.v), f.max)
		case !utf8.ValidString(f.v):
			return inputErr("%s: %s is not UTF-8", op, f.name)
		case strings.IndexFunc(f.v, unicode.IsControl) >= 0:
			return inputErr("%s: %s must not contain control characters (newlines, escapes)", op, f.name)
		}
	}
	return nil
}

// Excerpt quotes s for an error message: at most 64 bytes of it, control
// characters escaped, with the length when it was cut.
func Excerpt(s string) string {
	const n = 64
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// Pause pauses job (a reason is required).
func (o *Ops) Pause(ctx context.Context, job string, a Actor) (JobControl, error) {
	if _, err := o.job(ctx, job); err != nil {
		return JobControl{}, err
	}
	if strings.TrimSpace(a.Reason) == "" {
		return JobControl{}, inputErr("pause: a reason is required (it is recorded with the pause)")
	}
	if err := validActor("pause", a); err != nil {
		return JobControl{}, err
	}
	return o.Backend.Pause(ctx, job, a)
}

// Resume resumes job; resuming a job that is not paused changes nothing.
func (o *Ops) Resume(ctx context.Context, job string, a Actor) (JobControl, error) {
	if _, err := o.job(ctx, job); err != nil {
		return JobControl{}, err
	}
	if err := validActor("resume", a); err != nil {
		return JobControl{}, err
	}
	return o.Backend.Resume(ctx, job, a)
}

// TriggerResult is what a trigger did.
type TriggerResult struct {
	Tick string `json:"tick"`
	Key  string `json:"key"`
	// Enqueued is false when a trigger with the same key was enqueued
	// before (a retried request): nothing was enqueued again.
	Enqueued bool `json:"enqueued"`
	// Outcome is the store's answer (claimed, duplicate, broken).
	Outcome string       `json:"outcome"`
	Damage  *DamageError `json:"damage,omitempty"`
}

// NewTriggerKey returns a random idempotency key, for requests that bring
// none: 24 hexadecimal digits, the first a letter (a key is never a
// number).
func NewTriggerKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	k := []byte(hex.EncodeToString(b[:]))
	k[0] = "abcdef"[k[0]%6]
	return string(k)
}

// Trigger enqueues one tick of job now, with payload (the job's own when
// empty) and idempotency key (a new one when empty).
func (o *Ops) Trigger(ctx context.Context, job, key, payload string, a Actor) (TriggerResult, error) {
	j, err := o.job(ctx, job)
	if err != nil {
		return TriggerResult{}, err
	}
	if key == "" {
		key = NewTriggerKey()
	}
	if err := ValidTriggerKey(key); err != nil {
		return TriggerResult{}, inputErr("trigger: idempotency key %s %v", Excerpt(key), err)
	}
	if err := validActor("trigger", a); err != nil {
		return TriggerResult{}, err
	}
	if len(payload) > MaxPayload {
		return TriggerResult{}, inputErr("trigger: payload is %d bytes, at most %d", len(payload), MaxPayload)
	}
	if payload == "" {
		payload = j.Payload
	} else if !json.Valid([]byte(payload)) {
		return TriggerResult{}, inputErr("trigger: payload is not valid JSON")
	}
	ret := o.TriggerRetention
	if ret == 0 {
		ret = DefaultTriggerRetention
	}
	t := Tick{Job: j.Name, Key: key, Stream: j.Stream, Payload: payload, MaxLen: j.MaxLen, Retention: ret, OutOfOrder: true, Version: j.Version, Relay: j.Relay.claimed()}
	res, err := o.enqueue(ctx, []Tick{t}, a, KindTrigger)
	if err != nil {
		return TriggerResult{}, err
	}
	r := TriggerResult{Tick: t.ID(), Key: key, Outcome: res.Outcomes[0].String(), Enqueued: res.Outcomes[0] == Claimed,
		Damage: res.Damaged[0]}
	return r, nil
}

// BackfillSlots returns the scheduled slots of job in [from, to]: from
// before to, to not in the future, and at most max slots (max between 1
// and BackfillMaxLimit; 0 means DefaultBackfillMax).
func (o *Ops) BackfillSlots(ctx context.Context, job string, from, to time.Time, max int) ([]Slot, error) {
	j, err := o.job(ctx, job)
	if err != nil {
		return nil, err
	}
	if max == 0 {
		max = DefaultBackfillMax
	}
	if max < 1 || max > BackfillMaxLimit {
		return nil, inputErr("backfill: max must be between 1 and %d, got %d", BackfillMaxLimit, max)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	switch {
	case from.IsZero() || to.IsZero():
		return nil, inputErr("backfill: from and to are required")
	case !from.Before(to):
		return nil, inputErr("backfill: the range is reversed or empty: from %s is not before to %s", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	case to.After(now()):
		return nil, inputErr("backfill: to %s is in the future; backfill fills slots that are due", to.UTC().Format(time.RFC3339))
	}
	lo, hi := SlotOf(from)-1, SlotOf(to)
	if n := countSlots(j.Schedule, lo, hi, int64(max)+1); n > int64(max) {
		return nil, inputErr("backfill: %s to %s holds more than %d slots of %s; narrow the range or raise max (at most %d)",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), max, job, BackfillMaxLimit)
	}
	var out []Slot
	for s := nextSlot(j.Schedule, lo); s != noSlot && s <= hi; s = nextSlot(j.Schedule, s) {
		out = append(out, s)
	}
	return out, nil
}

// BackfillResult is what a backfill did, slot by slot.
type BackfillResult struct {
	Slots []Slot `json:"slots"`
	// Outcomes are the slots' outcomes, in the order of Slots: the store's
	// (claimed, duplicate, ...), or on a dry run "would_enqueue" and
	// "duplicate" (the ledger records the slot as enqueued or run).
	Outcomes []string `json:"outcomes"`
	Enqueued int      `json:"enqueued"`
	// Duplicates are the slots not enqueued because they were before: the
	// store still holds their tick, or the run ledger records them as
	// enqueued, running, retrying, succeeded or dead.
	Duplicates int  `json:"duplicates"`
	Other      int  `json:"other"`
	DryRun     bool `json:"dry_run"`
}

// BackfillRequest is a backfill's range and options.
type BackfillRequest struct {
	From, To time.Time
	// Max is the most slots the range may hold (0: DefaultBackfillMax).
	Max    int
	DryRun bool
	// Again skips the ledger's check: slots the ledger records as run are
	// enqueued again (a slot whose tick the store still holds is not).
	Again bool
}

// WouldEnqueue is a dry run's outcome of a slot that would be enqueued.
const WouldEnqueue = "would_enqueue"

// Backfill enqueues the scheduled slots of job in [req.From, req.To] with
// their scheduled identities, in order; with req.DryRun it only lists
// them. A slot the run ledger records as enqueued or run (any fate but
// paused and skipped) is not enqueued again unless req.Again: a backfill
// fills what was missed. The ledger is read before the store's enqueue,
// which refuses a slot whose tick it still holds in the same step that
// enqueues the others, so a slot claimed meanwhile is not enqueued twice.
func (o *Ops) Backfill(ctx context.Context, job string, req BackfillRequest, a Actor) (BackfillResult, error) {
	slots, err := o.BackfillSlots(ctx, job, req.From, req.To, req.Max)
	if err != nil {
		return BackfillResult{}, err
	}
	if err := validActor("backfill", a); err != nil {
		return BackfillResult{}, err
	}
	r := BackfillResult{Slots: slots, DryRun: req.DryRun, Outcomes: make([]string, len(slots))}
	if r.Slots == nil {
		r.Slots = []Slot{}
	}
	if len(slots) == 0 {
		return r, nil
	}
	j, _ := o.job(ctx, job)
	ran := map[Slot]bool{}
	if !req.Again {
		if ran, err = o.recordedSlots(ctx, j.Name, slots[0], slots[len(slots)-1]); err != nil {
			return BackfillResult{}, err
		}
	}
	ret := o.BackfillRetention
	if ret == 0 {
		ret = DefaultBackfillRetention
	}
	var ticks []Tick
	var at []int
	for i, s := range slots {
		if ran[s] {
			r.Outcomes[i] = Duplicate.String()
			r.Duplicates++
			continue
		}
		r.Outcomes[i] = WouldEnqueue
		ticks = append(ticks, Tick{Job: j.Name, Slot: s, Stream: j.Stream, Payload: j.Payload, MaxLen: j.MaxLen, Retention: ret, OutOfOrder: true, Version: j.Version, Relay: j.Relay.claimed()})
		at = append(at, i)
	}
	if req.DryRun || len(ticks) == 0 {
		return r, nil
	}
	res, err := o.enqueue(ctx, ticks, a, KindBackfill)
	if err != nil {
		return BackfillResult{}, err
	}
	for k, x := range res.Outcomes {
		if k >= len(at) {
			break
		}
		r.Outcomes[at[k]] = x.String()
		switch x {
		case Claimed:
			r.Enqueued++
		case Duplicate:
			r.Duplicates++
		default:
			r.Other++
		}
	}
	return r, nil
}

// recordedSlots are the slots of job in [from, to] that the run ledger
// records as scheduled or backfilled and enqueued or run (any fate but
// paused and skipped). None when the store keeps no ledger.
func (o *Ops) recordedSlots(ctx context.Context, job string, from, to Slot) (map[Slot]bool, error) {
	out := map[Slot]bool{}
	lg, ok := o.Backend.(Ledger)
	if !ok {
		return out, nil
	}
	q := RunQuery{Job: job, From: from, To: to, Limit: MaxRunLimit}
	for {
		page, err := lg.Runs(ctx, q)
		if errors.Is(err, ErrLedgerOff) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("backfill: reading the run ledger of %s: %w", job, err)
		}
		for _, run := range page.Runs {
			if run.Tick != TickID(job, run.Slot) || run.Fate == FatePaused || run.Fate == FateSkipped {
				continue
			}
			out[run.Slot] = true
		}
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}

// enqueue writes ticks of one kind through the store and tells o.Sink of
// those it took.
func (o *Ops) enqueue(ctx context.Context, ticks []Tick, a Actor, kind string) (ClaimResult, error) {
	sent := time.Now()
	res, err := o.Backend.Enqueue(ctx, ticks, a)
	o.Metrics.countRelayed(ticks, res, err)
	if err != nil || o.Sink == nil {
		return res, err
	}
	recv := time.Now()
	var recs []TickRecord
	for i, x := range res.Outcomes {
		if x == Claimed && i < len(ticks) {
			t := ticks[i]
			recs = append(recs, TickRecord{Job: t.Job, Slot: t.Slot, Tick: t.ID(), Payload: t.Payload, Kind: kind, Version: t.Version})
		}
	}
	if len(recs) > 0 {
		_ = o.Sink.Deliver(context.WithValue(ctx, claimWindowKey{}, claimWindow{sent, recv}), recs)
	}
	return res, nil
}
