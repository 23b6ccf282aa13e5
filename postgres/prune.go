package postgres

import (
	"context"
)

// Pruned counts the rows Prune deleted.
type Pruned struct {
	Records    int64 // tick records past their retention
	Entries    int64 // stream entries past Options.EntryRetention
	Done       int64 // workers' done records past their retention
	Markers    int64 // expired overlap markers
	ControlLog int64 // control records beyond the newest 1000
	Pending    int64 // pending rows of trimmed entries untouched for a day
	Runs       int64 // run ledger records past Options.Ledger's retention
}

// pruneChunk bounds one delete, so that pruning a large backlog does not
// hold locks or bloat one transaction.
const pruneChunk = 10000

// Prune deletes what has outlived its retention, by the database's
// clock: what every reader already ignores (expired tick records, done
// records and markers), stream entries older than Options.EntryRetention
// (when set), control records beyond the newest 1000, and the pending
// rows of trimmed entries that nobody has touched for a day (a worker that
// settles or heartbeats them keeps them; Reclaim drops them too), and the
// run ledger's records past Options.Ledger's retention (pruneRuns). The
// daemon calls it periodically (any replica may: deletes of the same rows
// by two replicas are harmless).
func (b *Backend) Prune(ctx context.Context) (Pruned, error) {
	var p Pruned
	var err error
	del := func(n *int64, table, where string, args ...any) {
		if err != nil {
			return
		}
		q := b.q(`DELETE FROM {s}.` + table + ` WHERE ctid = ANY(ARRAY(SELECT ctid FROM {s}.` + table + ` WHERE ` + where +
			` LIMIT 10000))`)
		for {
			tag, e := b.pool.Exec(ctx, q, args...)
			if e != nil {
				err = e
				return
			}
			*n += tag.RowsAffected()
			if tag.RowsAffected() < pruneChunk {
				return
			}
		}
	}
	del(&p.Records, "ticks", `keep_until <= {s}.ms(clock_timestamp())`)
	if r := b.opts.EntryRetention; r > 0 {
		del(&p.Entries, "entries", `ms < {s}.ms(clock_timestamp()) - $1`, r.Milliseconds())
	}
	del(&p.Done, "done", `keep_until <= clock_timestamp()`)
	del(&p.Markers, "markers", `expires_at <= clock_timestamp()`)
	del(&p.Pending, "pending", `NOT EXISTS (SELECT 1 FROM {s}.entries e WHERE e.id = pending.entry_id)
		AND (seen_at IS NULL OR seen_at < clock_timestamp() - interval '1 day')`)
	del(&p.ControlLog, "control_log", `id < (SELECT id FROM {s}.control_log ORDER BY id DESC OFFSET 999 LIMIT 1)`)
	if err == nil {
		p.Runs, err = b.pruneRuns(ctx)
	}
	return p, err
}
