package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// The run ledger on Redis (docs/ledger.md). Every script that changes a
// tick's state (claim, enqueue, a worker's begin and finish, replay)
// appends what happened to the log, in the same call: that is the atomic
// step. Folding applies the log to the records with storekit.Note, in Go,
// so the rules are the kit's own; readers fold first, so a read sees
// every change made before it. The daemon folds every second (the
// store's upkeep) and a claim folds a chunk when the log is long.
//
//	<prefix>:ledger:log        list: entries of events, oldest first (luaLedger)
//	<prefix>:ledger:folded     integer: how many entries have been folded
//	<prefix>:ledger            hash: tick id -> record (ledger_record.go)
//	<prefix>:ledger:idx:<job>  sorted set, every score 0: slotKey(slot) + " " + tick,
//	                           so that lexical order is page order
//	<prefix>:ledger:spans      hash: job -> its longest skipped range (ms)
//
// A fold reads the counter and the log's head together, computes, and
// commits only if the counter is still what it read: the counter
// versions every record and index, which only a commit changes.

var _ onetick.Ledger = (*Backend)(nil)

// ledgerKeys are the ledger's keys.
type ledgerKeys struct {
	log, folded, records, spans, idx string
}

func newLedgerKeys(prefix string) ledgerKeys {
	p := prefix + ":ledger"
	return ledgerKeys{log: p + ":log", folded: p + ":folded", records: p, spans: p + ":spans", idx: p + ":idx:"}
}

// ledgerOn reports whether the backend keeps a ledger.
func (b *Backend) ledgerOn() bool { return !b.opts.Ledger.Off }

// ledgerFlag is the scripts' "ledger on" argument.
func (b *Backend) ledgerFlag() string {
	if b.ledgerOn() {
		return "1"
	}
	return "0"
}

// foldAfter is the log length past which a claim folds a chunk (a
// variable for the tests and benchmarks).
var foldAfter = 1024

// slotKey encodes a slot so that a larger slot sorts first: 16 hex
// digits of the order-preserving unsigned form, complemented.
func slotKey(s onetick.Slot) string {
	u := ^(uint64(s) ^ 1<<63)
	const hex = "0123456789abcdef"
	var buf [16]byte
	for i := 15; i >= 0; i-- {
		buf[i] = hex[u&15]
		u >>= 4
	}
	return string(buf[:])
}

// member is a record's index member.
func member(slot onetick.Slot, tick string) string { return slotKey(slot) + " " + tick }

// parseMember reads an index member back.
func parseMember(m string) (onetick.Slot, string, bool) {
	if len(m) < 18 || m[16] != ' ' {
		return 0, "", false
	}
	u, err := strconv.ParseUint(m[:16], 16, 64)
	if err != nil {
		return 0, "", false
	}
	return onetick.Slot(int64(^u ^ 1<<63)), m[17:], true
}

