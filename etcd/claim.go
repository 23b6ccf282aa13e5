package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// Claim implements onetick.Claimer. A batch that fits one transaction
// (Options.MaxTxnOps, MaxTxnBytes) is claimed in one; a larger one is
// split, in order, into transactions that each hold whole decisions (a
// tick's record, its entry, its job's last-fired slot) and each check the
// fence: see the package comment, "Large claims".
func (b *Backend) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	if err := b.check(ctx); err != nil {
		return onetick.ClaimResult{}, err
	}
	res := onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: b.opts.Clock.Now()}
	if len(ticks) == 0 {
		_, id, ok, err := b.mine(ctx, l)
		if err != nil {
			return onetick.ClaimResult{}, err
		}
		if !ok || id == 0 {
			b.markFenced(ctx, l)
			return onetick.ClaimResult{}, onetick.ErrFenced
		}
		return res, nil
	}
	for _, c := range b.chunks(ticks) {
		if err := b.commitChunk(ctx, &chunk{lease: &l, ticks: ticks[c[0]:c[1]], off: c[0]}, &res); err != nil {
			return onetick.ClaimResult{}, err
		}
	}
	return res, nil
}

// chunks splits ticks into [from, to) ranges whose transactions fit the
// server's limits: compares and operations per transaction, and bytes.
func (b *Backend) chunks(ticks []onetick.Tick) [][2]int {
	limit := b.opts.MaxTxnOps - 4 // the lease, the sequence, the log
	var out [][2]int
	start, cmps, ops, size := 0, 0, 0, 0
	jobs, streams := map[string]bool{}, map[string]bool{}
	for i, t := range ticks {
		// What tick t adds: its record's compare and put, its entry, and
		// with the ledger its record and index (and each skipped
		// range's); a new job's last-fired slot and pause state; a new
		// stream's trim.
		c, o, s := 1, 2, 2*len(t.Payload)+3*len(t.Job)+len(t.Stream)+256
		if b.ledgerOn() {
			c, o, s = c+2+2*len(t.Skipped), o+2+2*len(t.Skipped), s+1024*(1+len(t.Skipped))
		}
		newJob, newStream := 2, 1
		if i > start && (cmps+c+2*newJob > limit || ops+o+2*newJob+newStream > limit || size+s > b.opts.MaxTxnBytes) {
			out = append(out, [2]int{start, i})
			start, cmps, ops, size = i, 0, 0, 0
			jobs, streams = map[string]bool{}, map[string]bool{}
		}
		if !jobs[t.Job] {
			c, o = c+2, o+2
		}
		if !streams[t.Stream] {
			o++
		}
		jobs[t.Job], streams[t.Stream] = true, true
		cmps, ops, size = cmps+c, ops+o, size+s
	}
	return append(out, [2]int{start, len(ticks)})
}

// chunk is one transaction's worth of a claim (lease set) or an enqueue
// (manual set).
type chunk struct {
	lease  *onetick.Lease
	manual *storekit.ManualBatch
	actor  onetick.Actor
	ticks  []onetick.Tick
	off    int // index of ticks[0] in the call
	// all and enqueued: an enqueue's whole call and how many of its ticks
	// earlier chunks enqueued, for the control log's record that the last
	// chunk writes.
	all      []onetick.Tick
	enqueued *int
	last     bool
}

// entry is one stream entry to append.
type entry struct {
	stream string
	rec    onetick.TickRecord
}

// commitChunk reads the state the chunk's decisions need, decides each
// tick with storekit, and writes the decisions in one transaction that
// compares the fence (for a claim) and the mod revision of every key it
// read; a lost compare is read and decided again, up to attempts times.
func (b *Backend) commitChunk(ctx context.Context, c *chunk, res *onetick.ClaimResult) error {
	for n := 0; n < attempts; n++ {
		done, err := b.tryChunk(ctx, c, res)
		if done || err != nil {
			return err
		}
		if err := backoff(ctx, n); err != nil {
			return err
		}
	}
	return ErrConflict
}

