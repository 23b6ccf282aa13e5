-- Jobs defined at run time (`onetick jobs apply`): one row per job, its
-- set, its definition (JSON, opaque to the store) and when it was applied.
-- The counter "jobs" is their version.
CREATE TABLE jobs (
  name     TEXT    PRIMARY KEY,
  set_name TEXT    NOT NULL,
  def      TEXT    NOT NULL,
  since_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX jobs_set ON jobs (set_name);
