-- Shards (onetick issue 23, docs/shards.md): a lease row per shard, each
-- term tagged with its shard, and the fleet's membership.
--
-- The lease: at most one row per shard, 0 to 255 (onetick.MaxShards).
-- Today's single row becomes shard 0's, which is also the lease of a
-- fleet without shards: nothing moves for it. A row written without a
-- shard is shard 0's, as the single row was.
ALTER TABLE {s}.lease ADD COLUMN shard int NOT NULL DEFAULT 0 CHECK (shard >= 0 AND shard < 256);
ALTER TABLE {s}.lease DROP COLUMN id;
ALTER TABLE {s}.lease ADD PRIMARY KEY (shard);

-- A term is its shard's; epochs stay unique across shards (one counter,
-- election), so epoch stays the key.
ALTER TABLE {s}.terms ADD COLUMN shard int NOT NULL DEFAULT 0;
CREATE INDEX terms_shard ON {s}.terms (shard, epoch);

-- The fleet's live replicas (onetick.Members): a holder is live until
-- expires_at, by the database's clock.
CREATE TABLE {s}.members (
  holder     text COLLATE "C" PRIMARY KEY,
  expires_at timestamptz NOT NULL
);

-- The fleet's shard count (onetick.Layouter): at most one row; none
-- means one shard. The job tables are shared by every layout, so the
-- count may change while no shard's lease is held.
CREATE TABLE {s}.layout (
  id     boolean PRIMARY KEY DEFAULT true CHECK (id),
  shards int NOT NULL CHECK (shards >= 1 AND shards <= 256)
);