func (b *Backend) tryChunk(ctx context.Context, c *chunk, res *onetick.ClaimResult) (bool, error) {
	now := b.opts.Clock.Now()
	keys := []string{b.leaseKey(), b.k("seq"), b.k("epoch"), b.k("ctllog")}
	jobs := storekit.Jobs(c.ticks)
	if c.lease != nil {
		for _, j := range jobs {
			keys = append(keys, b.lastKey(j), b.ctlKey(j))
		}
	}
	slot := onetick.SlotOf(now)
	ids := make([]string, len(c.ticks))
	for i, t := range c.ticks {
		if c.manual != nil {
			t.Slot = c.manual.Slot(t, slot)
		}
		ids[i] = t.ID()
		keys = append(keys, b.recKey(ids[i]))
	}
	idx := b.ledgerKeys(c.ticks, ids)
	keys = append(keys, idx...)
	snap, err := b.read(ctx, keys)
	if err != nil {
		return false, err
	}
	// The ledger's reads and writes go through an optimistic transaction
	// that starts from the snapshot.
	lt := &otx{b: b, ctx: ctx, rev: snap.rev, reads: make(map[string]*mvccpb.KeyValue, len(keys)), writes: map[string]*otxWrite{}}
	inKeys := make(map[string]bool, len(keys))
	for _, k := range keys {
		lt.reads[k], inKeys[k] = snap.kvs[k], true
	}
	if err := b.prefetchRuns(lt, idx); err != nil {
		return false, err
	}
	// Compare every key the decisions depend on: the stream sequence,
	// the records, and a claim's jobs' state or an enqueue's control log.
	cmps := []clientv3.Cmp{snap.unchanged(b.k("seq"))}
	if c.manual != nil {
		cmps = append(cmps, snap.unchanged(b.k("ctllog")))
	}
	for _, k := range dedup(keys[4:]) {
		cmps = append(cmps, snap.unchanged(k))
	}
	var leaseCreate int64
	if c.lease != nil {
		kv, ok := snap.kvs[b.leaseKey()]
		if !ok || string(kv.Value) != c.lease.Token() || kv.Lease == 0 {
			b.markFenced(ctx, *c.lease)
			return true, onetick.ErrFenced
		}
		// The fence: the lease key is the one this term created (create
		// revision) and nobody wrote it since (mod revision).
		leaseCreate = kv.CreateRevision
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(b.leaseKey()), "=", leaseCreate),
			clientv3.Compare(clientv3.ModRevision(b.leaseKey()), "=", kv.ModRevision))
	}
	// The state, as decisions change it.
	records := map[string]string{}
	for _, id := range ids {
		if v, ok := snap.val(b.recKey(id)); ok {
			records[id] = v
		}
	}
	last := map[string]onetick.Slot{}
	jobDamage := map[string]*onetick.DamageError{}
	ctl := map[string]onetick.JobControl{}
	if c.lease != nil {
		for _, j := range jobs {
			if v, ok := snap.val(b.lastKey(j)); ok {
				s, err := parseInt(v)
				if err != nil {
					jobDamage[j] = &onetick.DamageError{Kind: onetick.DamageValue, Key: b.lastKey(j), Field: j, Job: j, Value: v,
						Repairable: true, Reason: "the job's last-fired slot is not an integer"}
				} else {
					last[j] = onetick.Slot(s)
				}
			}
			if v, ok := snap.val(b.ctlKey(j)); ok {
				var jc onetick.JobControl
				if err := json.Unmarshal([]byte(v), &jc); err != nil {
					jobDamage[j] = &onetick.DamageError{Kind: onetick.DamageValue, Key: b.ctlKey(j), Field: j, Job: j, Value: v,
						Repairable: true, Reason: "the job's pause intervals do not parse"}
				} else {
					ctl[j] = jc
				}
			}
		}
	}
	var epoch onetick.Epoch
	if v, ok := snap.val(b.k("epoch")); ok {
		e, _ := parseInt(v)
		epoch = onetick.Epoch(e)
	}
	seqMs, seq := parseSeq(snap.kvs, b.k("seq"))
	ms := max(now.UnixMilli(), seqMs)

	limit := onetick.SlotOf(now.Add(b.opts.ClockTolerance))
	var token string
	if c.lease != nil {
		token = c.lease.Token()
	}
	newRecs := map[string]time.Duration{} // id -> retention
	moved := map[string]bool{}
	var entries []entry
	outcomes := make([]onetick.Outcome, len(c.ticks))
	damaged := map[int]*onetick.DamageError{}
	appended := 0
	for i, t := range c.ticks {
		id := ids[i]
		rec, seen := records[id]
		var d storekit.Decision
		if c.manual != nil {
			t.Slot = c.manual.Slot(t, slot)
			d = c.manual.Decide(t.Slot, limit, seen, nil)
		} else {
			lastSlot, hasLast := last[t.Job]
			d, err = storekit.Decide(t, token, limit, storekit.View{Seen: seen, Record: rec, HasLast: hasLast, Last: lastSlot,
				JobDamage: jobDamage[t.Job], Paused: func(job string, s onetick.Slot) (bool, error) {
					jc, ok := ctl[job]
					return ok && jc.PausedAt(s), nil
				}})
			if err != nil {
				return false, err
			}
		}
		if d.Record != "" {
			records[id] = d.Record
			newRecs[id] = max(newRecs[id], t.Retention)
		}
		if d.Move {
			last[t.Job] = t.Slot
			moved[t.Job] = true
		}
		if c.manual != nil && d.Append {
			if err := b.note(lt, now, storekit.NewRun(t, id, c.manual.Kind),
				onetick.RunEvent{What: onetick.EventEnqueued, Replica: c.manual.Token}); err != nil {
				return false, err
			}
		} else if c.manual == nil {
			if n, ok := storekit.ClaimNotes(t, id, d, *c.lease, now); ok {
				if err := b.note(lt, now, n.Fresh, n.Event); err != nil {
					return false, err
				}
				for _, r := range n.Skipped {
					if err := b.putNew(lt, r); err != nil {
						return false, err
					}
				}
			}
		}
		if d.Append {
			seq++
			r := onetick.TickRecord{ID: strconv.FormatInt(ms, 10) + "-" + strconv.FormatInt(seq, 10), Job: t.Job, Slot: t.Slot,
				Tick: id, Payload: t.Payload, Version: t.Version}
			if c.manual != nil {
				r.Epoch, r.Replica, r.Kind = epoch, c.manual.Token, c.manual.Kind
			} else {
				r.Epoch, r.Replica = c.lease.Epoch, c.lease.Holder
			}
			entries = append(entries, entry{stream: t.Stream, rec: r})
			appended++
		}
		outcomes[i] = d.Outcome
		if d.Damage != nil {
			damaged[i] = d.Damage
		}
	}

	var ops []clientv3.Op
	for id, ret := range newRecs {
		lid, err := b.recordLease(ctx, ret)
		if err != nil {
			return false, err
		}
		ops = append(ops, clientv3.OpPut(b.recKey(id), records[id], clientv3.WithLease(lid)))
	}
	for j := range moved {
		ops = append(ops, clientv3.OpPut(b.lastKey(j), strconv.FormatInt(int64(last[j]), 10)))
	}
	for _, j := range jobs {
		jc, ok := ctl[j]
		l, has := last[j]
		if !ok || !has || jobDamage[j] != nil {
			continue
		}
		kept := storekit.DropPassed(jc.Intervals, l)
		switch {
		case len(kept) == len(jc.Intervals):
		case len(kept) == 0:
			ops = append(ops, clientv3.OpDelete(b.ctlKey(j)))
		default:
			jc.Intervals = kept
			v, _ := json.Marshal(jc)
			ops = append(ops, clientv3.OpPut(b.ctlKey(j), string(v)))
		}
	}
	trims, err := b.appendOps(ctx, snap.rev, c.ticks, entries)
	if err != nil {
		return false, err
	}
	ops = append(ops, trims...)
	if len(entries) > 0 {
		ops = append(ops, clientv3.OpPut(b.k("seq"), strconv.FormatInt(ms, 10)+"-"+strconv.FormatInt(seq, 10)))
	}
	if c.manual != nil && c.last {
		logOps, err := b.logOps(snap, c.manual.Record(c.all, c.actor, now, *c.enqueued+appended))
		if err != nil {
			return false, err
		}
		ops = append(ops, logOps...)
	}
	for k, kv := range lt.reads {
		if !inKeys[k] {
			var rev int64
			if kv != nil {
				rev = kv.ModRevision
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
		}
	}
	for k, w := range lt.writes {
		if w.del {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, w.val))
		}
	}
	if len(ops) == 0 {
		// Nothing to write; the reads were one consistent snapshot, and a
		// claim's fence held at it.
		b.answer(res, c.off, outcomes, damaged)
		if c.enqueued != nil {
			*c.enqueued += appended
		}
		return true, nil
	}
	tr, err := b.c.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(b.leaseKey())).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		b.dropRecordLeases()
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("etcd: claim: %w", err)
	}
	if !tr.Succeeded {
		if c.lease != nil {
			kvs := tr.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 || kvs[0].CreateRevision != leaseCreate || string(kvs[0].Value) != c.lease.Token() || kvs[0].Lease == 0 {
				b.markFenced(ctx, *c.lease)
				return true, onetick.ErrFenced
			}
		}
		return false, nil
	}
	b.answer(res, c.off, outcomes, damaged)
	if c.enqueued != nil {
		*c.enqueued += appended
	}
	if len(lt.writes) > 0 {
		b.trimRuns(ctx, jobs)
	}
	return true, nil
}

