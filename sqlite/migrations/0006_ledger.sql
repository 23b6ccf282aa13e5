-- The run ledger (onetick issue 20): one record per tick identity of a
-- job, its onetick.Run as JSON in doc. slot orders a job's records (newest
-- first), newest (the end of a skipped range, else the slot) ages them,
-- fate filters them. A claim or a worker's step writes the record in the
-- transaction of the change it records.
CREATE TABLE runs (
  job    TEXT    NOT NULL,
  tick   TEXT    NOT NULL,
  slot   INTEGER NOT NULL,
  newest INTEGER NOT NULL,
  fate   TEXT    NOT NULL,
  doc    TEXT    NOT NULL,
  PRIMARY KEY (job, tick)
) STRICT;
CREATE INDEX runs_slot ON runs (job, slot DESC, tick);
