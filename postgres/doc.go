// Package postgres is the onetick backend on PostgreSQL (pgx v5, pgxpool):
// the lease, the fenced claim, the controls, the doctor and the workers'
// store, all decided by the database, in a schema of its own.
//
// # Schema and migrations
//
// Every table lives in one schema (Options.Schema, default "onetick"), so
// several scheduler groups can share a database. onetick creates and
// migrates it itself: Migrate applies the embedded files
// migrations/NNN_name.sql that the schema lacks (recorded in
// schema_migrations) in one transaction, under a transaction-scoped
// advisory lock per schema, so replicas that start together may all call
// it: one applies, the others find the work done. A schema migrated by a
// newer onetick is refused. Open does not migrate.
//
//	lease            at most one row per shard (0 to 255; the store's is
//	                 shard 0's): holder, epoch, expires_at
//	election         at most one row: the epoch counter, of every shard
//	terms            leadership history, each term its shard's; the
//	                 newest HistoryLen of each shard kept
//	last_fired       job -> last-fired slot (Unix ms)
//	ticks            per-tick records: tick id -> claiming term (holder,
//	                 epoch; "manual|who" for triggers and backfills),
//	                 paused flag, keep_until (ms)
//	entries          the streams: one table, (stream, id) indexed; id is a
//	                 bigserial, ms the database's clock at append
//	pauses           pause intervals (job, since_ms, until_ms)
//	job_controls     who paused or resumed each job, and when
//	control_log      the control records
//	control_version  at most one row: the controls' version
//	damaged          rows that Repair moved aside
//	cursors          per consumer group and stream: the newest entry
//	                 handed to the group
//	pending          per group: entries delivered and not settled, with
//	                 owner (consumer), seen_at (delivery or heartbeat),
//	                 delivery count and running_until (in flight)
//	markers          per group and job: the overlap run marker (token =
//	                 entry id, expires_at)
//	waiters          per group: waiter places of jobs (entry id, job, slot)
//	alive            per group: each consumer's liveness expiry
//	done             per group: done records, with keep_until
//	retries          per group: scheduled retries, with due_at
//	dead             per group: dead letters
//	last_outcome     per group and job: the last outcome
//	runs             the run ledger: (job, tick) -> slot, newest, fate
//	                 and the record as JSON (ledger.go)
//	run_counts       per job: its number of ledger records and oldest
//	                 slot, kept by triggers on runs
//	members          the fleet's live replicas: holder -> expires_at
//
// Shards (shard.go): a shard's view has its own lease row and terms; the
// job-keyed tables have no shard column (a job is in one shard and is
// written only under its lease), and a view's listings (Controls,
// ControlLog) hold its shard's jobs only.
//
// A stream entry's id is "<ms>-<seq>" as in Redis: the database's clock
// at append and the entry's sequence, so ids order entries and tell when
// they were appended.
//
// # The clock
//
// Every instant is the database's: expiry of the lease, term boundaries,
// early slots, idle times, marker expiry, retry due times and retention
// are computed in SQL with clock_timestamp() (the time of the statement,
// not of the transaction's start), never with a replica's clock.
// Instants compared with slots are bigint milliseconds ({schema}.ms(t)).
//
// # What is atomic, and how fencing works in SQL
//
// Acquire is one transaction: acquirers of a shard are serialized by an
// advisory lock; the shard's lease row is locked FOR UPDATE; a live lease is answered with
// a *HeldError; otherwise the new epoch is the greatest of the counter + 1,
// the newest recorded term + 1 and the database's clock in milliseconds
// (so epochs never repeat, even with the counter or the history deleted;
// the counter's row stays locked until commit, so acquirers of different
// shards take turns and never share an epoch), and the lease row, the
// counter, the end of the shard's previous term and the new term are
// written together. Renew is one compare-and-extend statement
// (UPDATE ... WHERE holder = $1 AND epoch = $2 AND expires_at > now),
// Release one compare-and-delete statement that also closes the term and
// sends NOTIFY.
//
// Claim is one transaction. It first locks the lease row FOR KEY SHARE and
// checks holder, epoch and expiry: a claim of a superseded (or expired)
// term writes nothing but a best-effort "fenced" mark on its term and
// fails with ErrFenced. The row lock is the fence: until the claim
// commits, nobody can acquire (Acquire locks the row FOR UPDATE) or
// release (Release deletes it), so the term the claim checked is the term
// in force when its writes become visible, even if the lease runs out
// meanwhile. Renew changes only the expiry (a non-key update, compatible
// with FOR KEY SHARE), so a long claim does not delay its leader's
// renewals. It then reads, in one round trip,
// the jobs' last-fired slots, pause intervals and the ticks' records,
// decides every outcome (Early beyond the tolerance, Duplicate for a tick
// recorded by another term or not after its job's last-fired slot,
// Claimed without a second row for this term's own record: a retry,
// Paused inside a pause interval, Broken for a job whose pause rows are
// damaged), and writes in one statement, from arrays (unnest), the
// records (the primary key on the tick id: a concurrent writer of the same
// tick makes it Duplicate), the entries of the ticks whose record it
// wrote and the moved last-fired slots; then it trims the streams to
// MaxLen (approximately, as XADD MAXLEN ~ does: finding the cut costs
// MaxLen index reads, so a claim that appended n entries trims with
// probability 10n/MaxLen), drops spent pause intervals and sends NOTIFY. A claim of ten
// thousand ticks is one transaction of a few round trips. Whatever fails,
// including the connection dying mid-transaction, rolls all of it back.
//
// Appends (claims, enqueues, promoted retries, replays) take a per-schema
// advisory lock until commit before they draw entry ids, so ids become
// visible in id order: a consumer group's cursor never passes an entry
// that commits later. Appends are serialized; reads are not.
//
// # LISTEN/NOTIFY
//
// One connection per Backend, outside the pool, LISTENs on three channels
// named after the schema: "<schema>.lease" (Acquire, Release; the
// payload "acquired:N" or "released:N" names the shard),
// "<schema>.append" (every append) and "<schema>.released" (a worker
// released a run marker; the payload is the group). Watch wakes on the
// first (its shard's payloads) and also at the instant the lease expires by the
// database's clock (PostgreSQL has no expiry event; the instant is read
// after every wake, so a renewed lease moves it on). Fetch waits on the
// second, Released on the third. Notifications are best effort: after the
// listener reconnects it wakes every subscriber, and every waiter also
// retries on a timer.
//
// # Workers
//
// A consumer group (one WorkerStore) has a cursor per stream. Fetch locks
// the cursors FOR UPDATE SKIP LOCKED, takes the entries after them, inserts
// a pending row per entry (owner, seen_at, one delivery) and moves the
// cursors, in one transaction. Reclaim takes idle pending rows FOR UPDATE
// SKIP LOCKED and counts a delivery: rows given back, owned by a consumer
// whose alive row expired, or idle past the backstop. Begin, Heartbeat and
// Finish lock the pending rows they settle and act only on rows still
// owned by the caller, in the same transaction; Heartbeat touches seen_at
// without counting a delivery and moves the consumer's alive row. Begin
// decides the overlap of each job under a transaction-scoped advisory lock
// of the job (see worker_overlap.go). PromoteDue
// moves due retries FOR UPDATE SKIP LOCKED. A pending row outlives its
// entry when the stream is trimmed, as a Redis pending entry does: its
// worker still settles it, and Reclaim drops it instead of handing it out.
//
// # Damage
//
// Typed columns, keys and NOT NULL leave no key of another type and no
// value that does not parse. What a row written by hand can still hold is
// a value onetick never writes: a lease with an empty holder or an epoch
// that is not positive (nobody can acquire until it is repaired), a term
// with an unknown reason (skipped, reported), pause rows that end before
// they start (the job's in-order ticks are Broken). Inspect reports these;
// Repair moves them into the table damaged when still exactly as
// reported. Streams hold nothing onetick could find damaged.
//
// # Retention
//
// Readers ignore expired tick records, done records and markers; Prune
// deletes them, stream entries older than Options.EntryRetention (when
// set) and control records beyond the newest 1000, in chunks. The daemon
// calls it periodically. Streams are also trimmed by each tick's MaxLen
// at every claim, and terms to HistoryLen at every acquisition. The run
// ledger is trimmed by Options.Ledger: with slack by every claim and
// enqueue of a job, exactly by Prune (docs/ledger.md, "On PostgreSQL").
//
// # Connection poolers
//
// The LISTEN connection needs a session of its own, and pgx caches
// prepared statements per connection: behind PgBouncer, point onetick at
// it in session mode, or add default_query_exec_mode=exec to the URL and
// accept that standbys and waiting workers fall back to their timers.
//
// # What PostgreSQL gives, and what not
//
// Every acknowledged claim, lease change and worker settlement is
// committed, so it survives a server crash and restart (with fsync on).
// An asynchronous standby promoted after a primary failure may lack the
// newest commits, like a Redis replica: a lease or a claim can be lost.
// Synchronous replication (synchronous_commit = remote_apply with a
// synchronous standby) closes that window at the cost of latency.
package postgres
