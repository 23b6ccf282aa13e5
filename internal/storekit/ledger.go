package storekit

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/onetick/onetick"
)

// The run ledger's rules, written once: what a record is when a claim or
// an enqueue creates it, what each event does to it, which records
// retention drops, and the order and cursors of queries. The stores keep
// records where they keep the rest of their state and change them in the
// same step as the change they record (docs/ledger.md).

// TrimPerClaim is how many expired records of one job a claim removes at
// most, so that trimming never makes a claim slow.
const TrimPerClaim = 16

// ClaimNote is what a claim writes to the ledger for one tick.
type ClaimNote struct {
	// Fresh is the tick's record when it has none; Event is applied to
	// the record (Note), at the store's now.
	Fresh onetick.Run
	Event onetick.RunEvent
	// Skipped are the records of the ranges the leader skipped before the
	// tick, each written unless its identity has a record.
	Skipped []onetick.Run
}

// ClaimNotes is what a claim by lease l writes to the ledger for decision
// d of tick t (identity id), at the store's now: nothing (false) when d
// writes no tick record, as a retry of the claim does (its first attempt
// wrote them); otherwise enqueued (Claimed) or paused, with the term, and
// the ranges t.Skipped.
func ClaimNotes(t onetick.Tick, id string, d Decision, l onetick.Lease, now time.Time) (ClaimNote, bool) {
	if d.Record == "" {
		return ClaimNote{}, false
	}
	what := onetick.EventEnqueued
	if d.Outcome == onetick.Paused {
		what = onetick.EventPaused
	}
	n := ClaimNote{Fresh: NewRun(t, id, ""), Event: onetick.RunEvent{What: what, At: now, Epoch: l.Epoch, Replica: l.Holder}}
	if what == onetick.EventEnqueued {
		n.Event.Detail = RelayDetail(t)
	}
	for _, r := range t.Skipped {
		n.Skipped = append(n.Skipped, SkippedRun(t.Job, r, l.Epoch, l.Holder, now))
	}
	return n, true
}

// Jobs returns the jobs of a claim's ticks, each once, in the order they
// first appear: the jobs whose ledger the claim trims.
func Jobs(ticks []onetick.Tick) []string {
	var (
		out  []string
		seen map[string]bool // once there are many
	)
	for _, t := range ticks {
		switch {
		case seen != nil:
			if seen[t.Job] {
				continue
			}
			seen[t.Job] = true
		case slices.Contains(out, t.Job):
			continue
		case len(out) == 8:
			seen = make(map[string]bool, len(ticks))
			for _, j := range out {
				seen[j] = true
			}
			seen[t.Job] = true
		}
		out = append(out, t.Job)
	}
	return out
}

// SkippedTick is the ledger identity of a range of job's skipped slots,
// from .. through: "job:skipped:FROM-THROUGH", never the identity of a
// tick (ParseTickID refuses it), so a backfill of a slot in the range
// keeps its own record.
func SkippedTick(job string, from, through onetick.Slot) string {
	return job + ":skipped:" + strconv.FormatInt(int64(from), 10) + "-" + strconv.FormatInt(int64(through), 10)
}

// NewRun is the record a claim (kind "") or an enqueue (kind trigger,
// backfill) creates for tick t, identity id, before its first event.
func NewRun(t onetick.Tick, id, kind string) onetick.Run {
	return onetick.Run{Job: t.Job, Slot: t.Slot, Tick: id, Kind: kind}
}

// SkippedRun is the record of a range of job's slots skipped by the
// leader of epoch, replica, at the store's now.
func SkippedRun(job string, r onetick.SkipRange, epoch onetick.Epoch, replica string, now time.Time) onetick.Run {
	run := onetick.Run{Job: job, Slot: r.From, Tick: SkippedTick(job, r.From, r.Through), Through: r.Through, Count: max(r.Count, 1)}
	Note(&run, onetick.RunEvent{What: onetick.EventSkipped, At: now, Epoch: epoch, Replica: replica, Detail: r.Reason})
	return run
}

