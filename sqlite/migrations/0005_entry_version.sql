-- The definition version of a job defined at run time travels with each
-- of its ticks, so that a worker runs the tick with the definition it was
-- claimed under ('' for the configuration file's jobs).
ALTER TABLE entries ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE w_pending ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE w_retries ADD COLUMN version TEXT NOT NULL DEFAULT '';
