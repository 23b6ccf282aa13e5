package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// claimRuns are the ledger records a claim or an enqueue creates. They
// are written by the statement that writes the tick records, each only if
// the tick that owns it (its own record, the ranges it carries) was
// written there, and unless its identity has a record: then the tick's
// event is noted on that record (rare: a tick whose record retention
// dropped and whose ledger record is still kept). The same transaction
// trims the jobs' records.
type claimRuns struct {
	owners []string
	runArrays
	notes  map[string]storekit.ClaimNote // by tick id: the tick's own record and event
	added  map[string]int64              // records planned, per job
	counts map[string]runCount           // read before: per job
	trim   []string                      // the jobs to trim
}

// runCount is a job's count of records and its oldest slot.
type runCount struct {
	n      int64
	oldest *int64
}

// claimRuns returns an empty set, nil when the ledger is off.
func (b *Backend) claimRuns() *claimRuns {
	if b.opts.Ledger.Off {
		return nil
	}
	return &claimRuns{notes: map[string]storekit.ClaimNote{}, added: map[string]int64{}, counts: map[string]runCount{}}
}

// add plans the records of note, for tick id.
func (c *claimRuns) add(id string, n storekit.ClaimNote) error {
	if c == nil {
		return nil
	}
	r := n.Fresh
	storekit.Note(&r, n.Event)
	c.notes[id] = n
	for _, run := range append([]onetick.Run{r}, n.Skipped...) {
		if err := c.runArrays.add(run); err != nil {
			return err
		}
		c.owners = append(c.owners, id)
		c.added[run.Job]++
	}
	return nil
}

// setTrim sets the jobs the write trims.
func (c *claimRuns) setTrim(jobs []string) {
	if c != nil {
		c.trim = jobs
	}
}

// queueCounts queues the read of jobs' counts and oldest slots.
func (c *claimRuns) queueCounts(b *Backend, batch *pgx.Batch, jobs []string) {
	if c == nil {
		return
	}
	batch.Queue(b.q(`SELECT job, n, oldest FROM {s}.run_counts WHERE job = ANY($1)`), jobs).Query(func(rows pgx.Rows) error {
		var job string
		var rc runCount
		_, err := pgx.ForEachRow(rows, []any{&job, &rc.n, &rc.oldest}, func() error { c.counts[job] = rc; return nil })
		return err
	})
}

// claimWithRunsSQL is writeTicks' statement (claimSQL) that also writes
// the records of the ledger ($16 ..), and says of each tick record written
// whether its ledger record was created.
const claimWithRunsSQL = claimSQL + `,
		l AS (INSERT INTO {s}.runs (job, tick, slot, newest, fate, doc)
			SELECT u.job, u.tick, u.slot, u.newest, u.fate, u.doc::json
			FROM unnest($16::text[], $17::text[], $18::text[], $19::bigint[], $20::bigint[], $21::text[], $22::text[])
				AS u(owner, job, tick, slot, newest, fate, doc)
			JOIN r ON r.tick = u.owner ORDER BY u.job, u.tick
			ON CONFLICT (job, tick) DO NOTHING RETURNING tick)
		SELECT tick, tick IN (SELECT tick FROM l) FROM r`

// args are the ledger's arguments of claimWithRunsSQL.
func (c *claimRuns) args() []any {
	return []any{c.owners, c.jobs, c.ticks, c.slots, c.newest, c.fates, c.docs}
}

// settle notes the event of each tick written whose ledger record
// existed (noted false), after the claim's statement ran.
func (c *claimRuns) settle(ctx context.Context, b *Backend, tx pgx.Tx, noted map[string]bool, now int64) error {
	if c == nil {
		return nil
	}
	var fresh []onetick.Run
	var evs []onetick.RunEvent
	for id, ok := range noted {
		if n, planned := c.notes[id]; planned && !ok {
			fresh, evs = append(fresh, n.Fresh), append(evs, n.Event)
		}
	}
	return b.ledgerTx(msTime(now)).apply(ctx, tx, fresh, evs)
}

// Trimming: a claim trims its jobs' records with slack, so that a job
// at its limit is not trimmed by every claim: by count once a job has
// more than MaxPerJob plus trimSlack records, by age once its oldest
// record is older than MaxAge by a 64th of MaxAge; at most
// storekit.TrimPerClaim records of a job either way. Prune trims
// exactly.

// trimSlack is how many records beyond MaxPerJob a job may have before a
// claim trims it.
func trimSlack(maxPerJob int) int64 { return int64(min(maxPerJob/16, storekit.TrimPerClaim-1)) }

const (
	trimCountSQL = `DELETE FROM {s}.runs WHERE ctid = ANY(ARRAY(
		SELECT x.ctid FROM unnest($1::text[], $2::int[]) AS u(job, n)
		CROSS JOIN LATERAL (SELECT r.ctid FROM {s}.runs r WHERE r.job = u.job
			ORDER BY r.slot, r.tick DESC LIMIT u.n FOR UPDATE SKIP LOCKED) x))`
	trimAgeSQL = `DELETE FROM {s}.runs WHERE ctid = ANY(ARRAY(
		SELECT x.ctid FROM unnest($1::text[], $2::int[]) AS u(job, n)
		CROSS JOIN LATERAL (SELECT r.ctid FROM {s}.runs r WHERE r.job = u.job AND r.slot < $3 AND r.newest < $3
			ORDER BY r.slot LIMIT u.n FOR UPDATE SKIP LOCKED) x))`
)

// queueTrims queues the trims of the jobs set (setTrim), at the store's
// now (ms). Records another transaction holds are left to
// the next trim.
func (c *claimRuns) queueTrims(b *Backend, batch *pgx.Batch, now int64) {
	if c == nil {
		return
	}
	ret := b.opts.Ledger
	cutoff := now - ret.MaxAge.Milliseconds()
	late := cutoff - ret.MaxAge.Milliseconds()/64
	var cj, aj []string
	var cn, an []int32
	for _, job := range c.trim {
		rc := c.counts[job]
		over := int64(0)
		if n := rc.n + c.added[job]; n > int64(ret.MaxPerJob)+trimSlack(ret.MaxPerJob) {
			over = min(n-int64(ret.MaxPerJob), storekit.TrimPerClaim)
			cj, cn = append(cj, job), append(cn, int32(over))
		}
		if rc.oldest != nil && *rc.oldest < late && over < storekit.TrimPerClaim {
			aj, an = append(aj, job), append(an, int32(storekit.TrimPerClaim-over))
		}
	}
	if len(cj) > 0 {
		batch.Queue(b.q(trimCountSQL), cj, cn)
	}
	if len(aj) > 0 {
		batch.Queue(b.q(trimAgeSQL), aj, an, cutoff)
	}
}

// enqueueNote is the ledger's note of a tick an enqueue appends: a
// record of its kind, enqueued by the actor's token, at the store's now.
func enqueueNote(t onetick.Tick, id string, m storekit.ManualBatch, now time.Time) storekit.ClaimNote {
	return storekit.ClaimNote{Fresh: storekit.NewRun(t, id, m.Kind),
		Event: onetick.RunEvent{What: onetick.EventEnqueued, At: now, Replica: m.Token, Detail: storekit.RelayDetail(t)}}
}