// Note applies event ev to record r: it appends the event (keeping the
// first and the newest MaxRunEvents-1, counting the dropped ones), cuts
// its detail to MaxEventDetail bytes and its output to its last
// MaxEventOutput bytes, drops the output of events older than the newest
// OutputEvents that have one, and sets the record's fate, reason and
// update time.
func Note(r *onetick.Run, ev onetick.RunEvent) {
	ev.At = ev.At.UTC()
	ev.Detail = cut(ev.Detail, onetick.MaxEventDetail)
	ev.Output = tail(ev.Output, onetick.MaxEventOutput)
	if len(r.Events) >= onetick.MaxRunEvents {
		r.Events = append(r.Events[:1], r.Events[2:]...)
		r.Dropped++
	}
	r.Events = append(r.Events, ev)
	for i, kept := len(r.Events)-1, 0; i >= 0; i-- {
		if r.Events[i].Output == "" {
			continue
		}
		if kept++; kept > onetick.OutputEvents {
			r.Events[i].Output = ""
		}
	}
	r.Updated = ev.At
	switch ev.What {
	case onetick.EventEnqueued, onetick.EventReleased, onetick.EventReplayed:
		r.Fate, r.Reason = onetick.FateEnqueued, ""
	case onetick.EventPaused:
		r.Fate, r.Reason = onetick.FatePaused, ""
	case onetick.EventSkipped:
		r.Fate, r.Reason = onetick.FateSkipped, ev.Detail
	case onetick.EventSkippedOverlap:
		r.Fate, r.Reason = onetick.FateSkipped, onetick.SkipOverlap
	case onetick.EventStarted:
		r.Fate, r.Reason = onetick.FateRunning, ""
	case onetick.EventSucceeded:
		r.Fate, r.Reason = onetick.FateSucceeded, ""
	case onetick.EventRetried:
		r.Fate, r.Reason = onetick.FateRetrying, ev.Detail
	case onetick.EventDead:
		r.Fate, r.Reason = onetick.FateDead, ev.Detail
	}
	// EventSkippedDone (a redelivery of a tick that had run) keeps the
	// fate.
}

// cut returns s cut to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tail returns the end of s, at most n bytes, starting on a rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Retention is r with the defaults filled in.
func Retention(r onetick.LedgerRetention) onetick.LedgerRetention {
	if r.MaxAge <= 0 {
		r.MaxAge = onetick.DefaultLedgerMaxAge
	}
	if r.MaxPerJob <= 0 {
		r.MaxPerJob = onetick.DefaultLedgerMaxPerJob
	}
	return r
}

// Expired reports whether a record of slot (the newest slot it stands
// for) is past the age limit at the store's now.
func Expired(slot onetick.Slot, now time.Time, r onetick.LedgerRetention) bool {
	return slot < onetick.SlotOf(now.Add(-Retention(r).MaxAge))
}

// Newest is the slot by which a record ages: the end of a skipped range,
// the slot otherwise.
func Newest(r onetick.Run) onetick.Slot { return max(r.Slot, r.Through) }

// Limit is the page size of q.
func Limit(q onetick.RunQuery) int {
	switch {
	case q.Limit <= 0:
		return onetick.DefaultRunLimit
	case q.Limit > onetick.MaxRunLimit:
		return onetick.MaxRunLimit
	}
	return q.Limit
}

// ErrBadCursor is returned for a RunQuery.After that no page gave.
var ErrBadCursor = errors.New("ledger: not a page cursor")

// Cursor is the Next of a page whose last record is r.
func Cursor(r onetick.Run) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(int64(r.Slot), 10) + " " + r.Tick))
}

// ParseCursor reads a Cursor back: the slot and tick of the last record
// of the previous page.
func ParseCursor(c string) (onetick.Slot, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", ErrBadCursor
	}
	s, tick, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil || tick == "" {
		return 0, "", ErrBadCursor
	}
	return onetick.Slot(n), tick, nil
}

// Before reports whether record a comes before b in a page: newest slot
// first, then by tick id.
func Before(a, b onetick.Run) bool {
	if a.Slot != b.Slot {
		return a.Slot > b.Slot
	}
	return a.Tick < b.Tick
}

// After reports whether r comes after the cursor position (slot, tick).
func After(r onetick.Run, slot onetick.Slot, tick string) bool {
	return r.Slot < slot || (r.Slot == slot && r.Tick > tick)
}

// Match reports whether r is selected by q's bounds and fate (not its
// job or page).
func Match(q onetick.RunQuery, r onetick.Run) bool {
	if q.From != 0 && Newest(r) < q.From {
		return false
	}
	if q.To != 0 && r.Slot > q.To {
		return false
	}
	return q.Fate == "" || r.Fate == q.Fate
}
