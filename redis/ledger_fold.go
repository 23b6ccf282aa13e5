package redis

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// A fold reads at most foldEntries log entries, and stops adding entries
// once it holds foldOps events, so that one commit stays small.
const (
	foldEntries = 256
	foldOps     = 4096
)

// ledgerEntry is one log entry: the events of one script call.
type ledgerEntry struct {
	now            time.Time
	epoch          onetick.Epoch
	replica, agent string
	ops            []ledgerOp
}

// ledgerOp is one event of an entry (luaLedger).
type ledgerOp struct {
	code       byte
	job, tick  string
	kind       string
	slot       onetick.Slot
	ev         onetick.RunEvent
	skip       onetick.SkipRange
	skipRecord bool
}

// netstrings splits s into its "<length>:<bytes>" fields.
func netstrings(s string) ([]string, bool) {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ':')
		if i <= 0 || i > 10 {
			return nil, false
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || i+1+n > len(s) {
			return nil, false
		}
		out = append(out, s[i+1:i+1+n])
		s = s[i+1+n:]
	}
	return out, true
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// parseEntry reads one log entry; false when it is not one.
func parseEntry(s string) (ledgerEntry, bool) {
	f, ok := netstrings(s)
	if !ok || len(f) < 5 || f[0] != "1" {
		return ledgerEntry{}, false
	}
	e := ledgerEntry{now: msTime(atoi64(f[1])), epoch: onetick.Epoch(atoi64(f[2])), replica: f[3], agent: f[4]}
	for f = f[5:]; len(f) > 0; {
		if len(f[0]) != 1 {
			return ledgerEntry{}, false
		}
		op := ledgerOp{code: f[0][0]}
		var n int
		switch op.code {
		case 'e', 'p':
			n = 5
		case 'n':
			n = 7
		case 'r':
			n = 5
		case 's':
			n = 6
		default:
			return ledgerEntry{}, false
		}
		if len(f) < n {
			return ledgerEntry{}, false
		}
		op.job = f[1]
		switch op.code {
		case 'e', 'p':
			op.slot, op.tick, op.kind = onetick.Slot(atoi64(f[2])), f[3], f[4]
			op.ev = onetick.RunEvent{What: onetick.EventEnqueued, Epoch: e.epoch, Replica: e.replica}
			if op.code == 'p' {
				op.ev.What = onetick.EventPaused
			}
		case 'n':
			op.slot, op.tick = onetick.Slot(atoi64(f[2])), f[3]
			attempt, _ := strconv.Atoi(f[5])
			op.ev = onetick.RunEvent{What: f[4], Epoch: e.epoch, Replica: e.replica, Worker: e.agent, Attempt: attempt, Detail: f[6]}
		case 'r':
			op.slot, op.tick = onetick.Slot(atoi64(f[2])), f[3]
			if json.Unmarshal([]byte(f[4]), &op.ev) != nil {
				return ledgerEntry{}, false
			}
		case 's':
			op.skip = onetick.SkipRange{From: onetick.Slot(atoi64(f[2])), Through: onetick.Slot(atoi64(f[3])),
				Count: atoi64(f[4]), Reason: f[5]}
			op.slot, op.tick, op.skipRecord = op.skip.From, storekit.SkippedTick(op.job, op.skip.From, op.skip.Through), true
		}
		e.ops = append(e.ops, op)
		f = f[n:]
	}
	return e, true
}

// ledgerText appends tick t's ledger text to a claim's batch, as a
// MessagePack str 32: the fields of its e or p op after the code (job,
// slot, tick id, kind ""), then its skipped ranges as s ops. The claim
// script prefixes the code when it writes the tick's record.
func (p *packer) ledgerText(t onetick.Tick) {
	p.b = append(p.b, 0xdb, 0, 0, 0, 0)
	start := len(p.b)
	ns := func(s string) {
		p.b = strconv.AppendInt(p.b, int64(len(s)), 10)
		p.b = append(p.b, ':')
		p.b = append(p.b, s...)
	}
	nint := func(n int64) {
		var buf [20]byte
		ns(string(strconv.AppendInt(buf[:0], n, 10)))
	}
	ns(t.Job)
	nint(int64(t.Slot))
	ns(t.ID())
	ns("")
	for _, r := range t.Skipped {
		ns("s")
		ns(t.Job)
		nint(int64(r.From))
		nint(int64(r.Through))
		nint(r.Count)
		ns(r.Reason)
	}
	binary.BigEndian.PutUint32(p.b[start-4:start], uint32(len(p.b)-start))
}