func (b *Backend) answer(res *onetick.ClaimResult, off int, outcomes []onetick.Outcome, damaged map[int]*onetick.DamageError) {
	copy(res.Outcomes[off:], outcomes)
	for i, d := range damaged {
		if res.Damaged == nil {
			res.Damaged = map[int]*onetick.DamageError{}
		}
		res.Damaged[off+i] = d
	}
}

// appendOps returns the puts of entries and the trims of their streams
// to their ticks' MaxLen. A stream is trimmed once it holds a tenth more
// than MaxLen (as XADD MAXLEN ~ trims): its oldest entries go, down to
// MaxLen; entries of this append beyond MaxLen are not written at all.
// rev is the revision the claim read at.
func (b *Backend) appendOps(ctx context.Context, rev int64, ticks []onetick.Tick, entries []entry) ([]clientv3.Op, error) {
	maxLen := map[string]int64{}
	for _, t := range ticks {
		if t.MaxLen > 0 {
			maxLen[t.Stream] = t.MaxLen
		}
	}
	per := map[string][]entry{}
	var order []string
	for _, e := range entries {
		if per[e.stream] == nil {
			order = append(order, e.stream)
		}
		per[e.stream] = append(per[e.stream], e)
	}
	// The lengths of the streams with a MaxLen, in one read.
	counts := map[string]int64{}
	var cops []clientv3.Op
	var cstreams []string
	for _, s := range order {
		if maxLen[s] > 0 {
			cops = append(cops, clientv3.OpGet(b.streamPrefix(s), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(rev)))
			cstreams = append(cstreams, s)
		}
	}
	if len(cops) > 0 {
		resp, err := b.c.Txn(ctx).Then(cops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("etcd: claim: stream length: %w", err)
		}
		for i, r := range resp.Responses {
			counts[cstreams[i]] = r.GetResponseRange().Count
		}
	}
	var ops []clientv3.Op
	for _, s := range order {
		es := per[s]
		if m := maxLen[s]; m > 0 {
			if int64(len(es)) > m {
				es = es[int64(len(es))-m:]
			}
			p := b.streamPrefix(s)
			count := counts[s]
			total := count + int64(len(es))
			if over := total - m; over > m/10 && count > 0 {
				drop := min(over, count)
				ks, err := b.c.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(drop),
					clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithRev(rev))
				if err != nil {
					return nil, fmt.Errorf("etcd: claim: trim: %w", err)
				}
				if n := len(ks.Kvs); n > 0 {
					ops = append(ops, clientv3.OpDelete(p, clientv3.WithRange(string(ks.Kvs[n-1].Key)+"\x00")))
				}
			}
		}
		for _, e := range es {
			v, _ := json.Marshal(e.rec)
			ops = append(ops, clientv3.OpPut(b.streamPrefix(s)+pad(seqOf(e.rec.ID)), string(v)))
		}
	}
	return ops, nil
}

