// Package sqlite is onetick's durable embedded store: the whole backend
// (lease, fenced claims, controls, history) and the worker store in one
// SQLite file on the local disk, through modernc.org/sqlite (SQLite
// compiled to pure Go: no cgo, nothing to install). It is the store of a
// single host: state survives a restart of the process and of the
// machine, and two processes pointed at the same file by mistake cannot
// both lead.
//
//	b, err := sqlite.Open(path, sqlite.Options{}) // creates the file if nothing is there
//	w := b.WorkerStore("onetick")
//
// # Why SQLite and not bbolt
//
// bbolt takes an exclusive lock on the whole file for as long as a
// process has it open for writing, and a read-only open needs a shared
// lock that conflicts with it. So a second process could not even open
// the file while the daemon runs: `onetick status` could not read it,
// and "two processes on one file" would be "the second one hangs at
// open" rather than "the second one sees the lease held and stands by".
// SQLite in write-ahead-log mode lets any number of processes open the
// file at once, readers never wait for the writer, and writers take the
// file's write lock per transaction. That is the model onetick needs: the
// lease is a row in the file, every operation is one transaction, and the
// file's own locking decides who leads. SQLite also brings what a store
// that must never start fresh by mistake needs: atomic, durable
// transactions with crash recovery, a header that says whose file it is
// (application_id) and which schema it holds (user_version), an integrity
// check, and typed tables (STRICT) that refuse a malformed value. The
// costs: a larger binary, a single writer at a time (a claim is one short
// transaction, so this is not the limit for one host), and an fsync per
// write transaction.
//
// # The file
//
// The file is a SQLite 3 database with application_id "OTK1" and
// user_version = the schema version. Tables (see migrations/*.sql):
//
//	lease         the lease: holder, epoch, expiry (store ms); one row
//	counters      "epoch" (newest epoch issued), "controls" (controls' version)
//	terms         leadership history: epoch, holder, start, expiry, end, reason
//	last_fired    job -> last-fired slot
//	tick_records  tick id -> token of the claiming term, expiry (retention)
//	entries       every stream: seq (never reused), stream, store ms, job,
//	              slot, tick, epoch, replica, payload, kind, attempt, group
//	pauses        job, since, until (NULL while paused)
//	controls      job -> who paused or resumed it last, why, when
//	control_log   pause, resume, trigger and backfill records (last 1000)
//	w_cursors     per group and stream: the newest entry handed out
//	w_pending     per group: entries delivered and not acknowledged, with
//	              owner, last delivery or heartbeat, delivery count
//	w_done        per group: done records (tick -> entry, consumer, expiry)
//	w_retries     per group: retries scheduled, by due time
//	w_dead        per group: dead letters
//	w_last        per group: each job's last outcome
//	w_running     per group: runs admitted and not settled
//	w_markers     per group: the overlap run markers run:<job>
//	w_waiters     per group: waiter places of jobs (entry, job, slot)
//	w_alive       per group: each consumer's liveness expiry
//	runs          the run ledger: job, tick -> slot, newest slot, fate,
//	              the record as JSON (onetick.Run)
//
// A stream entry's id is "<store ms>-<seq>", shaped as a Redis stream id.
// Entries are trimmed only by a job's MaxLen, tick records after their
// retention, done records and markers after their expiry.
//
// # What survives a restart
//
// Everything in the tables: last-fired slots (so prefer: duplicate
// catches up what the machine missed while it was down, and prefer:
// missed counts it), tick records (a tick claimed before a crash is never
// claimed again after it), streams, the lease (a crashed leader's lease
// stays in the file, and the next process takes it over at once: see
// Term locks), the epoch and the history,
// pauses and the control log, and the workers' state: work in flight
// (taken over once its worker is not alive), done records, scheduled
// retries and dead letters. Every operation is one transaction, committed with
// synchronous=FULL: an operation that returned has reached the disk, and
// one cut short by kill -9 or a power loss left nothing behind (a claim
// writes its records, last-fired slots and stream entries all or none).
//
// # Opening: never fresh over an existing file
//
// Open creates a new store aside and links it into place, so an existing
// file at the path is always either a complete store or damage. It uses an
// existing file only if its header says it is onetick's, of this build's
// schema version or older (older ones are migrated, once, in one
// transaction), and SQLite's integrity check reads it whole. Otherwise it
// returns a *FileError naming the file and saying what is wrong (empty,
// not SQLite, another application's database, truncated or corrupted, a
// newer schema) before anything is written: the file is left as it was,
// and the operator decides.
//
// # A damaged write-ahead log
//
// SQLite's recovery of the "-wal" a crash left stops at the first frame
// whose checksum fails and drops every frame after it, committed or not,
// without an error. So every write transaction that changes the store
// also counts itself in the file (counters."commits"; one that changes
// nothing, such as a worker's fetch finding no work, still writes
// nothing), and once it has committed, this process
// writes the count to "<file>-commit" beside it (no sync: it is written
// after the commit is durable, so it never names a commit the file does
// not hold). Open reads that record, then the file's count through a
// read-only connection (which recovers the log in memory and never
// checkpoints), and refuses the store, ErrCorrupt, when the file holds
// fewer commits than were acknowledged: the error names the file, the
// log and the record, and says what to do (restore the file with its
// "-wal" from a backup, or move the record aside to go on from what
// SQLite reads). Nothing is written. Garbage past the last commit (what a
// crash in the middle of a transaction leaves) loses nothing and is
// accepted. Not detected: the loss of only the last commit before a
// crash that came between that commit and its record, and any loss when
// the record is missing (a store last written by an older onetick).
//
// # Term locks
//
// The process granted a term takes an exclusive flock(2) on
// "<file>-lease/<epoch>" in the granting transaction and holds it while
// it holds the term (until it releases the lease, learns it lost it, or
// closes the store); the kernel drops it when the process dies. Acquire,
// finding the lease held and unexpired, tries that lock without waiting,
// inside its write transaction: if it gets it, no process holds the term,
// and the lease is taken at once (a new epoch; the old term ends as
// expired). A holder that lives keeps its lock, also while stopped
// (SIGSTOP), and is waited out by the TTL rule; so is a term without a
// lock file. flock locks belong to an open file description, so they
// hold between processes and between two opens in one process (fcntl
// locks, SQLite's own, are per process and dropped by any close of the
// file, so they cannot serve). A standby already running is not told of
// a holder's death: it acquires when the lease's TTL runs out, as before.
//
// # Locking and processes
//
// SQLite's POSIX advisory locks on the file and on its shared-memory
// index (the "-shm" file beside it) serialise the writers of all
// processes: every write opens with BEGIN IMMEDIATE, which takes the
// write lock before reading, so what a transaction checks (the lease, a
// tick record, an owner) cannot change before it writes. The store's
// clock is the local clock, read once the lock is held; every process on
// the file shares it. A writer waits up to Options.BusyTimeout for
// another process's transaction. Readers (Leader, History, Status) read a
// snapshot and never wait.
//
// Notifications reach the same Backend only: Watch hears of releases made
// through it, and Released of markers released through it. A standby in
// another process waits for the lease's remaining TTL, and a worker
// waiting for a marker retries on its timer. A blocked Fetch notices
// entries appended by another process within Options.PollInterval
// (SQLite's data_version, read without a lock).
//
// # What is not guaranteed
//
//   - Network filesystems (NFS, SMB, most FUSE filesystems): their locks
//     and the shared memory of the write-ahead log do not work across
//     machines; two processes there can both write, and a term lock
//     taken on another machine proves nothing. Keep the file on a local
//     disk.
//   - A copy of the file taken while a process writes it (cp, rsync)
//     can be torn; back up with sqlite3's .backup or VACUUM INTO, or copy
//     the file and its "-wal" while no process has it open. Deleting the
//     "-wal" of a crashed process loses its last commits (and is refused
//     at the next open, as a damaged log is). A backup restored over the
//     file is refused the same way until "<file>-commit" is moved aside.
//   - Modes: the file is made 0600, its directory (when Open makes it)
//     0700; Open logs a warning naming a file or directory others can
//     reach (Exposed), and changes nothing.
//   - A disk that acknowledges an fsync it has not done loses recent
//     commits on power loss. A full disk makes operations fail (nothing
//     half written).
//   - No high availability: the file lives on one machine. For a fleet,
//     use Redis (or PostgreSQL).
//   - The tables' types and constraints leave no room for the damage the
//     Redis backend reports (a key of another type, a value that does
//     not parse), so no claim is answered Broken. What can be damaged is
//     the file: Inspect runs SQLite's integrity check, and Repair refuses
//     (restore a backup).
package sqlite
