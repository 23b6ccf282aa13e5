-- How many ledger records each job has (onetick issue 20), kept by
-- triggers in the transaction of every insert and delete of runs, so that
-- a claim's count trim reads one row and deletes the oldest records from
-- the front of runs_slot, instead of scanning max_per_job index entries.
CREATE TABLE run_counts (
  job TEXT    NOT NULL PRIMARY KEY,
  n   INTEGER NOT NULL
) STRICT;
INSERT INTO run_counts (job, n) SELECT job, count(*) FROM runs GROUP BY job;
CREATE TRIGGER runs_count_insert AFTER INSERT ON runs BEGIN
  INSERT INTO run_counts (job, n) VALUES (new.job, 1)
    ON CONFLICT (job) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER runs_count_delete AFTER DELETE ON runs BEGIN
  UPDATE run_counts SET n = n - 1 WHERE job = old.job;
  DELETE FROM run_counts WHERE job = old.job AND n <= 0;
END;
