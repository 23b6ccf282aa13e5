package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/onetick/onetick"
)

// ttlSeconds is ttl in etcd's whole seconds, rounded up: etcd never
// expires a lease before the onetick TTL.
func ttlSeconds(ttl time.Duration) int64 {
	return max(int64(math.Ceil(ttl.Seconds())), 1)
}

// Acquire implements onetick.Leaser. It grants an etcd lease for the term,
// then in one transaction, only if the lease key does not exist (its
// create revision is 0) and the epoch counter and the newest term are
// as read: puts the lease key (bound to the etcd lease), the new epoch,
// the new term and the end of the previous one.
func (b *Backend) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	if err := b.check(ctx); err != nil {
		return onetick.Grant{}, err
	}
	var id clientv3.LeaseID
	defer func() {
		if id != 0 { // not used by a term
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_, _ = b.c.Revoke(rctx, id)
			cancel()
		}
	}()
	for n := 0; n < attempts; n++ {
		now := b.opts.Clock.Now()
		resp, err := b.c.Txn(ctx).Then(
			clientv3.OpGet(b.leaseKey()),
			clientv3.OpGet(b.k("epoch")),
			clientv3.OpGet(b.k("terms/"), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
				clientv3.WithLimit(int64(b.opts.HistoryLen))),
		).Commit()
		if err != nil {
			return onetick.Grant{}, fmt.Errorf("etcd: acquire: %w", err)
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return onetick.Grant{}, b.held(ctx, kvs[0].Value, kvs[0].Lease)
		}
		epochKV := resp.Responses[1].GetResponseRange().Kvs
		terms := resp.Responses[2].GetResponseRange().Kvs
		epoch := onetick.Epoch(now.UnixMilli())
		var epochRev int64
		if len(epochKV) > 0 {
			epochRev = epochKV[0].ModRevision
			e, err := parseInt(string(epochKV[0].Value))
			if err != nil {
				return onetick.Grant{}, &onetick.DamageError{Kind: onetick.DamageValue, Key: b.k("epoch"), Value: string(epochKV[0].Value),
					Repairable: true, Reason: "the epoch counter is not an integer"}
			}
			epoch = max(epoch, onetick.Epoch(e)+1)
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(b.leaseKey()), "=", 0),
			clientv3.Compare(clientv3.ModRevision(b.k("epoch")), "=", epochRev),
		}
		var ops []clientv3.Op
		var note *onetick.DamageError
		newest := true
		for i, kv := range terms {
			if i >= b.opts.HistoryLen-1 {
				ops = append(ops, clientv3.OpDelete(string(kv.Key)))
			}
			var tm onetick.Term
			if err := json.Unmarshal(kv.Value, &tm); err != nil || tm.Epoch <= 0 {
				note = &onetick.DamageError{Kind: onetick.DamageValue, Key: string(kv.Key), Value: string(kv.Value),
					Repairable: true, Reason: "entry is not a term; skipped"}
				continue
			}
			epoch = max(epoch, tm.Epoch+1)
			first := newest
			newest = false
			if first && tm.End.IsZero() && i < b.opts.HistoryLen-1 {
				// The previous term ended without a release: its lease
				// expired. etcd does not say when; the acquisition bounds it.
				tm.End, tm.Reason = now.UTC(), onetick.EndExpired
				if tm.End.Before(tm.Start) {
					tm.End = tm.Start
				}
				v, _ := json.Marshal(tm)
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
				ops = append(ops, clientv3.OpPut(string(kv.Key), string(v)))
			}
		}
		if id == 0 {
			g, err := b.c.Grant(ctx, ttlSeconds(ttl))
			if err != nil {
				return onetick.Grant{}, fmt.Errorf("etcd: acquire: grant: %w", err)
			}
			id = g.ID
		}
		l := onetick.Lease{Holder: holder, Epoch: epoch}
		term, _ := json.Marshal(onetick.Term{Epoch: epoch, Holder: holder, Start: now.UTC()})
		ops = append(ops,
			clientv3.OpPut(b.leaseKey(), l.Token(), clientv3.WithLease(id)),
			clientv3.OpPut(b.k("epoch"), fmt.Sprint(int64(epoch))),
			clientv3.OpPut(b.termKey(epoch), string(term)))
		tr, err := b.c.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(b.leaseKey())).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			id = 0 // expired while we read: grant another
			continue
		}
		if err != nil {
			return onetick.Grant{}, fmt.Errorf("etcd: acquire: %w", err)
		}
		if tr.Succeeded {
			id = 0
			return onetick.Grant{Lease: l, StoreTime: now, Damage: note}, nil
		}
		if kvs := tr.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return onetick.Grant{}, b.held(ctx, kvs[0].Value, kvs[0].Lease)
		}
		if err := backoff(ctx, n); err != nil {
			return onetick.Grant{}, err
		}
	}
	return onetick.Grant{}, ErrConflict
}