// parseSeq reads the "ms-seq" of the newest entry appended.
func parseSeq(kvs map[string]*mvccpb.KeyValue, key string) (int64, int64) {
	kv, ok := kvs[key]
	if !ok {
		return 0, 0
	}
	ms, seq, _ := strings.Cut(string(kv.Value), "-")
	a, _ := parseInt(ms)
	c, _ := parseInt(seq)
	return a, c
}

func seqOf(id string) int64 {
	_, s, _ := strings.Cut(id, "-")
	n, _ := parseInt(s)
	return n
}

func dedup(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// recordLease returns an etcd lease for tick records kept for ret: one
// per whole-second TTL, shared for a tenth of it (at least a second), so
// a record lives between ret and 1.1·ret (+1s).
func (b *Backend) recordLease(ctx context.Context, ret time.Duration) (clientv3.LeaseID, error) {
	secs := ttlSeconds(ret)
	share := time.Duration(secs) * time.Second / 10
	if share < time.Second {
		share = time.Second
	}
	now := time.Now()
	b.mu.Lock()
	if l, ok := b.recLse[secs]; ok && now.Sub(l.granted) < share {
		b.mu.Unlock()
		return l.id, nil
	}
	b.mu.Unlock()
	g, err := b.c.Grant(ctx, secs+int64(share/time.Second))
	if err != nil {
		return 0, fmt.Errorf("etcd: grant a lease for tick records: %w", err)
	}
	b.mu.Lock()
	b.recLse[secs] = recLease{id: g.ID, granted: now}
	b.mu.Unlock()
	return g.ID, nil
}

func (b *Backend) dropRecordLeases() {
	b.mu.Lock()
	clear(b.recLse)
	b.mu.Unlock()
}

// LastFired implements onetick.Claimer.
func (b *Backend) LastFired(ctx context.Context, jobs []string) (map[string]onetick.Slot, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		keys[i] = b.lastKey(j)
	}
	snap, err := b.read(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]onetick.Slot, len(jobs))
	var bad onetick.DamageErrors
	for _, j := range jobs {
		v, ok := snap.val(b.lastKey(j))
		if !ok {
			continue
		}
		s, err := parseInt(v)
		if err != nil {
			bad = append(bad, &onetick.DamageError{Kind: onetick.DamageValue, Key: b.lastKey(j), Field: j, Job: j, Value: v,
				Repairable: true, Reason: "the job's last-fired slot is not an integer"})
			continue
		}
		out[j] = onetick.Slot(s)
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// ReadStream returns the entries of stream key, oldest first.
func (b *Backend) ReadStream(ctx context.Context, key string) ([]onetick.TickRecord, error) {
	resp, err := b.c.Get(ctx, b.streamPrefix(key), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcd: read stream: %w", err)
	}
	out := make([]onetick.TickRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r onetick.TickRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("etcd: stream %s entry %s: %w", key, kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}
