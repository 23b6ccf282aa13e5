-- onetick's schema, version 1. {s} is the quoted schema name.
--
-- Instants that are compared with slots (Unix milliseconds) are kept as
-- bigint milliseconds; the other instants as timestamptz. Every instant is
-- taken from the database's clock (clock_timestamp()), never from a
-- replica's. Names that are keys compare bytewise (COLLATE "C"): cheaper
-- than a locale's collation, and the same on every server. Retention
-- deletes find rows through BRIN indexes: the times grow with the rows.

CREATE FUNCTION {s}.ms(t timestamptz) RETURNS bigint
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT floor(extract(epoch FROM t) * 1000)::bigint $$;

-- The lease: at most one row. A row whose expiry has passed is free.
CREATE TABLE {s}.lease (
  id         boolean PRIMARY KEY DEFAULT true CHECK (id),
  holder     text NOT NULL,
  epoch      bigint NOT NULL,
  expires_at timestamptz NOT NULL
);

-- The epoch counter: at most one row.
CREATE TABLE {s}.election (
  id    boolean PRIMARY KEY DEFAULT true CHECK (id),
  epoch bigint NOT NULL
);

-- Leadership terms, capped to the newest HistoryLen.
CREATE TABLE {s}.terms (
  epoch      bigint PRIMARY KEY,
  holder     text NOT NULL,
  started_at timestamptz NOT NULL,
  expires_at timestamptz,
  ended_at   timestamptz,
  reason     text
);

-- Last-fired slot per job.
CREATE TABLE {s}.last_fired (
  job  text COLLATE "C" PRIMARY KEY,
  slot bigint NOT NULL
);

-- Per-tick records: the term that claimed the tick (holder, epoch), or
-- "manual|who" for a trigger or backfill; kept until keep_until (ms).
CREATE TABLE {s}.ticks (
  tick       text COLLATE "C" PRIMARY KEY,
  job        text COLLATE "C" NOT NULL,
  slot       bigint NOT NULL,
  holder     text NOT NULL,
  epoch      bigint NOT NULL,
  paused     boolean NOT NULL DEFAULT false,
  keep_until bigint NOT NULL
);
CREATE INDEX ticks_keep_until ON {s}.ticks USING brin (keep_until);

-- The streams: one table, an entry's stream is a column. ids are
-- appended in commit order (see the append lock), so a consumer group's
-- cursor never passes an entry that commits later.
CREATE TABLE {s}.entries (
  id      bigserial PRIMARY KEY,
  stream  text COLLATE "C" NOT NULL,
  ms      bigint NOT NULL,
  job     text COLLATE "C" NOT NULL,
  slot    bigint NOT NULL,
  tick    text COLLATE "C" NOT NULL,
  epoch   bigint NOT NULL,
  replica text NOT NULL,
  payload text NOT NULL,
  kind    text NOT NULL DEFAULT '',
  attempt integer NOT NULL DEFAULT 1,
  grp     text COLLATE "C"
);
CREATE INDEX entries_stream ON {s}.entries (stream, id);
CREATE INDEX entries_ms ON {s}.entries USING brin (ms);

-- Controls.
CREATE TABLE {s}.pauses (
  job      text COLLATE "C" NOT NULL,
  since_ms bigint NOT NULL,
  until_ms bigint,
  PRIMARY KEY (job, since_ms)
);
CREATE TABLE {s}.job_controls (
  job    text COLLATE "C" PRIMARY KEY,
  paused boolean NOT NULL,
  who    text NOT NULL,
  reason text NOT NULL,
  at     timestamptz NOT NULL
);
CREATE TABLE {s}.control_log (
  id     bigserial PRIMARY KEY,
  action text NOT NULL,
  job    text NOT NULL,
  who    text NOT NULL,
  reason text NOT NULL,
  at     timestamptz NOT NULL,
  detail text NOT NULL
);
CREATE TABLE {s}.control_version (
  id      boolean PRIMARY KEY DEFAULT true CHECK (id),
  version bigint NOT NULL
);

-- Rows that `onetick repair` moved aside.
CREATE TABLE {s}.damaged (
  id    bigserial PRIMARY KEY,
  at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  tbl   text NOT NULL,
  field text NOT NULL,
  value text NOT NULL
);

-- Workers: per consumer group, a cursor per stream, the entries delivered
-- and not settled, overlap markers, done records, retries, dead letters
-- and each job's last outcome. A pending row outlives its entry when the
-- stream is trimmed (as a Redis pending entry does): its worker still
-- settles it; Reclaim drops it instead of handing it out.
CREATE TABLE {s}.cursors (
  grp     text COLLATE "C" NOT NULL,
  stream  text COLLATE "C" NOT NULL,
  last_id bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (grp, stream)
);
CREATE TABLE {s}.pending (
  grp           text COLLATE "C" NOT NULL,
  entry_id      bigint NOT NULL,
  stream        text COLLATE "C" NOT NULL,
  job           text COLLATE "C" NOT NULL,
  consumer      text COLLATE "C" NOT NULL,
  seen_at       timestamptz,
  deliveries    integer NOT NULL,
  running_until timestamptz,
  PRIMARY KEY (grp, entry_id)
);
CREATE INDEX pending_stream ON {s}.pending (grp, stream, entry_id);
CREATE TABLE {s}.markers (
  grp        text COLLATE "C" NOT NULL,
  job        text COLLATE "C" NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('run', 'wait')),
  token      bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (grp, job, kind)
);
CREATE TABLE {s}.done (
  grp        text COLLATE "C" NOT NULL,
  tick       text COLLATE "C" NOT NULL,
  entry      text NOT NULL,
  consumer   text NOT NULL,
  at         timestamptz NOT NULL,
  keep_until timestamptz NOT NULL,
  PRIMARY KEY (grp, tick)
);
CREATE INDEX done_keep_until ON {s}.done USING brin (keep_until);
CREATE TABLE {s}.retries (
  id      bigserial PRIMARY KEY,
  grp     text COLLATE "C" NOT NULL,
  due_at  timestamptz NOT NULL,
  stream  text NOT NULL,
  job     text NOT NULL,
  slot    bigint NOT NULL,
  tick    text NOT NULL,
  epoch   bigint NOT NULL,
  replica text NOT NULL,
  payload text NOT NULL,
  attempt integer NOT NULL
);
CREATE INDEX retries_due ON {s}.retries (grp, due_at, id);
CREATE TABLE {s}.dead (
  id         bigserial PRIMARY KEY,
  ms         bigint NOT NULL,
  grp        text COLLATE "C" NOT NULL,
  job        text COLLATE "C" NOT NULL,
  tick       text NOT NULL,
  slot       bigint NOT NULL,
  epoch      bigint NOT NULL,
  replica    text NOT NULL,
  payload    text NOT NULL,
  stream     text NOT NULL,
  entry      text NOT NULL,
  attempts   integer NOT NULL,
  deliveries integer NOT NULL,
  error      text NOT NULL,
  consumer   text NOT NULL,
  at         timestamptz NOT NULL
);
CREATE INDEX dead_job ON {s}.dead (grp, job);
CREATE TABLE {s}.last_outcome (
  grp     text COLLATE "C" NOT NULL,
  job     text COLLATE "C" NOT NULL,
  outcome text NOT NULL,
  tick    text NOT NULL,
  at      timestamptz NOT NULL,
  PRIMARY KEY (grp, job)
);
