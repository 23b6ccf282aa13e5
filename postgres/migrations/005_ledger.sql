-- The run ledger (onetick issue 20): one record per tick identity of a
-- job, its onetick.Run as JSON in doc (json, not jsonb: stored as written,
-- smaller and cheaper to write; onetick reads it whole). slot orders a
-- job's records (newest first), newest (the end of a skipped range, else
-- the slot) ages them, fate filters them. A claim, an enqueue, a worker's
-- step and a replay write the record in the transaction of the change it
-- records; what an event does to a record is decided in Go
-- (internal/storekit.Note), never here.
CREATE TABLE {s}.runs (
  job    text COLLATE "C" NOT NULL,
  tick   text COLLATE "C" NOT NULL,
  slot   bigint NOT NULL,
  newest bigint NOT NULL,
  fate   text NOT NULL,
  doc    json NOT NULL,
  PRIMARY KEY (job, tick)
);
CREATE INDEX runs_slot ON {s}.runs (job, slot DESC, tick);

-- Each job's number of records and its oldest slot, kept by statement
-- triggers in the transaction of every insert and delete of runs, so that
-- a claim decides its trims from one row per job instead of counting up
-- to max_per_job index entries. The trigger takes the rows in job order,
-- so that two writers of several jobs' records cannot deadlock on them; a
-- delete reads the job's oldest slot again (from runs_slot).
CREATE TABLE {s}.run_counts (
  job    text COLLATE "C" PRIMARY KEY,
  n      bigint NOT NULL,
  oldest bigint
);
CREATE FUNCTION {s}.runs_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {s}.run_counts AS c (job, n, oldest)
    SELECT job, CASE TG_OP WHEN 'INSERT' THEN count(*) ELSE -count(*) END, min(slot)
    FROM changed GROUP BY job ORDER BY job
    ON CONFLICT (job) DO UPDATE SET n = c.n + excluded.n,
      oldest = CASE TG_OP WHEN 'INSERT' THEN least(c.oldest, excluded.oldest)
        ELSE (SELECT min(r.slot) FROM {s}.runs r WHERE r.job = c.job) END;
  RETURN NULL;
END $$;
CREATE TRIGGER runs_added AFTER INSERT ON {s}.runs
  REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {s}.runs_counted();
CREATE TRIGGER runs_gone AFTER DELETE ON {s}.runs
  REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {s}.runs_counted();