// Runs implements onetick.Ledger.
func (b *Backend) Runs(ctx context.Context, q onetick.RunQuery) (onetick.RunPage, error) {
	if !b.ledgerOn() {
		return onetick.RunPage{}, onetick.ErrLedgerOff
	}
	start := "-"
	if q.To != 0 {
		start = "[" + slotKey(q.To)
	}
	if q.After != "" {
		slot, tick, err := storekit.ParseCursor(q.After)
		if err != nil {
			return onetick.RunPage{}, fmt.Errorf("redis: runs of %s: %w", q.Job, err)
		}
		if m := member(slot, tick); start == "-" || m >= start[1:] {
			start = "(" + m
		}
	}
	if err := b.FoldLedger(ctx); err != nil {
		return onetick.RunPage{}, err
	}
	// A skipped range is indexed by its first slot: one that began up to
	// the job's longest range before From may reach into it.
	var floor onetick.Slot
	if q.From != 0 {
		span, err := b.c.HGet(ctx, b.lg.spans, q.Job).Int64()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return onetick.RunPage{}, b.ledgerErr(ctx, err, b.lg.spans, "a hash")
		}
		floor = q.From - onetick.Slot(span)
	}
	limit := storekit.Limit(q)
	batch := int64(min(limit+1, 500))
	page := onetick.RunPage{Runs: []onetick.Run{}}
	var more []onetick.Run // the matching records, up to limit+1
	idx := b.lg.idx + q.Job
	for len(more) <= limit {
		ms, err := b.c.ZRangeByLex(ctx, idx, &goredis.ZRangeBy{Min: start, Max: "+", Count: batch}).Result()
		if err != nil {
			return onetick.RunPage{}, b.ledgerErr(ctx, err, idx, "a sorted set")
		}
		ticks := make([]string, 0, len(ms))
		done := int64(len(ms)) < batch
		for _, m := range ms {
			slot, tick, ok := parseMember(m)
			if !ok {
				continue
			}
			if q.From != 0 && slot < floor {
				done = true
				break
			}
			ticks = append(ticks, tick)
		}
		if len(ticks) > 0 {
			vs, err := b.c.HMGet(ctx, b.lg.records, ticks...).Result()
			if err != nil {
				return onetick.RunPage{}, b.ledgerErr(ctx, err, b.lg.records, "a hash")
			}
			for k, v := range vs {
				s, _ := v.(string)
				r, ok := decodeRun(ticks[k], s)
				if ok && r.Job == q.Job && storekit.Match(q, r) && len(more) <= limit {
					more = append(more, r)
				}
			}
		}
		if done || len(ms) == 0 {
			break
		}
		start = "(" + ms[len(ms)-1]
	}
	if len(more) > limit {
		more = more[:limit]
		page.Next = storekit.Cursor(more[limit-1])
	}
	page.Runs = append(page.Runs, more...)
	return page, nil
}

// Run implements onetick.Ledger.
func (b *Backend) Run(ctx context.Context, job, tick string) (onetick.Run, bool, error) {
	if !b.ledgerOn() {
		return onetick.Run{}, false, onetick.ErrLedgerOff
	}
	if err := b.FoldLedger(ctx); err != nil {
		return onetick.Run{}, false, err
	}
	s, err := b.c.HGet(ctx, b.lg.records, tick).Result()
	if errors.Is(err, goredis.Nil) {
		return onetick.Run{}, false, nil
	}
	if err != nil {
		return onetick.Run{}, false, b.ledgerErr(ctx, err, b.lg.records, "a hash")
	}
	r, ok := decodeRun(tick, s)
	if !ok {
		return onetick.Run{}, false, &onetick.DamageError{Key: b.lg.records, Field: tick, Job: job, Kind: onetick.DamageValue,
			Value: s, Repairable: true, Reason: fmt.Sprintf("ledger record %q does not parse", short(s))}
	}
	if r.Job != job {
		return onetick.Run{}, false, nil
	}
	return r, true, nil
}

// ledgerErr turns a WRONGTYPE error on key into its damage.
func (b *Backend) ledgerErr(ctx context.Context, err error, key, want string) error {
	if isWrongType(err) {
		return b.wrongType(ctx, key, want)
	}
	return err
}

// FoldLedger applies the ledger's log to its records: every entry
// appended before the call (and perhaps more). Readers call it first; the
// daemon calls it every second (FoldPeriodically).
func (b *Backend) FoldLedger(ctx context.Context) error {
	if !b.ledgerOn() {
		return nil
	}
	target := int64(-1)
	for {
		st, err := b.foldChunk(ctx)
		if err != nil {
			return err
		}
		if target < 0 {
			target = st.base + st.length
		}
		if st.base+st.folded >= target {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// FoldPeriodically folds the ledger every interval until ctx ends,
// passing each failure to fail (when not nil).
func (b *Backend) FoldPeriodically(ctx context.Context, interval time.Duration, fail func(error)) {
	if !b.ledgerOn() {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := b.FoldLedger(ctx); err != nil && ctx.Err() == nil && fail != nil {
				fail(err)
			}
		}
	}
}
