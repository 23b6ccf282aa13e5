package postgres_test

import (
	"testing"

	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/postgres"
)

// damage does to the tables what an operator's hand-written SQL could.
// Typed columns and keys rule out the rest: a table cannot hold another
// type, a slot or an epoch always parses, a lease always has an expiry.
func damage(t *testing.T, b *postgres.Backend, d backendtest.Damage) bool {
	t.Helper()
	switch d.Kind {
	case backendtest.LeaseGarbage:
		execSQL(t, b, `INSERT INTO {s}.lease (shard, holder, epoch, expires_at) VALUES ($1, '', 0, clock_timestamp() + interval '1 hour')
			ON CONFLICT (shard) DO UPDATE SET holder = '', epoch = 0`, b.ShardNum())
	case backendtest.EpochDeleted:
		execSQL(t, b, `DELETE FROM {s}.election`)
	case backendtest.EpochRolledBack:
		execSQL(t, b, `UPDATE {s}.election SET epoch = 1`)
	case backendtest.HistoryGarbageEntry:
		execSQL(t, b, `INSERT INTO {s}.terms (epoch, holder, started_at, reason, shard) VALUES (1, 'someone', clock_timestamp(), 'not a reason', $1)
			ON CONFLICT (epoch) DO NOTHING`, b.ShardNum())
	case backendtest.HistoryDeleted:
		execSQL(t, b, `DELETE FROM {s}.terms`)
	case backendtest.LastDeleted:
		execSQL(t, b, `DELETE FROM {s}.last_fired`)
	case backendtest.PausedFieldGarbage:
		execSQL(t, b, `INSERT INTO {s}.pauses (job, since_ms, until_ms) VALUES ($1, 1000, 10)`, d.Job)
	default:
		return false
	}
	return true
}

// fix undoes a damage as an operator would: by deleting the rows.
func fix(t *testing.T, b *postgres.Backend, d backendtest.Damage) {
	t.Helper()
	switch d.Kind {
	case backendtest.LeaseGarbage:
		execSQL(t, b, `DELETE FROM {s}.lease WHERE shard = $1 AND (holder = '' OR epoch <= 0)`, b.ShardNum())
	case backendtest.HistoryGarbageEntry:
		execSQL(t, b, `DELETE FROM {s}.terms WHERE reason = 'not a reason'`)
	case backendtest.PausedFieldGarbage:
		execSQL(t, b, `DELETE FROM {s}.pauses WHERE job = $1`, d.Job)
	}
}
