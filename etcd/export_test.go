package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Expire makes the current term's lease expire now (etcd revokes it and
// deletes the lease key), as if its holder had paused past its TTL.
func (b *Backend) Expire(ctx context.Context) error {
	resp, err := b.c.Get(ctx, b.leaseKey())
	if err != nil || len(resp.Kvs) == 0 {
		return err
	}
	_, err = b.c.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	return err
}

// DamageKey is where the suite's damage of kind "last", "ctl" or "term"
// of job goes.
func (b *Backend) DamageKey(kind, job string) string {
	switch kind {
	case "last":
		return b.lastKey(job)
	case "ctl":
		return b.ctlKey(job)
	}
	return b.k("terms/garbage")
}
