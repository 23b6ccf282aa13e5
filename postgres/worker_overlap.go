package postgres

import (
	"context"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick/worker"
)

// Liveness and overlap. A consumer is alive while its alive row has not
// expired. A job's run marker is its markers row of kind 'run' (a lease of
// hold, token = entry id); it holds the job while unexpired and while the
// entry it names is pending and owned by a live consumer. Its waiter
// places are waiters rows, which count while their entry is pending.
// Begin decides the starts of one job under a transaction-scoped advisory
// lock of the job, so that two workers never both see its marker free.

// Register implements worker.Store.
func (s *WorkerStore) Register(ctx context.Context, consumer string, streams []string, live time.Duration) error {
	return pgx.BeginFunc(ctx, s.b.pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue(s.b.q(`UPDATE {s}.pending SET consumer = '', seen_at = NULL, running_until = NULL
			WHERE grp = $1 AND consumer = $2 AND stream = ANY($3)`), s.group, consumer, streams)
		batch.Queue(s.b.q(`DELETE FROM {s}.alive WHERE grp = $1 AND expires_at <= clock_timestamp()`), s.group)
		batch.Queue(s.b.q(`INSERT INTO {s}.alive (grp, consumer, expires_at) VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
			ON CONFLICT (grp, consumer) DO UPDATE SET expires_at = excluded.expires_at`), s.group, consumer, max(live.Milliseconds(), 1))
		return tx.SendBatch(ctx, batch).Close()
	})
}

// lockJobs takes the advisory lock of every job whose overlap Begin
// decides for the owned starts, in one order, so that concurrent Begins
// cannot deadlock on them.
func (s *WorkerStore) lockJobs(ctx context.Context, tx pgx.Tx, starts []worker.Start, owned map[int64]beginState, ids []int64) error {
	seen := map[string]bool{}
	var keys []string
	for i, st := range starts {
		if _, ok := owned[ids[i]]; !ok || st.Overlap == worker.OverlapAllow || seen[st.D.Job] {
			continue
		}
		seen[st.D.Job] = true
		keys = append(keys, s.b.lockKey("worker:"+s.group+":"+st.D.Job))
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := tx.Exec(ctx, lockSQL, k); err != nil {
			return err
		}
	}
	return nil
}

// admit decides one start's overlap (worker.DecideOverlap) and writes its
// marker or waiter place, under its job's lock.
func (s *WorkerStore) admit(ctx context.Context, tx pgx.Tx, st worker.Start, id int64, hold time.Duration) (worker.Admission, error) {
	if st.Overlap == worker.OverlapAllow {
		return worker.Run, nil
	}
	d := st.D
	var state worker.OverlapState
	if err := tx.QueryRow(ctx, s.b.q(`SELECT NOT EXISTS (SELECT 1 FROM {s}.markers m
			JOIN {s}.pending p ON p.grp = m.grp AND p.entry_id = m.token
			JOIN {s}.alive a ON a.grp = p.grp AND a.consumer = p.consumer AND a.expires_at > clock_timestamp()
			WHERE m.grp = $1 AND m.job = $2 AND m.kind = 'run' AND m.expires_at > clock_timestamp() AND m.token <> $3)`),
		s.group, d.Job, id).Scan(&state.MarkerFree); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, s.b.q(`DELETE FROM {s}.waiters w WHERE w.grp = $1 AND w.job = $2
		AND NOT EXISTS (SELECT 1 FROM {s}.pending p WHERE p.grp = w.grp AND p.entry_id = w.entry_id)`), s.group, d.Job); err != nil {
		return 0, err
	}
	if err := tx.QueryRow(ctx, s.b.q(`SELECT coalesce(bool_or(entry_id = $3), false), count(*) FILTER (WHERE entry_id <> $3),
			coalesce(bool_or(entry_id <> $3 AND (slot < $4 OR (slot = $4 AND entry_id < $3))), false)
		FROM {s}.waiters WHERE grp = $1 AND job = $2`), s.group, d.Job, id, int64(d.Slot)).
		Scan(&state.HasPlace, &state.Waiting, &state.LowerWaiting); err != nil {
		return 0, err
	}
	a, err := worker.DecideOverlap(st, state, func() (bool, error) {
		var found bool
		err := tx.QueryRow(ctx, s.b.q(`SELECT EXISTS (SELECT 1 FROM {s}.pending p JOIN {s}.entries e ON e.id = p.entry_id
			WHERE p.grp = $1 AND p.stream = $2 AND p.entry_id < $3 AND p.job = $4 AND e.slot <= $5
				AND NOT EXISTS (SELECT 1 FROM {s}.waiters w WHERE w.grp = p.grp AND w.entry_id = p.entry_id))`),
			s.group, d.Stream, id, d.Job, int64(d.Slot)).Scan(&found)
		return found, err
	})
	if err != nil {
		return 0, err
	}
	switch a {
	case worker.Run:
		batch := &pgx.Batch{}
		batch.Queue(s.b.q(`INSERT INTO {s}.markers (grp, job, kind, token, expires_at)
			VALUES ($1, $2, 'run', $3, clock_timestamp() + $4 * interval '1 millisecond')
			ON CONFLICT (grp, job, kind) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at`),
			s.group, d.Job, id, hold.Milliseconds())
		batch.Queue(s.b.q(`DELETE FROM {s}.waiters WHERE grp = $1 AND entry_id = $2`), s.group, id)
		err = tx.SendBatch(ctx, batch).Close()
	case worker.Wait:
		_, err = tx.Exec(ctx, s.b.q(`INSERT INTO {s}.waiters (grp, entry_id, job, slot) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`), s.group, id, d.Job, int64(d.Slot))
	}
	return a, err
}

// queueRelease drops the run markers and waiter places of entries being
// settled, and tells the waiters (NOTIFY) if there were any.
func (s *WorkerStore) queueRelease(batch *pgx.Batch, ids []int64) {
	batch.Queue(s.b.q(`WITH m AS (DELETE FROM {s}.markers WHERE grp = $1 AND token = ANY($2) RETURNING 1),
			w AS (DELETE FROM {s}.waiters WHERE grp = $1 AND entry_id = ANY($2) RETURNING 1)
		SELECT pg_notify($3, $1) WHERE EXISTS (SELECT 1 FROM m) OR EXISTS (SELECT 1 FROM w)`),
		s.group, ids, s.b.channel(chanReleased))
}
