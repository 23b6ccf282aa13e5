package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// The run ledger on etcd: one key per record, runs/<job>/<slot>/<tick>
// (a Run as JSON), ordered by slot so that retention finds the oldest
// first, and an index runidx/<job>/<tick> -> <slot> to find a tick's
// record. A record is written in the transaction of the change it
// records (a claim's, an enqueue's, a worker's Begin or Finish, a
// replay's). Retention: after a claim or an enqueue, one read learns
// each job's count of records and oldest slot; a job with more than
// MaxPerJob records, or whose oldest slot is past MaxAge, loses up to
// TrimPerClaim of its oldest records (beyond MaxPerJob, or whose newest
// slot is past MaxAge), in a transaction of its own.

var _ onetick.Ledger = (*Backend)(nil)

func (b *Backend) runsPrefix(job string) string { return b.k("runs/" + esc(job) + "/") }
func (b *Backend) runKey(job string, slot onetick.Slot, tick string) string {
	return b.runsPrefix(job) + pad(int64(slot)) + "/" + esc(tick)
}
func (b *Backend) runIdx(job, tick string) string { return b.k("runidx/" + esc(job) + "/" + esc(tick)) }

func (b *Backend) ledgerOn() bool { return !b.opts.Ledger.Off }

// runOf reads the record of tick of job in t.
func (b *Backend) runOf(t *otx, job, tick string) (onetick.Run, string, bool, error) {
	v, ok, err := t.get(b.runIdx(job, tick))
	if err != nil || !ok {
		return onetick.Run{}, "", false, err
	}
	key := b.runsPrefix(job) + v + "/" + esc(tick)
	raw, ok, err := t.get(key)
	if err != nil || !ok {
		return onetick.Run{}, "", false, err
	}
	var r onetick.Run
	if json.Unmarshal([]byte(raw), &r) != nil {
		return onetick.Run{}, "", false, nil
	}
	return r, key, true, nil
}

func (b *Backend) putRun(t *otx, r onetick.Run) {
	t.put(b.runKey(r.Job, r.Slot, r.Tick), jsonOf(r))
	t.put(b.runIdx(r.Job, r.Tick), pad(int64(r.Slot)))
}

// note applies ev, at now, to the record of fresh's tick (fresh when
// there is none), in t.
func (b *Backend) note(t *otx, now time.Time, fresh onetick.Run, ev onetick.RunEvent) error {
	if !b.ledgerOn() {
		return nil
	}
	r, _, ok, err := b.runOf(t, fresh.Job, fresh.Tick)
	if err != nil {
		return err
	}
	if !ok {
		r = fresh
	}
	ev.At = now
	storekit.Note(&r, ev)
	b.putRun(t, r)
	return nil
}

// putNew stores r unless its tick has a record.
func (b *Backend) putNew(t *otx, r onetick.Run) error {
	if !b.ledgerOn() {
		return nil
	}
	if _, ok, err := t.get(b.runIdx(r.Job, r.Tick)); err != nil || ok {
		return err
	}
	b.putRun(t, r)
	return nil
}

// ledgerKeys are the index keys a claim or an enqueue of ticks may read,
// to read with the rest of its state.
func (b *Backend) ledgerKeys(ticks []onetick.Tick, ids []string) []string {
	if !b.ledgerOn() {
		return nil
	}
	var keys []string
	for i, t := range ticks {
		keys = append(keys, b.runIdx(t.Job, ids[i]))
		for _, r := range t.Skipped {
			keys = append(keys, b.runIdx(t.Job, storekit.SkippedTick(t.Job, r.From, r.Through)))
		}
	}
	return keys
}

// prefetch reads the records the index keys in t name, in one request.
func (b *Backend) prefetchRuns(t *otx, idx []string) error {
	var keys []string
	for _, k := range idx {
		if kv := t.reads[k]; kv != nil {
			job, tick := b.splitIdx(k)
			keys = append(keys, b.runsPrefix(job)+string(kv.Value)+"/"+esc(tick))
		}
	}
	return t.prefetch(keys)
}

func (b *Backend) splitIdx(k string) (job, tick string) {
	rest := strings.TrimPrefix(k, b.k("runidx/"))
	j, tk, _ := strings.Cut(rest, "/")
	return unescape(j), unescape(tk)
}

