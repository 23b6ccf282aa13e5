-- The scheduler's state: the lease, the epoch, the terms, the last-fired
-- slots, the tick records, the streams and the controls. STRICT tables: a
-- value of the wrong type is refused by SQLite, so onetick never has to
-- guess around one.

-- The lease: one row while someone holds (or held, until it expires) it.
CREATE TABLE lease (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  holder     TEXT    NOT NULL,
  epoch      INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL
) STRICT;

-- Counters: "epoch" (the newest epoch issued), "controls" (the controls'
-- version).
CREATE TABLE counters (
  name  TEXT    PRIMARY KEY,
  value INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Leadership terms, newest = largest epoch; exp_ms follows renewals so an
-- expired term can be closed at its real end.
CREATE TABLE terms (
  epoch    INTEGER PRIMARY KEY,
  holder   TEXT    NOT NULL,
  start_ms INTEGER NOT NULL,
  exp_ms   INTEGER NOT NULL,
  end_ms   INTEGER,
  reason   TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE last_fired (
  job  TEXT    PRIMARY KEY,
  slot INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Per-tick records: token is "holder|epoch" of the claiming term,
-- "holder|epoch|p" for a slot answered paused, "manual|who" for a trigger
-- or backfill.
CREATE TABLE tick_records (
  tick       TEXT    PRIMARY KEY,
  token      TEXT    NOT NULL,
  expires_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX tick_records_expiry ON tick_records (expires_ms);

-- The streams, all in one table: an entry's id is "ms-seq". AUTOINCREMENT
-- so that a sequence number is never reused after trimming, which the
-- worker cursors rely on.
CREATE TABLE entries (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT,
  stream  TEXT    NOT NULL,
  ms      INTEGER NOT NULL,
  job     TEXT    NOT NULL,
  slot    INTEGER NOT NULL,
  tick    TEXT    NOT NULL,
  epoch   INTEGER NOT NULL,
  replica TEXT    NOT NULL,
  payload TEXT    NOT NULL,
  kind    TEXT    NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 1,
  grp     TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX entries_stream ON entries (stream, seq);

-- Pause intervals, until_ms NULL while the job is paused.
CREATE TABLE pauses (
  job      TEXT    NOT NULL,
  since_ms INTEGER NOT NULL,
  until_ms INTEGER,
  PRIMARY KEY (job, since_ms)
) STRICT, WITHOUT ROWID;

-- Who paused or resumed each job last, and when.
CREATE TABLE controls (
  job    TEXT    PRIMARY KEY,
  paused INTEGER NOT NULL,
  who    TEXT    NOT NULL,
  reason TEXT    NOT NULL,
  at_ms  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE control_log (
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  action TEXT    NOT NULL,
  job    TEXT    NOT NULL,
  who    TEXT    NOT NULL,
  reason TEXT    NOT NULL,
  at_ms  INTEGER NOT NULL,
  detail TEXT    NOT NULL
) STRICT;