// eventJSON is a finish's event as the finish script passes it on (an r
// op), cut by Note's rules so that the log holds no more than the record
// will.
func eventJSON(ev onetick.RunEvent) (string, error) {
	var scratch onetick.Run
	storekit.Note(&scratch, ev)
	js, err := json.Marshal(scratch.Events[0])
	return string(js), err
}

// foldRec is a record as a fold sees it.
type foldRec struct {
	run     onetick.Run
	existed bool // stored before the fold
	changed bool
	gone    bool // trimmed by the fold
}

// foldState is what foldChunk reports: the counter it read, the log's
// length then, and how many entries it folded (0 when another fold came
// first or the log was empty).
type foldState struct {
	base, length, folded int64
}

// foldChunk folds the log's first entries (at most foldEntries).
func (b *Backend) foldChunk(ctx context.Context) (foldState, error) {
	v, err := foldReadScript.Run(ctx, b.c, []string{b.lg.folded, b.lg.log}, foldEntries).Slice()
	if err != nil {
		return foldState{}, err
	}
	if n, ok := v[0].(int64); ok && n == -1 {
		return foldState{}, b.damageOf(v)
	}
	cnt, _ := v[0].(string)
	base, perr := strconv.ParseInt(cnt, 10, 64)
	if perr != nil {
		return foldState{}, &onetick.DamageError{Key: b.lg.folded, Kind: onetick.DamageValue, Value: cnt, Repairable: true,
			Reason: "value " + strconv.Quote(short(cnt)) + " is not an integer"}
	}
	length, _ := v[1].(int64)
	st := foldState{base: base, length: length}
	list, _ := v[2].([]any)
	raw := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		raw = append(raw, s)
	}
	if len(raw) == 0 {
		return st, nil
	}
	var (
		entries []ledgerEntry
		n       int64
		ops     int
	)
	for _, s := range raw {
		if n > 0 && ops >= foldOps {
			break
		}
		n++
		e, ok := parseEntry(s)
		if !ok {
			continue // not an entry of ours: folded away unread
		}
		entries = append(entries, e)
		ops += len(e.ops)
	}
	c, err := b.fold(ctx, entries)
	if err != nil {
		return st, err
	}
	ok, err := b.commitFold(ctx, base, n, c)
	if ok {
		st.folded = n
	}
	return st, err
}

// foldChange is what a fold writes.
type foldChange struct {
	recs  map[string]*foldRec
	order []string // ticks in the order first seen
	del   []foldDel
	spans map[string]int64
}

type foldDel struct{ job, tick, member string }

// fold applies entries to the records they name (read here) and trims
// the jobs whose records claims and enqueues created.
func (b *Backend) fold(ctx context.Context, entries []ledgerEntry) (foldChange, error) {
	c := foldChange{recs: map[string]*foldRec{}, spans: map[string]int64{}}
	for _, e := range entries {
		for _, op := range e.ops {
			if _, ok := c.recs[op.tick]; !ok {
				c.recs[op.tick] = nil
				c.order = append(c.order, op.tick)
			}
		}
	}
	for i := 0; i < len(c.order); i += 1000 {
		ticks := c.order[i:min(i+1000, len(c.order))]
		vs, err := b.c.HMGet(ctx, b.lg.records, ticks...).Result()
		if err != nil {
			return c, b.ledgerErr(ctx, err, b.lg.records, "a hash")
		}
		for k, v := range vs {
			if s, ok := v.(string); ok {
				if r, ok := decodeRun(ticks[k], s); ok {
					c.recs[ticks[k]] = &foldRec{run: r, existed: true}
				}
			}
		}
	}
	budget := map[string]int{}
	var jobs []string // with a budget, in order
	at := map[string]time.Time{}
	for _, e := range entries {
		var granted []string
		for _, op := range e.ops {
			r := c.recs[op.tick]
			switch {
			case op.skipRecord:
				if r != nil {
					continue // a range is written once
				}
				c.recs[op.tick] = &foldRec{run: storekit.SkippedRun(op.job, op.skip, e.epoch, e.replica, e.now), changed: true}
				if span := int64(op.skip.Through - op.skip.From); span > c.spans[op.job] {
					c.spans[op.job] = span
				}
				continue
			case r == nil && (op.code == 'e' || op.code == 'p'):
				r = &foldRec{run: storekit.NewRun(onetick.Tick{Job: op.job, Slot: op.slot}, op.tick, op.kind)}
			case r == nil:
				r = &foldRec{run: onetick.Run{Job: op.job, Slot: op.slot, Tick: op.tick}} // storekit.RunOf
			}
			c.recs[op.tick] = r
			ev := op.ev
			ev.At = e.now
			storekit.Note(&r.run, ev)
			r.changed = true
			if (op.code == 'e' || op.code == 'p') && !slices.Contains(granted, op.job) {
				granted = append(granted, op.job)
			}
		}
		// Each claim or enqueue trims the jobs it wrote records of, as on
		// the other stores: at most storekit.TrimPerClaim records a job.
		for _, j := range granted {
			if budget[j] == 0 {
				jobs = append(jobs, j)
			}
			budget[j] += storekit.TrimPerClaim
			at[j] = e.now
		}
	}
	if len(jobs) > 0 {
		if err := b.trim(ctx, &c, jobs, budget, at); err != nil {
			return c, err
		}
	}
	return c, nil
}

