-- The worker store: per consumer group, what each stream has handed out,
-- who owns what, done records, retries, dead letters and overlap markers.

-- The newest entry of a stream handed to the group.
CREATE TABLE w_cursors (
  grp      TEXT    NOT NULL,
  stream   TEXT    NOT NULL,
  last_seq INTEGER NOT NULL,
  PRIMARY KEY (grp, stream)
) STRICT, WITHOUT ROWID;

-- Entries delivered and not acknowledged. consumer '' and delivered_ms
-- NULL: given back, idle forever. The delivery is copied, so that trimming
-- a stream never loses an entry in flight.
CREATE TABLE w_pending (
  grp          TEXT    NOT NULL,
  stream       TEXT    NOT NULL,
  seq          INTEGER NOT NULL,
  id           TEXT    NOT NULL,
  consumer     TEXT    NOT NULL,
  delivered_ms INTEGER,
  count        INTEGER NOT NULL,
  job          TEXT    NOT NULL,
  slot         INTEGER NOT NULL,
  tick         TEXT    NOT NULL,
  epoch        INTEGER NOT NULL,
  replica      TEXT    NOT NULL,
  payload      TEXT    NOT NULL,
  attempt      INTEGER NOT NULL,
  enqueued_ms  INTEGER NOT NULL,
  PRIMARY KEY (grp, stream, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE w_done (
  grp        TEXT    NOT NULL,
  tick       TEXT    NOT NULL,
  entry      TEXT    NOT NULL,
  consumer   TEXT    NOT NULL,
  at_ms      INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (grp, tick)
) STRICT, WITHOUT ROWID;

CREATE TABLE w_retries (
  grp     TEXT    NOT NULL,
  stream  TEXT    NOT NULL,
  entry   TEXT    NOT NULL,
  due_ms  INTEGER NOT NULL,
  job     TEXT    NOT NULL,
  slot    INTEGER NOT NULL,
  tick    TEXT    NOT NULL,
  epoch   INTEGER NOT NULL,
  replica TEXT    NOT NULL,
  payload TEXT    NOT NULL,
  attempt INTEGER NOT NULL,
  PRIMARY KEY (grp, stream, entry)
) STRICT, WITHOUT ROWID;
CREATE INDEX w_retries_due ON w_retries (grp, due_ms);

CREATE TABLE w_dead (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  grp        TEXT    NOT NULL,
  ms         INTEGER NOT NULL,
  job        TEXT    NOT NULL,
  tick       TEXT    NOT NULL,
  slot       INTEGER NOT NULL,
  epoch      INTEGER NOT NULL,
  replica    TEXT    NOT NULL,
  payload    TEXT    NOT NULL,
  stream     TEXT    NOT NULL,
  entry      TEXT    NOT NULL,
  attempts   INTEGER NOT NULL,
  deliveries INTEGER NOT NULL,
  error      TEXT    NOT NULL,
  consumer   TEXT    NOT NULL
) STRICT;
CREATE INDEX w_dead_grp ON w_dead (grp, seq);
CREATE INDEX w_dead_job ON w_dead (grp, job);

CREATE TABLE w_last (
  grp     TEXT    NOT NULL,
  job     TEXT    NOT NULL,
  outcome TEXT    NOT NULL,
  tick    TEXT    NOT NULL,
  at_ms   INTEGER NOT NULL,
  PRIMARY KEY (grp, job)
) STRICT, WITHOUT ROWID;

-- Runs admitted and not settled, while their holders heartbeat.
CREATE TABLE w_running (
  grp        TEXT    NOT NULL,
  token      TEXT    NOT NULL,
  job        TEXT    NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (grp, token)
) STRICT, WITHOUT ROWID;

-- Overlap markers: name "run:<job>" or "wait:<job>", token "stream\nentry".
CREATE TABLE w_markers (
  grp        TEXT    NOT NULL,
  name       TEXT    NOT NULL,
  token      TEXT    NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (grp, name)
) STRICT, WITHOUT ROWID;