// held is the *HeldError of the lease key's value v bound to etcd lease id.
func (b *Backend) held(ctx context.Context, v []byte, id int64) error {
	info, err := b.info(ctx, v, id)
	if err != nil {
		return err
	}
	return &onetick.HeldError{Leader: info}
}

// info describes the lease key's value v bound to etcd lease id; TTL is
// what etcd says the lease has left (whole seconds).
func (b *Backend) info(ctx context.Context, v []byte, id int64) (onetick.LeaderInfo, error) {
	l, err := onetick.ParseToken(string(v))
	if err != nil {
		return onetick.LeaderInfo{}, &onetick.DamageError{Kind: onetick.DamageValue, Key: b.leaseKey(), Value: string(v),
			Repairable: true, Reason: "the lease is not holder|epoch"}
	}
	if id == 0 {
		return onetick.LeaderInfo{}, &onetick.DamageError{Kind: onetick.DamageNoExpiry, Key: b.leaseKey(), Value: string(v),
			Repairable: true, Reason: "the lease key is bound to no etcd lease: it never expires"}
	}
	info := onetick.LeaderInfo{Lease: l, Held: true}
	ttl, err := b.c.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return onetick.LeaderInfo{}, fmt.Errorf("etcd: lease time to live: %w", err)
	}
	info.TTL = time.Duration(max(ttl.TTL, 0)) * time.Second
	return info, nil
}

// mine reads the lease key and returns it when it holds exactly l.
func (b *Backend) mine(ctx context.Context, l onetick.Lease) (create, id int64, ok bool, err error) {
	resp, err := b.c.Get(ctx, b.leaseKey())
	if err != nil {
		return 0, 0, false, fmt.Errorf("etcd: read lease: %w", err)
	}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != l.Token() {
		return 0, 0, false, nil
	}
	return resp.Kvs[0].CreateRevision, resp.Kvs[0].Lease, true, nil
}

// Renew implements onetick.Leaser: a keep-alive of the term's etcd lease,
// after checking that the lease key still holds l. etcd renews a lease to
// the TTL it was granted with: ttl is not looked at.
func (b *Backend) Renew(ctx context.Context, l onetick.Lease, _ time.Duration) (onetick.Grant, error) {
	if err := b.check(ctx); err != nil {
		return onetick.Grant{}, err
	}
	now := b.opts.Clock.Now()
	_, id, ok, err := b.mine(ctx, l)
	if err != nil {
		return onetick.Grant{}, err
	}
	if !ok || id == 0 {
		return onetick.Grant{}, onetick.ErrLeaseLost
	}
	if _, err := b.c.KeepAliveOnce(ctx, clientv3.LeaseID(id)); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return onetick.Grant{}, onetick.ErrLeaseLost
		}
		return onetick.Grant{}, fmt.Errorf("etcd: renew: %w", err)
	}
	return onetick.Grant{Lease: l, StoreTime: now}, nil
}

