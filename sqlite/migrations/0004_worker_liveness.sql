-- Worker liveness and ordered waiting (onetick issue 18).

-- A consumer is alive until expires_ms (store ms), which its heartbeats
-- move on. Entries of a consumer that is not alive are taken over at once,
-- and a run marker held by one of them holds nothing.
CREATE TABLE w_alive (
  grp        TEXT    NOT NULL,
  consumer   TEXT    NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (grp, consumer)
) STRICT, WITHOUT ROWID;

-- Waiter places: the entries (stream, seq) of a job waiting for its run
-- marker, ordered by slot then seq. A place counts while its entry is
-- pending in w_pending; it replaces the single "wait:<job>" marker.
CREATE TABLE w_waiters (
  grp    TEXT    NOT NULL,
  stream TEXT    NOT NULL,
  seq    INTEGER NOT NULL,
  job    TEXT    NOT NULL,
  slot   INTEGER NOT NULL,
  PRIMARY KEY (grp, stream, seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX w_waiters_job ON w_waiters (grp, job, slot, seq);
DELETE FROM w_markers WHERE name LIKE 'wait:%';

-- Pending entries of a consumer (takeover of a dead one, Register).
CREATE INDEX w_pending_consumer ON w_pending (grp, consumer);
