package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/onetick/onetick"
)

// Inspect implements onetick.Doctor: it parses the lease, the epoch
// counter, the terms, the last-fired slots and the pause controls, and
// reports every value that does not parse. Streams are keys of their
// own, whose values onetick alone writes: they are not checked.
func (b *Backend) Inspect(ctx context.Context, _ map[string]string) ([]*onetick.DamageError, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	resp, err := b.c.Txn(ctx).Then(
		clientv3.OpGet(b.leaseKey()), clientv3.OpGet(b.k("epoch")),
		clientv3.OpGet(b.k("terms/"), clientv3.WithPrefix()),
		clientv3.OpGet(b.k("last/"), clientv3.WithPrefix()),
		clientv3.OpGet(b.k("ctl/"), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd: inspect: %w", err)
	}
	var out []*onetick.DamageError
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if _, err := b.info(ctx, kvs[0].Value, kvs[0].Lease); err != nil {
			if d, ok := err.(*onetick.DamageError); ok {
				out = append(out, d)
			} else {
				return nil, err
			}
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		if _, err := parseInt(string(kvs[0].Value)); err != nil {
			out = append(out, &onetick.DamageError{Kind: onetick.DamageValue, Key: b.k("epoch"), Value: string(kvs[0].Value),
				Repairable: true, Reason: "the epoch counter is not an integer"})
		}
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		var tm onetick.Term
		if json.Unmarshal(kv.Value, &tm) != nil || tm.Epoch <= 0 {
			out = append(out, &onetick.DamageError{Kind: onetick.DamageValue, Key: string(kv.Key), Value: string(kv.Value),
				Repairable: true, Reason: "entry is not a term"})
		}
	}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		if _, err := parseInt(string(kv.Value)); err != nil {
			job := unescape(strings.TrimPrefix(string(kv.Key), b.k("last/")))
			out = append(out, &onetick.DamageError{Kind: onetick.DamageValue, Key: string(kv.Key), Field: job, Job: job, Value: string(kv.Value),
				Repairable: true, Reason: "the job's last-fired slot is not an integer"})
		}
	}
	for _, kv := range resp.Responses[4].GetResponseRange().Kvs {
		var c onetick.JobControl
		if json.Unmarshal(kv.Value, &c) != nil {
			job := unescape(strings.TrimPrefix(string(kv.Key), b.k("ctl/")))
			out = append(out, &onetick.DamageError{Kind: onetick.DamageValue, Key: string(kv.Key), Field: job, Job: job, Value: string(kv.Value),
				Repairable: true, Reason: "the job's pause intervals do not parse"})
		}
	}
	return out, nil
}

// Repair implements onetick.Doctor: it moves the damaged key under
// "damaged/" if it still holds exactly the reported value
// (compare-and-move, one transaction). A lease key without an etcd lease
// is moved only when confirmed.
func (b *Backend) Repair(ctx context.Context, d *onetick.DamageError, confirmed bool) (string, error) {
	if err := b.check(ctx); err != nil {
		return "", err
	}
	if d == nil || !d.Repairable || !strings.HasPrefix(d.Key, b.p) || strings.HasPrefix(d.Key, b.k("s/")) {
		return "", onetick.ErrNotRepairable
	}
	if d.Kind == onetick.DamageNoExpiry && !confirmed {
		return "", fmt.Errorf("etcd: repair %s: %w (wait a TTL, then confirm)", d.Key, onetick.ErrNotRepairable)
	}
	to := b.k("damaged/" + strings.TrimPrefix(d.Key, b.p))
	tr, err := b.c.Txn(ctx).If(clientv3.Compare(clientv3.Value(d.Key), "=", d.Value)).
		Then(clientv3.OpDelete(d.Key), clientv3.OpPut(to, d.Value)).Commit()
	if err != nil {
		return "", fmt.Errorf("etcd: repair %s: %w", d.Key, err)
	}
	if !tr.Succeeded {
		return "", fmt.Errorf("etcd: repair %s: the key no longer holds the reported value; inspect again", d.Key)
	}
	return to, nil
}
