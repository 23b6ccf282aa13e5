-- Jobs defined at run time (`onetick jobs apply`): their set, definition
-- (JSON, opaque to the store) and when it was applied; jobs_version is
-- their version.
CREATE TABLE {s}.jobs (
  name     text COLLATE "C" PRIMARY KEY,
  set_name text COLLATE "C" NOT NULL,
  def      text NOT NULL,
  since_ms bigint NOT NULL
);
CREATE INDEX jobs_set ON {s}.jobs (set_name);
CREATE TABLE {s}.jobs_version (
  id      int PRIMARY KEY CHECK (id = 1),
  version bigint NOT NULL
);