// Release implements onetick.Leaser: one transaction that deletes the
// lease key if it is still this term's (create revision and value) and
// closes the term; then the etcd lease is revoked.
func (b *Backend) Release(ctx context.Context, l onetick.Lease) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	now := b.opts.Clock.Now()
	create, id, ok, err := b.mine(ctx, l)
	if err != nil {
		return err
	}
	if !ok {
		return onetick.ErrLeaseLost
	}
	ops := []clientv3.Op{clientv3.OpDelete(b.leaseKey())}
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(b.leaseKey()), "=", create),
		clientv3.Compare(clientv3.Value(b.leaseKey()), "=", l.Token()),
	}
	if tr, err := b.c.Get(ctx, b.termKey(l.Epoch)); err == nil && len(tr.Kvs) == 1 {
		var tm onetick.Term
		if json.Unmarshal(tr.Kvs[0].Value, &tm) == nil && tm.Epoch == l.Epoch {
			tm.End, tm.Reason = now.UTC(), onetick.EndReleased
			if tm.End.Before(tm.Start) {
				tm.End = tm.Start
			}
			v, _ := json.Marshal(tm)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(b.termKey(l.Epoch)), "=", tr.Kvs[0].ModRevision))
			ops = append(ops, clientv3.OpPut(b.termKey(l.Epoch), string(v)))
		}
	}
	resp, err := b.c.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("etcd: release: %w", err)
	}
	if !resp.Succeeded {
		// Lost meanwhile, or the term record changed (a fenced mark):
		// try once more without the term.
		resp, err = b.c.Txn(ctx).If(cmps[:2]...).Then(ops[0]).Commit()
		if err != nil {
			return fmt.Errorf("etcd: release: %w", err)
		}
		if !resp.Succeeded {
			return onetick.ErrLeaseLost
		}
	}
	if id != 0 {
		_, _ = b.c.Revoke(ctx, clientv3.LeaseID(id))
	}
	return nil
}

// Leader implements onetick.Leaser.
func (b *Backend) Leader(ctx context.Context) (onetick.LeaderInfo, error) {
	if err := b.check(ctx); err != nil {
		return onetick.LeaderInfo{}, err
	}
	resp, err := b.c.Get(ctx, b.leaseKey())
	if err != nil {
		return onetick.LeaderInfo{}, fmt.Errorf("etcd: read lease: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return onetick.LeaderInfo{}, nil
	}
	return b.info(ctx, resp.Kvs[0].Value, resp.Kvs[0].Lease)
}

// Watch implements onetick.Leaser with an etcd watch of the lease key:
// its deletion (a release, or etcd expiring the term's lease) notifies.
// After the watch breaks (compaction, a lost leader) it is made again and
// the caller is woken, since a release may have been missed.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	notify := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(ch)
		for n := 0; ctx.Err() == nil && !b.closed.Load(); n++ {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			for resp := range b.c.Watch(wctx, b.leaseKey()) {
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypeDelete {
						notify()
					}
				}
			}
			cancel()
			if n > 0 {
				notify()
			}
			if backoff(ctx, min(n, 20)) != nil {
				return
			}
		}
	}()
	return ch
}

// markFenced records, best effort, that term l tried to act after its
// lease was gone.
func (b *Backend) markFenced(ctx context.Context, l onetick.Lease) {
	key := b.termKey(l.Epoch)
	resp, err := b.c.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		return
	}
	var tm onetick.Term
	if json.Unmarshal(resp.Kvs[0].Value, &tm) != nil || tm.Reason == onetick.EndReleased || tm.Reason == onetick.EndFenced {
		return
	}
	tm.Reason = onetick.EndFenced
	if tm.End.IsZero() {
		tm.End = b.opts.Clock.Now().UTC()
		if tm.End.Before(tm.Start) {
			tm.End = tm.Start
		}
	}
	v, _ := json.Marshal(tm)
	_, _ = b.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
		Then(clientv3.OpPut(key, string(v))).Commit()
}

// History implements onetick.Backend.
func (b *Backend) History(ctx context.Context, n int) ([]onetick.Term, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if n <= 0 {
		return []onetick.Term{}, nil
	}
	resp, err := b.c.Get(ctx, b.k("terms/"), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
		clientv3.WithLimit(int64(n)))
	if err != nil {
		return nil, fmt.Errorf("etcd: history: %w", err)
	}
	out := make([]onetick.Term, 0, len(resp.Kvs))
	var bad onetick.DamageErrors
	for _, kv := range resp.Kvs {
		var tm onetick.Term
		if err := json.Unmarshal(kv.Value, &tm); err != nil || tm.Epoch <= 0 {
			bad = append(bad, &onetick.DamageError{Kind: onetick.DamageValue, Key: string(kv.Key),
				Field: strings.TrimPrefix(string(kv.Key), b.k("terms/")), Value: string(kv.Value), Repairable: true,
				Reason: "entry is not a term; skipped"})
			continue
		}
		out = append(out, tm)
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}
