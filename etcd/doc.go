// Package etcd is the onetick backend on etcd (go.etcd.io/etcd/client/v3):
// the lease, the fenced claim, the controls, jobs defined at run time, the
// doctor and the workers' store, decided by etcd transactions.
//
// # Keys
//
// Every key is under Options.Prefix (default "onetick/"); names from users
// (jobs, streams, tick ids, groups) are path-escaped, so a "/" in a name
// never reaches into another key range.
//
//	lease              "holder|epoch", bound to the term's etcd lease
//	epoch              the epoch counter
//	terms/<epoch>      a leadership term (JSON), newest HistoryLen kept
//	last/<job>         the job's last-fired slot (Unix ms)
//	ctl/<job>          the job's pause state and intervals (JSON)
//	ctlver             the controls' version
//	ctllog, ctllog/<n> the control log's sequence and records (newest 1000)
//	t/<tick id>        a tick record: the claiming term's token, bound to
//	                   an etcd lease of the tick's retention
//	seq                "ms-seq" of the newest stream entry
//	s/<stream>/<seq>   a stream entry (JSON)
//	jobs/<name>, jobsver  jobs defined at run time and their version
//	runs/<job>/<slot>/<tick>, runidx/<job>/<tick>
//	                   the run ledger's records and their index (ledger.go)
//	w/<group>/...      a consumer group's worker state (worker.go)
//	damaged/...        what Repair moved aside
//
// # The lease and the fence
//
// A term is an etcd lease (TTL: the onetick TTL rounded up to whole
// seconds, etcd's unit) and the lease key bound to it. Acquire grants the
// etcd lease and then, in one transaction that requires the lease key to
// be absent (create revision 0) and the epoch counter and the newest term
// to be as read, writes the lease key, the new epoch (the greatest of
// the counter + 1, the newest term + 1 and the clock in milliseconds), the
// new term and the end of the previous one. Renew checks that the lease
// key still holds the term and sends one keep-alive of its etcd lease;
// etcd renews to the TTL it granted. Release deletes the lease key in a
// transaction that compares its create revision and value, closes the
// term, and revokes the etcd lease. When a holder stops renewing, etcd
// itself deletes the lease key at expiry, and Watch (a watch of the lease
// key) wakes the standbys.
//
// The fence is the lease key's create revision: every claim transaction
// compares it with the one the claim read next to the holder's token, so
// a claim by a term whose key expired or was released and recreated
// writes nothing and fails with ErrFenced, even when the holder still
// believes it leads. This is the check Jepsen found missing from lock
// recipes (a lock alone cannot guarantee mutual exclusion): the store
// refuses the stale holder's write in the same step as the write.
//
// # The claim
//
// Claim reads, at one revision, the lease key, the stream sequence, each
// job's last-fired slot and pause state and each tick's record, decides
// every tick with storekit.Decide, and writes in one transaction the
// records, the new last-fired slots, the stream entries, the trims and
// the pause intervals a claim drops, comparing the fence and the mod
// revision of every key it read. A lost compare (a concurrent enqueue or
// pause) reads and decides again, up to 30 times, never writing half.
//
// # Large claims
//
// etcd bounds a transaction (--max-txn-ops, default 128, and
// --max-request-bytes, default 1.5 MiB). A claim that does not fit is
// split in order into transactions of whole ticks (Options.MaxTxnOps,
// MaxTxnBytes), each fenced and atomic. A claim that fails after its
// first transaction has claimed the ticks of the transactions before; a
// retry answers those Claimed from their records and appends nothing
// twice. Raise --max-txn-ops (and Options.MaxTxnOps) to claim larger
// batches in one transaction.
//
// # The clock
//
// etcd offers a client no time of its own: Time, the store time of a
// claim, early slots, idle times and expiry of worker records are the
// replica's own clock. The elector's trust deadline is therefore local
// only: a replica whose clock is wrong is not caught by the store, and
// the clock tolerance guards nothing against the replica's own skew.
// Lease expiry is etcd's (its leader's clock, whole seconds, extended on
// an etcd leader change, never shortened).
//
// # Not kept
//
// No relay is handed in a claim: asynq and River ticks are Broken, as
// storekit.RelayRefused says; NATS relays read the stream as on every
// store.
package etcd
