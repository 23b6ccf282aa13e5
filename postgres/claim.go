package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// record is a tick record as the claim reads it.
type record struct {
	holder string
	epoch  int64
	paused bool
}

// token is the record's token as the kit compares it: the claiming
// term's lease token, storekit.PausedToken of it for a paused answer.
func (r record) token() string {
	t := onetick.Lease{Holder: r.holder, Epoch: onetick.Epoch(r.epoch)}.Token()
	if r.paused {
		return storekit.PausedToken(t)
	}
	return t
}

// wtick is one tick a claim or an enqueue writes: its record, and its
// entry unless it is only accounted for (paused).
type wtick struct {
	t      *onetick.Tick
	id     string
	slot   int64
	keep   int64 // the record's keep_until, store ms
	paused bool
	ooo    bool // does not move the last-fired slot
	kind   string
}

// Claim implements onetick.Claimer, in one transaction:
//
//  1. The lease row (of b's shard) is locked FOR KEY SHARE and must hold
//     exactly l and not be expired; otherwise the term, if it is this
//     shard's, is marked fenced (the only write) and the answer is
//     ErrFenced. Until commit nobody can acquire (which
//     locks the row FOR UPDATE) or release (which deletes it); a renewal,
//     which changes only the expiry, proceeds.
//  2. The jobs' last-fired slots, pause intervals and the ticks' records
//     are read in one round trip, and every outcome is decided.
//  3. One statement writes the records (a unique key on the tick id: a
//     concurrent writer of the same tick makes it Duplicate), appends the
//     entries of the ticks whose record it wrote and moves the last-fired
//     slots; then the streams are trimmed, spent pause intervals dropped
//     and workers notified. A tick whose job relays to River is not
//     appended: its River job is inserted instead, on this transaction,
//     for exactly the records this statement wrote (relay.go).
//
// A failure anywhere rolls the whole claim back: nothing is written.
func (b *Backend) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	var res onetick.ClaimResult
	fenced := false
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var holder string
		var epoch, now int64
		var live bool
		err := tx.QueryRow(ctx, b.q(`SELECT holder, epoch, expires_at > clock_timestamp(), {s}.ms(clock_timestamp())
			FROM {s}.lease WHERE shard = $1 FOR KEY SHARE`), b.shard).Scan(&holder, &epoch, &live, &now)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err != nil || !live || holder != l.Holder || epoch != int64(l.Epoch) {
			fenced = true
			_, err := tx.Exec(ctx, b.q(`UPDATE {s}.terms SET reason = 'fenced'
				WHERE epoch = $1 AND shard = $2 AND (reason IS NULL OR reason NOT IN ('released', 'fenced'))`), int64(l.Epoch), b.shard)
			return err
		}
		res.StoreTime = msTime(now)
		res.Outcomes = make([]onetick.Outcome, len(ticks))
		if len(ticks) == 0 {
			return nil
		}
		cr := b.claimRuns()
		st, err := b.readClaimState(ctx, tx, ticks, cr)
		if err != nil {
			return err
		}
		limit := onetick.Slot(now + b.opts.ClockTolerance.Milliseconds())
		token := l.Token()
		paused := func(job string, s onetick.Slot) (bool, error) {
			return onetick.JobControl{Intervals: st.pauses[job]}.PausedAt(s), nil
		}
		var plan []wtick
		for i := range ticks {
			t := &ticks[i]
			id := t.ID()
			rec, seen := st.recs[id]
			var recTok string
			if seen { // formatted only for a tick that has a record
				recTok = rec.token()
			}
			last, hasLast := st.last[t.Job]
			d, _ := storekit.Decide(*t, token, limit, storekit.View{Seen: seen, Record: recTok, HasLast: hasLast,
				Last: onetick.Slot(last), JobDamage: st.badPause[t.Job], Paused: paused, Relays: onetick.RelayRiver})
			d.Answer(&res, i)
			if d.Record == "" {
				continue
			}
			st.recs[id] = record{holder: l.Holder, epoch: int64(l.Epoch), paused: !d.Append}
			if d.Move {
				st.last[t.Job] = int64(t.Slot)
			}
			plan = append(plan, wtick{t: t, id: id, slot: int64(t.Slot), keep: keepFor(int64(t.Slot), now, t.Retention),
				paused: !d.Append, ooo: !d.Move})
			if n, ok := storekit.ClaimNotes(*t, id, d, l, msTime(now)); ok {
				if err := cr.add(id, n); err != nil {
					return err
				}
			}
		}
		if len(plan) == 0 {
			return nil
		}
		cr.setTrim(storekit.Jobs(ticks))
		written, err := b.writeTicks(ctx, tx, plan, l.Holder, int64(l.Epoch), l.Holder, now, st.jobsWithPauses, cr)
		if err != nil {
			return err
		}
		for i := range ticks {
			if o := res.Outcomes[i]; (o == onetick.Claimed || o == onetick.Paused) && !written.ok(ticks[i].ID(), st) {
				res.Outcomes[i] = onetick.Duplicate
			}
		}
		return nil
	})
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	if fenced {
		return onetick.ClaimResult{}, onetick.ErrFenced
	}
	return res, nil
}