// trimRuns trims the ledgers of jobs with slack (see above): one read of
// every job's count and oldest record, then a transaction per job that
// needs it.
func (b *Backend) trimRuns(ctx context.Context, jobs []string) {
	if !b.ledgerOn() || len(jobs) == 0 {
		return
	}
	ret := b.opts.Ledger
	now := b.opts.Clock.Now()
	for start := 0; start < len(jobs); start += b.opts.MaxTxnOps {
		part := jobs[start:min(start+b.opts.MaxTxnOps, len(jobs))]
		ops := make([]clientv3.Op, len(part))
		for i, j := range part {
			ops[i] = clientv3.OpGet(b.runsPrefix(j), clientv3.WithPrefix(), clientv3.WithLimit(1),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		}
		resp, err := b.c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return
		}
		for i, r := range resp.Responses {
			rr := r.GetResponseRange()
			over := rr.Count > int64(ret.MaxPerJob)
			old := false
			if len(rr.Kvs) > 0 {
				var run onetick.Run
				old = json.Unmarshal(rr.Kvs[0].Value, &run) != nil || run.Slot < onetick.SlotOf(now.Add(-ret.MaxAge))
			}
			if over || old {
				b.trimJob(ctx, part[i], now)
			}
		}
	}
}

// trimJob drops up to TrimPerClaim of job's oldest records: those beyond
// the newest MaxPerJob and those past the age limit.
func (b *Backend) trimJob(ctx context.Context, job string, now time.Time) {
	ret := b.opts.Ledger
	_ = b.update(ctx, "trim ledger", func(t *otx) error {
		p := b.runsPrefix(job)
		cnt, err := b.c.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		kvs, err := t.scan(p, prefixEnd(p), storekit.TrimPerClaim, false)
		if err != nil {
			return err
		}
		beyond := max(cnt.Count-int64(ret.MaxPerJob), 0)
		for i, kv := range kvs {
			var r onetick.Run
			bad := json.Unmarshal([]byte(kv.val), &r) != nil
			if int64(i) < beyond || bad || storekit.Expired(storekit.Newest(r), now, ret) {
				t.del(kv.key)
				if !bad {
					if _, _, err := t.get(b.runIdx(job, r.Tick)); err != nil {
						return err
					}
					t.del(b.runIdx(job, r.Tick))
				}
			}
		}
		return nil
	})
}

// Runs implements onetick.Ledger.
func (b *Backend) Runs(ctx context.Context, q onetick.RunQuery) (onetick.RunPage, error) {
	if !b.ledgerOn() {
		return onetick.RunPage{}, onetick.ErrLedgerOff
	}
	if err := b.check(ctx); err != nil {
		return onetick.RunPage{}, err
	}
	var (
		slot   onetick.Slot
		cursor string
	)
	if q.After != "" {
		var err error
		if slot, cursor, err = storekit.ParseCursor(q.After); err != nil {
			return onetick.RunPage{}, fmt.Errorf("etcd: runs of %s: %w", q.Job, err)
		}
	}
	resp, err := b.c.Get(ctx, b.runsPrefix(q.Job), clientv3.WithPrefix())
	if err != nil {
		return onetick.RunPage{}, fmt.Errorf("etcd: runs of %s: %w", q.Job, err)
	}
	runs := make([]onetick.Run, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r onetick.Run
		if json.Unmarshal(kv.Value, &r) == nil {
			runs = append(runs, r)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return storekit.Before(runs[i], runs[j]) })
	page := onetick.RunPage{Runs: []onetick.Run{}}
	limit := storekit.Limit(q)
	for _, r := range runs {
		if cursor != "" && !storekit.After(r, slot, cursor) {
			continue
		}
		if !storekit.Match(q, r) {
			continue
		}
		if len(page.Runs) == limit {
			page.Next = storekit.Cursor(page.Runs[limit-1])
			break
		}
		page.Runs = append(page.Runs, r)
	}
	return page, nil
}

// Run implements onetick.Ledger.
func (b *Backend) Run(ctx context.Context, job, tick string) (onetick.Run, bool, error) {
	if !b.ledgerOn() {
		return onetick.Run{}, false, onetick.ErrLedgerOff
	}
	var (
		r  onetick.Run
		ok bool
	)
	err := b.update(ctx, "run", func(t *otx) error {
		var err error
		r, _, ok, err = b.runOf(t, job, tick)
		return err
	})
	return r, ok, err
}
