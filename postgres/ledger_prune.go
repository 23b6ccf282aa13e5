package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pruneJobs is how many jobs' records one transaction of pruneRuns trims,
// and pruneRunsPerJob how many records of a job at most.
const (
	pruneJobs       = 100
	pruneRunsPerJob = 1000
)

const (
	// pruneAgedSQL: the records of jobs $1 whose newest slot is older than
	// MaxAge ($2 ms) by the database's clock.
	pruneAgedSQL = `DELETE FROM {s}.runs WHERE ctid = ANY(ARRAY(
		SELECT x.ctid FROM unnest($1::text[]) AS u(job)
		CROSS JOIN LATERAL (SELECT r.ctid FROM {s}.runs r
			WHERE r.job = u.job AND r.slot < {s}.ms(clock_timestamp()) - $2 AND r.newest < {s}.ms(clock_timestamp()) - $2
			ORDER BY r.slot LIMIT $3 FOR UPDATE SKIP LOCKED) x))`
	// pruneOverSQL: the oldest records of jobs $1 beyond the newest
	// MaxPerJob ($2), by their counts (which the statement before
	// changed).
	pruneOverSQL = `DELETE FROM {s}.runs WHERE ctid = ANY(ARRAY(
		SELECT x.ctid FROM {s}.run_counts c
		CROSS JOIN LATERAL (SELECT r.ctid FROM {s}.runs r WHERE r.job = c.job
			ORDER BY r.slot, r.tick DESC LIMIT least(c.n - $2, $3) FOR UPDATE SKIP LOCKED) x
		WHERE c.job = ANY($1) AND c.n > $2))`
)

// pruneRuns trims the run ledger exactly, as claims do with slack and
// only for the jobs they claim: the records past MaxAge and beyond the
// newest MaxPerJob of every job, and the counts of jobs without records.
// It takes a hundred jobs at a time, locking their count rows FOR UPDATE
// SKIP LOCKED (a job a claim is writing now is left to the next prune)
// and their records alike.
func (b *Backend) pruneRuns(ctx context.Context) (int64, error) {
	if b.opts.Ledger.Off {
		return 0, nil
	}
	ret := b.opts.Ledger
	var total int64
	after := ""
	for {
		var jobs []string
		var n int64
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, b.q(`SELECT job FROM {s}.run_counts WHERE job > $1 ORDER BY job LIMIT $2
				FOR UPDATE SKIP LOCKED`), after, pruneJobs)
			if err != nil {
				return err
			}
			if jobs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(jobs) == 0 {
				return err
			}
			batch := &pgx.Batch{}
			count := func(tag pgconn.CommandTag) error { n += tag.RowsAffected(); return nil }
			batch.Queue(b.q(pruneAgedSQL), jobs, ret.MaxAge.Milliseconds(), pruneRunsPerJob).Exec(count)
			batch.Queue(b.q(pruneOverSQL), jobs, ret.MaxPerJob, pruneRunsPerJob).Exec(count)
			batch.Queue(b.q(`DELETE FROM {s}.run_counts WHERE job = ANY($1) AND n <= 0`), jobs)
			return tx.SendBatch(ctx, batch).Close()
		})
		total += n
		if err != nil {
			return total, err
		}
		if len(jobs) == 0 {
			return total, nil
		}
		// The same jobs again while a job may have had more to trim
		// than one transaction takes.
		if n < pruneRunsPerJob {
			if len(jobs) < pruneJobs {
				return total, nil
			}
			after = jobs[len(jobs)-1]
		}
	}
}
