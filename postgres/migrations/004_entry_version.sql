-- The definition version of a job defined at run time travels with each
-- of its ticks, so that a worker runs the tick with the definition it was
-- claimed under ('' for the configuration file's jobs).
ALTER TABLE {s}.entries ADD COLUMN version text NOT NULL DEFAULT '';
ALTER TABLE {s}.retries ADD COLUMN version text NOT NULL DEFAULT '';