// claimState is what a claim reads before it decides.
type claimState struct {
	last           map[string]int64
	recs           map[string]record
	pauses         map[string][]onetick.PauseInterval
	badPause       map[string]*onetick.DamageError
	jobsWithPauses []string
	before         map[string]bool // tick ids recorded before this claim
}

func (b *Backend) readClaimState(ctx context.Context, tx pgx.Tx, ticks []onetick.Tick, cr *claimRuns) (*claimState, error) {
	st := &claimState{last: map[string]int64{}, recs: map[string]record{}, pauses: map[string][]onetick.PauseInterval{},
		badPause: map[string]*onetick.DamageError{}, before: map[string]bool{}}
	seen := map[string]bool{}
	var jobs []string
	ids := make([]string, len(ticks))
	for i, t := range ticks {
		if !seen[t.Job] {
			seen[t.Job] = true
			jobs = append(jobs, t.Job)
		}
		ids[i] = t.ID()
	}
	batch := &pgx.Batch{}
	batch.Queue(b.q(`SELECT job, slot FROM {s}.last_fired WHERE job = ANY($1)`), jobs).Query(func(rows pgx.Rows) error {
		var job string
		var slot int64
		_, err := pgx.ForEachRow(rows, []any{&job, &slot}, func() error { st.last[job] = slot; return nil })
		return err
	})
	batch.Queue(b.q(`SELECT tick, holder, epoch, paused FROM {s}.ticks
		WHERE tick = ANY($1) AND keep_until > {s}.ms(clock_timestamp())`), ids).Query(func(rows pgx.Rows) error {
		var id string
		var r record
		_, err := pgx.ForEachRow(rows, []any{&id, &r.holder, &r.epoch, &r.paused}, func() error {
			st.recs[id] = r
			st.before[id] = true
			return nil
		})
		return err
	})
	cr.queueCounts(b, batch, jobs)
	b.queuePauses(batch, jobs, func(job string, iv []onetick.PauseInterval, bad *onetick.DamageError) {
		st.jobsWithPauses = append(st.jobsWithPauses, job)
		if bad != nil {
			st.badPause[job] = bad
		} else {
			st.pauses[job] = iv
		}
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	return st, nil
}

// written is the set of tick ids whose record a write inserted.
type written map[string]bool

// ok reports whether tick id stands as claimed: recorded by this term
// before, or written now.
func (w written) ok(id string, st *claimState) bool { return st.before[id] || w[id] }

// writeTicks writes the planned ticks' records, appends the entries of
// those not paused whose record it wrote, moves the last-fired slots of
// in-order ticks, writes and trims the ledger's records (cr, nil when the
// ledger is off), trims the streams, drops pause intervals that no later
// slot can fall in (of jobs), and notifies workers. holder and epoch go
// into the records, replica into the entries.
func (b *Backend) writeTicks(ctx context.Context, tx pgx.Tx, plan []wtick, holder string, epoch int64, replica string,
	now int64, jobs []string, cr *claimRuns) (written, error) {
	n := len(plan)
	var (
		ids, jobsA, payloads, kinds = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		versions                    = make([]string, n)
		streams                     = make([]*string, n) // nil: relayed, not appended
		slots, keeps                = make([]int64, n), make([]int64, n)
		paused, ooo                 = make([]bool, n), make([]bool, n)
		idx                         = make([]int32, n)
	)
	maxLen, appended := map[string]int64{}, map[string]int64{}
	var trimOrder []string
	appends := false
	for i, w := range plan {
		ids[i], jobsA[i], payloads[i], kinds[i], versions[i] = w.id, w.t.Job, w.t.Payload, w.kind, w.t.Version
		slots[i], keeps[i], paused[i], ooo[i], idx[i] = w.slot, w.keep, w.paused, w.ooo, int32(i)
		if w.t.Relay == nil {
			streams[i] = &w.t.Stream
		}
		if !w.paused && w.t.Relay == nil {
			appends = true
			if _, ok := maxLen[w.t.Stream]; !ok {
				trimOrder = append(trimOrder, w.t.Stream)
			}
			maxLen[w.t.Stream] = w.t.MaxLen // the last tick's MaxLen of a stream wins, as with XADD
			appended[w.t.Stream]++
		}
	}
	out := written{}
	batch := &pgx.Batch{}
	if appends {
		// Entry ids must become visible in id order (see doc.go): appends
		// take the schema's append lock until commit.
		batch.Queue(lockSQL, b.lockKey("append"))
	}
	query, args := claimSQL+`
		SELECT tick, true FROM r`, []any{ids, jobsA, slots, keeps, paused, ooo, streams, payloads, kinds, idx, holder, epoch, now, replica, versions}
	if cr != nil {
		query, args = claimWithRunsSQL, append(args, cr.args()...)
	}
	noted := map[string]bool{}
	batch.Queue(b.q(query), args...).Query(func(rows pgx.Rows) error {
		var id string
		var ok bool
		_, err := pgx.ForEachRow(rows, []any{&id, &ok}, func() error { out[id], noted[id] = true, ok; return nil })
		return err
	})
	cr.queueTrims(b, batch, now)
	var trimS []string
	var trimN []int64
	for _, s := range trimOrder {
		if m := maxLen[s]; m > 0 && trimNow(appended[s], m) {
			trimS, trimN = append(trimS, s), append(trimN, m)
		}
	}
	if len(trimS) > 0 {
		batch.Queue(b.q(`DELETE FROM {s}.entries e USING (
				SELECT s.stream, (SELECT x.id FROM {s}.entries x WHERE x.stream = s.stream
					ORDER BY x.id DESC OFFSET s.maxlen LIMIT 1) AS cut
				FROM unnest($1::text[], $2::bigint[]) AS s(stream, maxlen)) c
			WHERE e.stream = c.stream AND e.id <= c.cut`), trimS, trimN)
	}
	if len(jobs) > 0 {
		// As in Redis: an interval is kept while a slot after the job's
		// last-fired one can still fall in it.
		batch.Queue(b.q(`DELETE FROM {s}.pauses p USING {s}.last_fired f
			WHERE p.job = f.job AND p.job = ANY($1) AND p.until_ms IS NOT NULL
				AND p.until_ms >= p.since_ms AND p.since_ms >= 0 AND p.until_ms <= f.slot + 1`), jobs)
	}
	if appends {
		batch.Queue(`SELECT pg_notify($1, '')`, b.channel(chanAppend))
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	if err := cr.settle(ctx, b, tx, noted, now); err != nil {
		return nil, err
	}
	if err := b.relayRiver(ctx, tx, plan, out); err != nil {
		return nil, err
	}
	return out, nil
}

// claimSQL is the statement of writeTicks, without its result: the
// records ($1 ..), the entries and the last-fired slots.
const claimSQL = `WITH t AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::boolean[], $6::boolean[],
				$7::text[], $8::text[], $9::text[], $10::int[], $15::text[])
				AS t(tick, job, slot, keep_until, paused, ooo, stream, payload, kind, idx, version)),
		r AS (INSERT INTO {s}.ticks AS k (tick, job, slot, holder, epoch, paused, keep_until)
			SELECT tick, job, slot, $11, $12, paused, keep_until FROM t
			ON CONFLICT (tick) DO UPDATE SET job = excluded.job, slot = excluded.slot, holder = excluded.holder,
				epoch = excluded.epoch, paused = excluded.paused, keep_until = excluded.keep_until
			WHERE k.keep_until <= $13
			RETURNING tick),
		e AS (INSERT INTO {s}.entries (stream, ms, job, slot, tick, epoch, replica, payload, kind, version)
			SELECT t.stream, $13, t.job, t.slot, t.tick, $12, $14, t.payload, t.kind, t.version FROM t JOIN r USING (tick)
			WHERE NOT t.paused AND t.stream IS NOT NULL ORDER BY t.idx),
		lf AS (INSERT INTO {s}.last_fired AS f (job, slot)
			SELECT t.job, max(t.slot) FROM t JOIN r USING (tick) WHERE NOT t.ooo GROUP BY t.job
			ON CONFLICT (job) DO UPDATE SET slot = greatest(f.slot, excluded.slot))`

// trimNow says whether a claim that appended n entries to a stream of
// MaxLen m trims it. Finding the cut walks m index entries, so trimming
// is approximate, as XADD MAXLEN ~ is: always after a tenth of m was
// appended at once, otherwise with probability 10n/m, which keeps a
// stream about a tenth above m on average, at a tenth of the cost.
func trimNow(n, m int64) bool { return 10*n >= m || rand.Int64N(m) < 10*n }

// LastFired implements onetick.Claimer. Slots are typed columns: there
// is no damage to report.
func (b *Backend) LastFired(ctx context.Context, jobs []string) (map[string]onetick.Slot, error) {
	out := make(map[string]onetick.Slot, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	rows, err := b.pool.Query(ctx, b.q(`SELECT job, slot FROM {s}.last_fired WHERE job = ANY($1)`), jobs)
	if err != nil {
		return nil, err
	}
	var job string
	var slot int64
	_, err = pgx.ForEachRow(rows, []any{&job, &slot}, func() error { out[job] = onetick.Slot(slot); return nil })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queuePauses queues the read of the pause intervals of jobs; each job
// with intervals is passed to f, with its damage when its rows are not
// intervals onetick writes.
func (b *Backend) queuePauses(batch *pgx.Batch, jobs []string, f func(job string, iv []onetick.PauseInterval, bad *onetick.DamageError)) {
	q := `SELECT job, since_ms, until_ms FROM {s}.pauses ORDER BY job, since_ms`
	var args []any
	if jobs != nil {
		q = `SELECT job, since_ms, until_ms FROM {s}.pauses WHERE job = ANY($1) ORDER BY job, since_ms`
		args = append(args, jobs)
	}
	batch.Queue(b.q(q), args...).Query(func(rows pgx.Rows) error {
		var job, cur string
		var since int64
		var until *int64
		var iv []onetick.PauseInterval
		var raw [][2]*int64
		flush := func() {
			if cur == "" && len(raw) == 0 {
				return
			}
			f(cur, iv, b.pauseDamage(cur, raw))
			iv, raw = nil, nil
		}
		_, err := pgx.ForEachRow(rows, []any{&job, &since, &until}, func() error {
			if job != cur {
				flush()
				cur = job
			}
			s := since
			var u *int64
			if until != nil {
				x := *until
				u = &x
			}
			raw = append(raw, [2]*int64{&s, u})
			p := onetick.PauseInterval{Since: msTime(since)}
			if until != nil {
				p.Until = msTime(*until)
			}
			iv = append(iv, p)
			return nil
		})
		if err == nil {
			flush()
		}
		return err
	})
}

// pauseDamage reports a job's pause rows onetick cannot have written: a
// negative start, an end before the start, or an open interval that is
// not the last one.
func (b *Backend) pauseDamage(job string, raw [][2]*int64) *onetick.DamageError {
	bad := false
	for i, r := range raw {
		if *r[0] < 0 || (r[1] != nil && *r[1] < *r[0]) || (r[1] == nil && i < len(raw)-1) {
			bad = true
		}
	}
	if !bad {
		return nil
	}
	v := fmtIntervals(raw)
	return &onetick.DamageError{Key: b.table("pauses"), Field: job, Job: job, Kind: onetick.DamageValue, Value: v,
		Repairable: true, Reason: fmt.Sprintf("pause intervals %q of job %q are not intervals onetick writes", short(v), short(job))}
}

// fmtIntervals renders pause rows as "since:until,..." (until empty while
// open), the form Repair compares.
func fmtIntervals(raw [][2]*int64) string {
	var sb strings.Builder
	for i, r := range raw {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(*r[0], 10))
		sb.WriteByte(':')
		if r[1] != nil {
			sb.WriteString(strconv.FormatInt(*r[1], 10))
		}
	}
	return sb.String()
}

// keepFor is until when (store ms) the record of a tick at slot, written
// at now, lives: its retention past the later of its slot and now, so
// that a retried request finds it even for a slot long past.
func keepFor(slot, now int64, retention time.Duration) int64 {
	return max(slot, now) + max(retention.Milliseconds(), 1)
}