// trimCand is a record retention may drop.
type trimCand struct {
	slot, newest onetick.Slot
	tick         string
}

// trim chooses the records of jobs that retention drops, at most
// budget[job] each, judged at the store time at[job]: beyond MaxPerJob
// (once a job has more than MaxPerJob plus a little slack, so that trims
// come in batches), the oldest first; then those past MaxAge (once the
// oldest is a little past it). It reads each job's count and oldest
// record, then only the records it may drop.
func (b *Backend) trim(ctx context.Context, c *foldChange, jobs []string, budget map[string]int, at map[string]time.Time) error {
	ret := b.opts.Ledger
	newOf := map[string][]*foldRec{}
	for _, t := range c.order {
		if r := c.recs[t]; r != nil && !r.existed {
			newOf[r.run.Job] = append(newOf[r.run.Job], r)
		}
	}
	pipe := b.c.Pipeline()
	cards := make([]*goredis.IntCmd, len(jobs))
	firsts := make([]*goredis.StringSliceCmd, len(jobs))
	for i, j := range jobs {
		cards[i] = pipe.ZCard(ctx, b.lg.idx+j)
		firsts[i] = pipe.ZRevRangeByLex(ctx, b.lg.idx+j, &goredis.ZRangeBy{Min: "-", Max: "+", Count: 1})
	}
	if err := b.execIndex(ctx, pipe, jobs, cards); err != nil {
		return err
	}
	countSlack := min(15, ret.MaxPerJob/64)
	ageSlack := min(ret.MaxAge/64, time.Hour)
	type plan struct {
		job          string
		count        int // records to drop beyond MaxPerJob
		age          bool
		cutoff       onetick.Slot
		oldest, aged *goredis.StringSliceCmd
	}
	var plans []*plan
	pipe = b.c.Pipeline()
	for i, j := range jobs {
		p := &plan{job: j, cutoff: onetick.SlotOf(at[j].Add(-ret.MaxAge))}
		if n := int(cards[i].Val()) + len(newOf[j]); n > ret.MaxPerJob+countSlack {
			p.count = min(n-ret.MaxPerJob, budget[j])
		}
		oldest := onetick.Slot(1<<63 - 1)
		if fs := firsts[i].Val(); len(fs) > 0 {
			if slot, _, ok := parseMember(fs[0]); ok {
				oldest = slot
			}
		}
		for _, r := range newOf[j] {
			oldest = min(oldest, r.run.Slot)
		}
		p.age = oldest < onetick.SlotOf(at[j].Add(-ret.MaxAge-ageSlack))
		if p.count == 0 && !p.age {
			continue
		}
		if p.count > 0 {
			p.oldest = pipe.ZRevRangeByLex(ctx, b.lg.idx+j, &goredis.ZRangeBy{Min: "-", Max: "+", Count: int64(p.count)})
		}
		if p.age {
			// Slots before the cutoff: members after every member of its slot.
			p.aged = pipe.ZRevRangeByLex(ctx, b.lg.idx+j, &goredis.ZRangeBy{Min: "(" + slotKey(p.cutoff) + "!", Max: "+",
				Count: int64(budget[j])})
		}
		plans = append(plans, p)
	}
	if len(plans) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return b.ledgerErr(ctx, err, b.lg.idx+plans[0].job, "a sorted set")
	}
	for _, p := range plans {
		j := p.job
		var cands []trimCand
		for _, cmd := range []*goredis.StringSliceCmd{p.oldest, p.aged} {
			if cmd == nil {
				continue
			}
			for _, m := range cmd.Val() {
				slot, tick, ok := parseMember(m)
				if !ok {
					continue
				}
				newest := slot
				if r := c.recs[tick]; r != nil {
					newest = storekit.Newest(r.run)
				} else if through, ok := rangeEnd(j, tick); ok {
					newest = through
				}
				cands = append(cands, trimCand{slot: slot, newest: newest, tick: tick})
			}
		}
		for _, r := range newOf[j] {
			cands = append(cands, trimCand{slot: r.run.Slot, newest: storekit.Newest(r.run), tick: r.run.Tick})
		}
		// Oldest first: page order reversed.
		slices.SortFunc(cands, func(a, b trimCand) int {
			if a.slot != b.slot {
				return cmp.Compare(a.slot, b.slot)
			}
			return -cmp.Compare(a.tick, b.tick)
		})
		cands = slices.CompactFunc(cands, func(a, b trimCand) bool { return a.tick == b.tick })
		left, k := budget[j], 0
		for ; k < len(cands) && k < p.count; k++ {
			c.drop(j, cands[k].slot, cands[k].tick)
			left--
		}
		if p.age {
			for ; k < len(cands) && cands[k].slot < p.cutoff && left > 0; k++ {
				if storekit.Expired(cands[k].newest, at[j], ret) {
					c.drop(j, cands[k].slot, cands[k].tick)
					left--
				}
			}
		}
	}
	return nil
}

