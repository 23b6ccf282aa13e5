package etcd

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// otx is an optimistic transaction, as etcd's own STM does it: reads at
// one revision, recorded; writes buffered; the commit is one Txn that
// compares the mod revision of every key read (and, for tracked ranges,
// that no key in the range changed since) and applies every write, or
// nothing. update runs a function over a fresh otx until its commit
// holds.
type otx struct {
	b      *Backend
	ctx    context.Context
	rev    int64
	reads  map[string]*mvccpb.KeyValue // nil: absent
	ranges [][2]string                 // tracked [start, end)
	writes map[string]*otxWrite
}

type otxWrite struct {
	val   string
	del   bool
	lease clientv3.LeaseID
}

// get reads key, seeing the transaction's own writes.
func (t *otx) get(key string) (string, bool, error) {
	if w, ok := t.writes[key]; ok {
		return w.val, !w.del, nil
	}
	if kv, ok := t.reads[key]; ok {
		if kv == nil {
			return "", false, nil
		}
		return string(kv.Value), true, nil
	}
	opts := []clientv3.OpOption{}
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	resp, err := t.b.c.Get(t.ctx, key, opts...)
	if err != nil {
		return "", false, err
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	if len(resp.Kvs) == 0 {
		t.reads[key] = nil
		return "", false, nil
	}
	t.reads[key] = resp.Kvs[0]
	return string(resp.Kvs[0].Value), true, nil
}

// kvPair is one key and value of a range read.
type kvPair struct{ key, val string }

// scan reads the keys in [start, end) in key order, with the
// transaction's own writes applied, up to limit (0: all) from the store.
// With track the commit also fails when any key of the range changed or
// appeared since the read.
func (t *otx) scan(start, end string, limit int64, track bool) ([]kvPair, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(limit))
	}
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	resp, err := t.b.c.Get(t.ctx, start, opts...)
	if err != nil {
		return nil, err
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	if track {
		t.ranges = append(t.ranges, [2]string{start, end})
	}
	m := map[string]string{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if _, ok := t.reads[k]; !ok {
			t.reads[k] = kv
		}
		m[k] = string(kv.Value)
	}
	for k, w := range t.writes {
		if k >= start && k < end {
			if w.del {
				delete(m, k)
			} else {
				m[k] = w.val
			}
		}
	}
	out := make([]kvPair, 0, len(m))
	for k, v := range m {
		out = append(out, kvPair{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

func (t *otx) put(key, val string) { t.writes[key] = &otxWrite{val: val} }
func (t *otx) putLease(key, val string, l clientv3.LeaseID) {
	t.writes[key] = &otxWrite{val: val, lease: l}
}
func (t *otx) del(key string) { t.writes[key] = &otxWrite{del: true} }

// commit applies the writes if nothing read changed; false when it did.
func (t *otx) commit() (bool, error) {
	if len(t.writes) == 0 {
		return true, nil
	}
	cmps := make([]clientv3.Cmp, 0, len(t.reads)+len(t.ranges))
	for k, kv := range t.reads {
		var rev int64
		if kv != nil {
			rev = kv.ModRevision
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
	}
	for _, r := range t.ranges {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(r[0]), "<", t.rev+1).WithRange(r[1]))
	}
	ops := make([]clientv3.Op, 0, len(t.writes))
	for k, w := range t.writes {
		switch {
		case w.del:
			ops = append(ops, clientv3.OpDelete(k))
		case w.lease != 0:
			ops = append(ops, clientv3.OpPut(k, w.val, clientv3.WithLease(w.lease)))
		default:
			ops = append(ops, clientv3.OpPut(k, w.val))
		}
	}
	resp, err := t.b.c.Txn(t.ctx).If(cmps...).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.b.dropRecordLeases()
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// update runs fn over fresh transactions until one commits, at most
// attempts times; fn's error ends it at once, with nothing written.
func (b *Backend) update(ctx context.Context, what string, fn func(t *otx) error) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	for n := 0; n < attempts; n++ {
		t := &otx{b: b, ctx: ctx, reads: map[string]*mvccpb.KeyValue{}, writes: map[string]*otxWrite{}}
		if err := fn(t); err != nil {
			return err
		}
		ok, err := t.commit()
		if err != nil {
			return fmt.Errorf("etcd: %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if err := backoff(ctx, n); err != nil {
			return err
		}
	}
	return fmt.Errorf("etcd: %s: %w", what, ErrConflict)
}

// prefixEnd is the end of the range of keys that start with p.
func prefixEnd(p string) string { return clientv3.GetPrefixRangeEnd(p) }

// prefetch reads, in one request at the transaction's revision, those of
// keys it has not read yet.
func (t *otx) prefetch(keys []string) error {
	var ops []clientv3.Op
	var want []string
	for _, k := range keys {
		if _, ok := t.reads[k]; ok {
			continue
		}
		if _, ok := t.writes[k]; ok {
			continue
		}
		want = append(want, k)
		ops = append(ops, clientv3.OpGet(k, clientv3.WithRev(t.rev)))
	}
	for start := 0; start < len(ops); start += t.b.opts.MaxTxnOps {
		end := min(start+t.b.opts.MaxTxnOps, len(ops))
		resp, err := t.b.c.Txn(t.ctx).Then(ops[start:end]...).Commit()
		if err != nil {
			return err
		}
		for i, r := range resp.Responses {
			t.reads[want[start+i]] = nil
			if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
				t.reads[want[start+i]] = kvs[0]
			}
		}
	}
	return nil
}
