-- Worker liveness and ordered waiting (onetick issue 18).

-- A consumer is alive until expires_at (the database's clock), which its
-- heartbeats move on. Pending entries of a consumer that is not alive are
-- taken over at once, and a run marker held by one of them holds nothing.
CREATE TABLE {s}.alive (
  grp        text COLLATE "C" NOT NULL,
  consumer   text COLLATE "C" NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (grp, consumer)
);

-- Waiter places: pending entries of a job waiting for its run marker,
-- ordered by slot then entry id. A place counts while its entry is
-- pending; it replaces the single waiter slot (markers of kind 'wait').
CREATE TABLE {s}.waiters (
  grp      text COLLATE "C" NOT NULL,
  entry_id bigint NOT NULL,
  job      text COLLATE "C" NOT NULL,
  slot     bigint NOT NULL,
  PRIMARY KEY (grp, entry_id)
);
CREATE INDEX waiters_job ON {s}.waiters (grp, job, slot, entry_id);
DELETE FROM {s}.markers WHERE kind = 'wait';

CREATE INDEX pending_consumer ON {s}.pending (grp, consumer);