// execIndex runs a pipeline of reads of jobs' indexes, turning a
// WRONGTYPE answer into its damage.
func (b *Backend) execIndex(ctx context.Context, pipe goredis.Pipeliner, jobs []string, cards []*goredis.IntCmd) error {
	if _, err := pipe.Exec(ctx); err != nil {
		for i, j := range jobs {
			if isWrongType(cards[i].Err()) {
				return b.wrongType(ctx, b.lg.idx+j, "a sorted set")
			}
		}
		return err
	}
	return nil
}

// drop removes a record: one the fold made is not written, a stored one
// is deleted.
func (c *foldChange) drop(job string, slot onetick.Slot, tick string) {
	r := c.recs[tick]
	if r != nil {
		r.gone = true
		if !r.existed {
			return
		}
	}
	c.del = append(c.del, foldDel{job: job, tick: tick, member: member(slot, tick)})
}

// rangeEnd reads the last slot of a skipped range from its identity
// (storekit.SkippedTick).
func rangeEnd(job, tick string) (onetick.Slot, bool) {
	rest, ok := strings.CutPrefix(tick, job+":skipped:")
	if !ok {
		return 0, false
	}
	_, through, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(through, 10, 64)
	return onetick.Slot(n), err == nil
}

// commitFold writes c if the counter is still base, consuming n entries.
func (b *Backend) commitFold(ctx context.Context, base, n int64, c foldChange) (bool, error) {
	keys := []string{b.lg.folded, b.lg.log, b.lg.records, b.lg.spans}
	type idxChange struct{ add, rem []any }
	var jobs []string
	byJob := map[string]*idxChange{}
	idx := func(job string) *idxChange {
		x := byJob[job]
		if x == nil {
			x = &idxChange{}
			byJob[job] = x
			jobs = append(jobs, job)
		}
		return x
	}
	var sets, dels, spans []any
	for _, t := range c.order {
		r := c.recs[t]
		if r == nil || r.gone || !r.changed {
			continue
		}
		js, err := encodeRun(r.run)
		if err != nil {
			return false, err
		}
		sets = append(sets, t, js)
		if !r.existed {
			x := idx(r.run.Job)
			x.add = append(x.add, 0, member(r.run.Slot, t))
		}
	}
	for _, d := range c.del {
		dels = append(dels, d.tick)
		x := idx(d.job)
		x.rem = append(x.rem, d.member)
	}
	for j, s := range c.spans {
		spans = append(spans, j, s)
	}
	args := make([]any, 0, 5+len(sets)+len(dels)+len(spans)+2*len(jobs)+len(c.order))
	args = append(args, strconv.FormatInt(base, 10), n, len(sets)/2, len(dels), len(spans)/2)
	args = append(args, sets...)
	args = append(args, dels...)
	args = append(args, spans...)
	for _, j := range jobs {
		x := byJob[j]
		keys = append(keys, b.lg.idx+j)
		args = append(args, len(x.add)/2, len(x.rem))
		args = append(args, x.add...)
		args = append(args, x.rem...)
	}
	v, err := foldCommitScript.Run(ctx, b.c, keys, args...).Result()
	if err != nil {
		return false, err
	}
	if s, ok := v.([]any); ok {
		return false, b.damageOf(s)
	}
	return v == int64(1), nil
}
