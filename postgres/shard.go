package postgres

import (
	"strconv"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

var _ onetick.Sharder = (*Backend)(nil)

// Shard implements onetick.Sharder (docs/shards.md, decision 5): shard n
// of shards is a Backend on the same pool, listener and schema whose
// lease is the lease row of shard n. Shard 0 of 1 is b itself; the
// store's own lease is shard 0's row, so a view of shard 0 of any count
// shares it (a fleet moving to shards stops every replica first: a
// previous version refuses the newer schema).
//
// What a view has of its own: the lease row (lease.shard), its terms
// (terms.shard: History, the closing of open terms and the history cap
// of Acquire are the shard's), the acquire advisory lock
// ("<schema>:acquire" for shard 0, "<schema>:acquire:N" else) and its
// wakes (the lease channel's payload names the shard, and a view's Watch
// wakes only for its shard). A claim locks its shard's lease row FOR KEY
// SHARE and compares holder and epoch, so a lease of one shard fences
// claims given to another shard's view. Epochs come from one counter for
// every shard (election): they are unique across shards, so a lease is
// never another shard's token.
//
// What a view shares with the store and the other views: every job-keyed
// table (last_fired, ticks, entries, pauses, job_controls, control_log,
// control_version, the ledger's runs and run_counts), the streams and the
// workers' tables, the run-time jobs and the membership. Decision: a job
// is in exactly one shard (onetick.ShardOf) and the engine writes its
// rows only through that shard's view, under that shard's lease, so the
// tables need no shard column and a claim reads and writes the same rows
// it would without shards. Reads that list many jobs' state (Controls,
// ControlLog, and Inspect through them) keep, in a view, the jobs
// ShardOf(job, shards) puts in its shard, so that a reader merging every
// view sees each job once. The controls' version is the store's: a pause
// in one shard moves every view's version (a runner reads its controls
// again for nothing, which is harmless). Reads keyed by a job (LastFired,
// Runs, Run) and by a stream or group (workers) are the store's; the
// engine asks them of the job's shard only.
//
// A view does not own the pool or the listener: its Close does nothing,
// b's closes both.
func (b *Backend) Shard(n, shards int) (onetick.Backend, error) {
	return storekit.Shard("postgres", b.root != nil, n, shards, b, func() onetick.Backend {
		return &Backend{pool: b.pool, opts: b.opts, ident: b.ident, hub: b.hub, shard: n, shards: shards, root: b}
	})
}

// mine reports whether job's state belongs in b's listings: always on
// the store, on a view only for the jobs of its shard.
func (b *Backend) mine(job string) bool {
	return b.root == nil || onetick.ShardOf(job, b.shards) == b.shard
}

// acquireLock is the advisory lock that serializes acquirers of b's
// shard: shard 0's is the store's lock of every release before shards.
func (b *Backend) acquireLock() string {
	if b.shard == 0 {
		return b.lockKey("acquire")
	}
	return b.lockKey("acquire:" + strconv.Itoa(b.shard))
}

// leasePayload is the payload of a notification on the lease channel:
// what happened ("acquired", "released") and to which shard's lease.
func (b *Backend) leasePayload(what string) string {
	return what + ":" + strconv.Itoa(b.shard)
}

// myLease matches the lease channel's payloads about b's shard.
func (b *Backend) myLease(payload string) bool {
	return payload == b.leasePayload("released") || payload == b.leasePayload("acquired")
}
