package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// controlLogLen is how many control records are kept.
const controlLogLen = 1000

// logOps returns the writes that append r to the control log: the
// record under the next sequence number, the sequence, and the deletion
// of the record that falls out of the newest controlLogLen. The caller
// compares the sequence key (ctllog) as snap read it.
func (b *Backend) logOps(snap *snapshot, r onetick.ControlRecord) ([]clientv3.Op, error) {
	var seq int64
	if v, ok := snap.val(b.k("ctllog")); ok {
		n, err := parseInt(v)
		if err != nil {
			return nil, &onetick.DamageError{Kind: onetick.DamageValue, Key: b.k("ctllog"), Value: v, Repairable: true,
				Reason: "the control log's sequence is not an integer"}
		}
		seq = n
	}
	seq++
	v, _ := json.Marshal(r)
	ops := []clientv3.Op{
		clientv3.OpPut(b.k("ctllog/"+pad(seq)), string(v)),
		clientv3.OpPut(b.k("ctllog"), strconv.FormatInt(seq, 10)),
	}
	if old := seq - controlLogLen; old > 0 {
		ops = append(ops, clientv3.OpDelete(b.k("ctllog/"+pad(old))))
	}
	return ops, nil
}

// Pause implements onetick.Controller.
func (b *Backend) Pause(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.control(ctx, job, a, storekit.ActionPause, storekit.Pause)
}

// Resume implements onetick.Controller.
func (b *Backend) Resume(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.control(ctx, job, a, storekit.ActionResume, storekit.Resume)
}

// control applies rule (storekit.Pause or Resume) to job's control state
// and logs it as action, in one transaction that compares the job's
// control, the controls' version and the log's sequence as read.
func (b *Backend) control(ctx context.Context, job string, a onetick.Actor, action string,
	rule func(onetick.JobControl, time.Time, onetick.Actor) (onetick.JobControl, string)) (onetick.JobControl, error) {
	if err := b.check(ctx); err != nil {
		return onetick.JobControl{}, err
	}
	key := b.ctlKey(job)
	for n := 0; n < attempts; n++ {
		now := b.opts.Clock.Now()
		snap, err := b.read(ctx, []string{key, b.k("ctlver"), b.k("ctllog")})
		if err != nil {
			return onetick.JobControl{}, err
		}
		var prev onetick.JobControl
		if v, ok := snap.val(key); ok {
			if err := json.Unmarshal([]byte(v), &prev); err != nil {
				return onetick.JobControl{}, &onetick.DamageError{Kind: onetick.DamageValue, Key: key, Field: job, Job: job, Value: v,
					Repairable: true, Reason: "the job's pause intervals do not parse"}
			}
		}
		var ver int64
		if v, ok := snap.val(b.k("ctlver")); ok {
			ver, _ = parseInt(v)
		}
		c, detail := rule(prev, now, a)
		ops, err := b.logOps(snap, onetick.ControlRecord{Action: action, Job: job, Who: a.Who, Reason: a.Reason, At: now.UTC(), Detail: detail})
		if err != nil {
			return onetick.JobControl{}, err
		}
		if detail != storekit.WasNotPaused {
			stored := c
			stored.Changed = false
			v, _ := json.Marshal(stored)
			ops = append(ops, clientv3.OpPut(key, string(v)), clientv3.OpPut(b.k("ctlver"), strconv.FormatInt(ver+1, 10)))
		}
		tr, err := b.c.Txn(ctx).If(snap.unchanged(key), snap.unchanged(b.k("ctlver")), snap.unchanged(b.k("ctllog"))).
			Then(ops...).Commit()
		if err != nil {
			return onetick.JobControl{}, fmt.Errorf("etcd: %s: %w", action, err)
		}
		if tr.Succeeded {
			return c, nil
		}
		if err := backoff(ctx, n); err != nil {
			return onetick.JobControl{}, err
		}
	}
	return onetick.JobControl{}, ErrConflict
}

// Controls implements onetick.Controller.
func (b *Backend) Controls(ctx context.Context) (map[string]onetick.JobControl, int64, error) {
	if err := b.check(ctx); err != nil {
		return nil, 0, err
	}
	resp, err := b.c.Txn(ctx).Then(clientv3.OpGet(b.k("ctl/"), clientv3.WithPrefix()), clientv3.OpGet(b.k("ctlver"))).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("etcd: controls: %w", err)
	}
	out := map[string]onetick.JobControl{}
	var bad onetick.DamageErrors
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var c onetick.JobControl
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			bad = append(bad, &onetick.DamageError{Kind: onetick.DamageValue, Key: string(kv.Key), Value: string(kv.Value),
				Repairable: true, Reason: "the job's pause intervals do not parse"})
			continue
		}
		if len(c.Intervals) > 0 {
			out[unescape(string(kv.Key[len(b.k("ctl/")):]))] = c
		}
	}
	ver := versionOf(resp.Responses[1].GetResponseRange().Kvs)
	if bad != nil {
		return out, ver, bad
	}
	return out, ver, nil
}

// ControlsVersion implements onetick.Controller.
func (b *Backend) ControlsVersion(ctx context.Context) (int64, error) {
	if err := b.check(ctx); err != nil {
		return 0, err
	}
	resp, err := b.c.Get(ctx, b.k("ctlver"))
	if err != nil {
		return 0, fmt.Errorf("etcd: controls version: %w", err)
	}
	return versionOf(resp.Kvs), nil
}

// Enqueue implements onetick.Controller: chunks as a claim's, without the
// fence and without moving last-fired slots; the control log's record of
// the call is written with its last chunk.
func (b *Backend) Enqueue(ctx context.Context, ticks []onetick.Tick, a onetick.Actor) (onetick.ClaimResult, error) {
	if len(ticks) == 0 {
		return onetick.ClaimResult{}, nil
	}
	if err := b.check(ctx); err != nil {
		return onetick.ClaimResult{}, err
	}
	m, err := storekit.Manual(ticks, a)
	if err != nil {
		return onetick.ClaimResult{}, fmt.Errorf("etcd: %w", err)
	}
	res := onetick.ClaimResult{Outcomes: make([]onetick.Outcome, len(ticks)), StoreTime: b.opts.Clock.Now()}
	n := 0
	cs := b.chunks(ticks)
	for i, c := range cs {
		ch := &chunk{manual: &m, actor: a, ticks: ticks[c[0]:c[1]], off: c[0], all: ticks, enqueued: &n, last: i == len(cs)-1}
		if err := b.commitChunk(ctx, ch, &res); err != nil {
			return onetick.ClaimResult{}, err
		}
	}
	return res, nil
}

// ControlLog implements onetick.Controller.
func (b *Backend) ControlLog(ctx context.Context, n int) ([]onetick.ControlRecord, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if n <= 0 {
		return []onetick.ControlRecord{}, nil
	}
	resp, err := b.c.Get(ctx, b.k("ctllog/"), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
		clientv3.WithLimit(int64(n)))
	if err != nil {
		return nil, fmt.Errorf("etcd: control log: %w", err)
	}
	out := make([]onetick.ControlRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r onetick.ControlRecord
		if json.Unmarshal(kv.Value, &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}
