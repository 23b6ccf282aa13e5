package main

// `go run . -only postgres`: onetick on PostgreSQL side by side with
// River's periodic jobs (rolling deploy, leader stall), and onetick on
// PostgreSQL against onetick on Redis (tick delay, claim throughput), on
// the machine's PostgreSQL, a fresh schema per scenario.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/onetick/onetick"
)

func getenv(k string) string { return os.Getenv(k) }

// pgSys is a contender of the PostgreSQL duplicate scenarios.
type pgSys struct {
	key, title string
	ttl        time.Duration // lease / leadership TTL: the stall is 2×ttl, an enqueue later than ttl is stale
	setup      func(ctx context.Context, schema string) error
	start      func(schema string, id int) (instance, error)
	victim     func(ctx context.Context, schema string, insts []instance) int
	recs       func(ctx context.Context, schema string) ([]rec, error)
	// consumer, if set, is the queue side whose workers the scenarios
	// count, instead of recs (which still tells when the first enqueue
	// came).
	consumer consumer
}

type pgEnv struct {
	*env
	adm  pgAdmin
	logs *logCounter
}

func (p *pgEnv) pgSystems() []pgSys {
	onetickSys := func(ttl time.Duration) pgSys {
		return pgSys{
			key: "onetick-" + ttl.String(), title: fmt.Sprintf("onetick on PostgreSQL, lease TTL %s", ttl), ttl: ttl,
			setup: func(ctx context.Context, schema string) error { return migrateOnetick(ctx, schema) },
			start: func(schema string, id int) (instance, error) {
				return startOnetickPG(schema, id, everyJobs(dupJobs, "1s"), onetick.LeaseConfig{TTL: ttl}, nil, p.logs)
			},
			victim: func(_ context.Context, _ string, insts []instance) int {
				for i, in := range insts {
					if in.(*otPGInst).s.Elector().IsLeader() {
						return i
					}
				}
				return 0
			},
			recs: p.adm.otPGStoreRecs,
		}
	}
	return []pgSys{
		onetickSys(riverLeaderTTL),
		{
			key: "river", title: "River v0.51.2 periodic jobs (leadership TTL 15 s, fixed)", ttl: riverLeaderTTL,
			setup: func(ctx context.Context, schema string) error { return migrateRiver(ctx, p.adm.pool, schema) },
			start: func(schema string, id int) (instance, error) {
				return startRiver(schema, id, dupJobs, river.QueueDefault)
			},
			victim: func(ctx context.Context, schema string, insts []instance) int {
				id, _ := p.adm.riverLeader(ctx, schema)
				for i, in := range insts {
					if in.(*riverInst).id == id {
						return i
					}
				}
				return 0
			},
			recs: p.adm.riverStoreRecs,
		},
		onetickSys(dupTTL),
	}
}

// pgDupResult is the outcome of one duplicate scenario on PostgreSQL.
type pgDupResult struct {
	st            slotStats
	fenced, held  int64 // onetick: stalled claims refused by the fence, of those held back
	fencedTicks   int64
	firstAfter    time.Duration // start of the fleet to its first enqueue
	victim        string
	err           error
	stallDuration time.Duration
}

// pgFleet starts dupInstances instances (and sys's consumer) in a fresh,
// set-up schema and waits for the first enqueue (River elects a leader and
// starts its periodic enqueuer asynchronously).
func (p *pgEnv) pgFleet(ctx context.Context, sys pgSys, tag string) (string, []instance, *consuming, time.Duration, error) {
	schema, err := p.adm.freshSchema(ctx, tag)
	if err != nil {
		return "", nil, nil, 0, err
	}
	if err := sys.setup(ctx, schema); err != nil {
		return "", nil, nil, 0, fmt.Errorf("setting up %s: %w", schema, err)
	}
	cons, err := startConsumer(ctx, sys.consumer, schema, nil)
	if err != nil {
		return "", nil, nil, 0, err
	}
	t0 := time.Now()
	var insts []instance
	for i := range dupInstances {
		in, err := sys.start(schema, i)
		if err != nil {
			stopInstances(insts)
			cons.close()
			return "", nil, nil, 0, err
		}
		insts = append(insts, in)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		recs, err := sys.recs(ctx, schema)
		if err == nil && len(recs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			stopInstances(insts)
			cons.close()
			return "", nil, nil, 0, fmt.Errorf("nothing enqueued 30 s after starting (last error: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return schema, insts, cons, time.Since(t0), nil
}

// pgRolling: as scenarioRolling, on PostgreSQL.
func (p *pgEnv) pgRolling(ctx context.Context, sys pgSys) pgDupResult {
	schema, insts, cons, first, err := p.pgFleet(ctx, sys, "roll")
	if err != nil {
		return pgDupResult{err: err}
	}
	from := nextSecond(time.Now().Add(1500*time.Millisecond), 0)
	sleepUntil(from.Add(300 * time.Millisecond))
	for k := range dupInstances {
		in, err := sys.start(schema, dupInstances+k)
		if err != nil {
			stopInstances(insts)
			cons.close()
			return pgDupResult{err: err}
		}
		insts = append(insts, in)
		time.Sleep(time.Second)
		insts[k].stop()
		insts[k] = nil
		time.Sleep(time.Second)
	}
	to := time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)
	time.Sleep(1500 * time.Millisecond)
	stopInstances(insts)
	recs, err := cons.collect(func() ([]rec, error) { return sys.recs(ctx, schema) })
	if err != nil {
		return pgDupResult{err: err}
	}
	return pgDupResult{st: analyse(recs, dupJobs, 1000, ms(from), ms(to), sys.ttl), firstAfter: first}
}

// pgPause: as scenarioPause, on PostgreSQL: the leader stalls for 2×ttl
// (stall false: the steady state, the same window with nobody stalled).
func (p *pgEnv) pgPause(ctx context.Context, sys pgSys, stall bool) pgDupResult {
	schema, insts, cons, first, err := p.pgFleet(ctx, sys, "pause")
	if err != nil {
		return pgDupResult{err: err}
	}
	from := nextSecond(time.Now().Add(1500*time.Millisecond), 0)
	sleepUntil(from.Add(300 * time.Millisecond))
	v := sys.victim(ctx, schema, insts)
	d := 2 * sys.ttl
	if stall {
		insts[v].gate().pause(d)
	}
	time.Sleep(d + 3*time.Second)
	to := time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)
	time.Sleep(1500 * time.Millisecond)
	stopInstances(insts)
	recs, err := cons.collect(func() ([]rec, error) { return sys.recs(ctx, schema) })
	if err != nil {
		return pgDupResult{err: err}
	}
	res := pgDupResult{st: analyse(recs, dupJobs, 1000, ms(from), ms(to), sys.ttl), firstAfter: first, victim: fmt.Sprint(v)}
	if stall {
		res.stallDuration = d
	}
	if o, ok := insts[v].(*otPGInst); ok {
		res.fenced, res.held, res.fencedTicks = o.be.fencedClaims.Load(), o.be.heldClaims.Load(), o.be.fencedTicks.Load()
	}
	return res
}

// pgDelay: as scenarioDelay for onetick, on PostgreSQL: one replica, n
// one-second jobs, default lease; enqueue instant (the sink received the
// claimed tick) − slot over 4 slots (10 for n < 10) after 2 s of warm-up.
func (p *pgEnv) pgDelay(ctx context.Context, n int) ([]time.Duration, error) {
	schema, err := p.adm.freshSchema(ctx, "delay")
	if err != nil {
		return nil, err
	}
	if err := migrateOnetick(ctx, schema); err != nil {
		return nil, err
	}
	return delayOn(n, func(r *recorder) (*otPGInst, error) {
		return startOnetickPG(schema, 0, everyJobs(n, "1s"), onetick.LeaseConfig{}, r, p.logs)
	})
}

// delayOn is pgDelay's measurement on the one-replica instance start
// returns (recording into r).
func delayOn(n int, start func(r *recorder) (*otPGInst, error)) ([]time.Duration, error) {
	r := newRecorder(8 * n)
	in, err := start(r)
	if err != nil {
		return nil, err
	}
	tA := nextSecond(time.Now().Add(1500*time.Millisecond), 500*time.Millisecond)
	win := 4 * time.Second
	if n < 10 {
		win = 10 * time.Second
	}
	tB := tA.Add(win)
	sleepUntil(tB)
	in.stop()
	return delays(r.snapshot(), ms(tA), ms(tB)), nil
}

// pgBig: as scenarioBig's throughput and delay, on PostgreSQL: one
// replica with n "@every 1s" jobs for about run; throughput over the
// first slot (all n due at once: slot to the last claim), delay over the
// later slots.
func (p *pgEnv) pgBig(ctx context.Context, n int, run time.Duration) bigResult {
	schema, err := p.adm.freshSchema(ctx, "big")
	if err != nil {
		return bigResult{err: err}
	}
	if err := migrateOnetick(ctx, schema); err != nil {
		return bigResult{err: err}
	}
	return bigOn(n, run, func(r *recorder) (*otPGInst, error) {
		return startOnetickPG(schema, 0, everyJobs(n, "1s"), onetick.LeaseConfig{}, r, p.logs)
	})
}

// bigOn is pgBig's measurement on the one-replica instance start returns
// (recording into r).
func bigOn(n int, run time.Duration, start func(r *recorder) (*otPGInst, error)) bigResult {
	res := bigResult{jobs: n, run: run}
	r := newRecorder(n * (int(run/time.Second) + 4))
	t0 := time.Now()
	in, err := start(r)
	if err != nil {
		return bigResult{err: err}
	}
	res.setup = time.Since(t0)
	time.Sleep(run)
	in.stop()
	end := time.Now()
	recs := r.snapshot()
	res.ticks = len(recs)
	if len(recs) == 0 {
		return bigResult{err: fmt.Errorf("no tick was claimed in %s", run)}
	}
	by := map[int64]*slotSpan{}
	firstAt := map[int64]int64{}
	var slots []int64
	for _, x := range recs {
		s := by[x.slot]
		if s == nil {
			s = &slotSpan{slot: x.slot}
			by[x.slot] = s
			firstAt[x.slot] = x.at
			slots = append(slots, x.slot)
		}
		s.count++
		s.span = max(s.span, time.Duration(x.at-x.slot*int64(time.Millisecond)))
		firstAt[x.slot] = min(firstAt[x.slot], x.at)
	}
	sortInt64(slots)
	res.firstSlot = slots[0]
	f := by[slots[0]]
	res.firstCount, res.firstSpan = f.count, f.span
	res.firstFirst = time.Duration(firstAt[slots[0]] - slots[0]*int64(time.Millisecond))
	if f.span > 0 {
		res.thr = float64(f.count) / f.span.Seconds()
	}
	for _, s := range slots[1:] {
		res.slots = append(res.slots, *by[s])
	}
	res.ds = delays(recs, slots[0], ms(end))
	return res
}

func sortInt64(xs []int64) {
	for i := 1; i < len(xs); i++ {
		for k := i; k > 0 && xs[k] < xs[k-1]; k-- {
			xs[k], xs[k-1] = xs[k-1], xs[k]
		}
	}
}

// postgresSection runs the PostgreSQL part and returns its markdown.
func (e *env) postgresSection(ctx context.Context) (string, error) {
	pool, err := pgxpool.New(ctx, pgURL())
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return "", fmt.Errorf("PostgreSQL at %s: %w (scripts/install-deps.sh installs and starts it)", pgURL(), err)
	}
	p := &pgEnv{env: e, adm: pgAdmin{pool: pool}, logs: e.ot.c}
	defer p.adm.dropSchemas(context.Background())
	var out strings.Builder
	fmt.Fprintf(&out, "## PostgreSQL: onetick and River\n\nPostgreSQL %s on 127.0.0.1:5432 (the machine's server; a fresh schema per scenario, dropped at the end). Every instance is an in-process goroutine with its own connection pool.\n\n", p.adm.version(ctx))

	// 1. Duplicates and misses: onetick against River.
	systems := p.pgSystems()
	t := &table{title: map[string]string{}}
	for _, s := range systems {
		t.cols = append(t.cols, s.key)
		t.title[s.key] = s.title
	}
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	rDup := t.add("Rolling deploy: duplicate (job, slot)", fmt.Sprintf("%d instances, %d jobs every 1 s (on whole seconds); each instance replaced in turn (new one started, old one stopped gracefully 1 s later, 1 s pause); from the database's own table", dupInstances, dupJobs))
	rMiss := t.add("Rolling deploy: missed (job, slot)", "job-slots in the window that nobody enqueued / expected")
	for _, s := range systems {
		progress("postgres rolling deploy: %s", s.title)
		res := p.pgRolling(ctx, s)
		if res.err != nil {
			rDup.text(s.key, "error: %v", res.err)
			continue
		}
		rDup.set(s.key, dupCellPG(res.st))
		rMiss.set(s.key, cell{text: fmt.Sprintf("%d / %d", res.st.missed, res.st.expected), vals: []float64{float64(res.st.missed)}})
		note("Rolling deploy, %s: first enqueue %s after starting the fleet.", s.title, fmtDur(res.firstAfter))
	}
	pDup := t.add("Leader stall: duplicate (job, slot)", fmt.Sprintf("%d instances, %d jobs every 1 s; the leader stalls for 2× its TTL (every database call it starts blocks until the stall ends, then proceeds)", dupInstances, dupJobs))
	pStale := t.add("Leader stall: stale enqueues accepted", "enqueues that reached the database more than the TTL after their slot: writes of an instance whose leadership had expired")
	pMiss := t.add("Leader stall: missed (job, slot)", "job-slots in the window that nobody enqueued / expected (the window includes the stall: a longer TTL, a longer takeover)")
	pFence := t.add("Leader stall: stalled claims refused by the store", "onetick: claims held back by the stall and sent afterwards, refused by the claim transaction's lease check (ticks in them)")
	for _, s := range systems {
		progress("postgres leader stall: %s", s.title)
		res := p.pgPause(ctx, s, true)
		if res.err != nil {
			pDup.text(s.key, "error: %v", res.err)
			continue
		}
		pDup.set(s.key, dupCellPG(res.st))
		pStale.set(s.key, cell{text: fmt.Sprint(res.st.stale), vals: []float64{float64(res.st.stale)}})
		pMiss.set(s.key, cell{text: fmt.Sprintf("%d / %d", res.st.missed, res.st.expected), vals: []float64{float64(res.st.missed)}})
		if s.key == "river" {
			pFence.text(s.key, "n/a: no fence on the insert")
		} else {
			pFence.text(s.key, "%d of %d (%d ticks)", res.fenced, res.held, res.fencedTicks)
		}
		note("Leader stall, %s: instance %s stalled for %s.", s.title, res.victim, fmtDur(res.stallDuration))
	}
	fmt.Fprintf(&out, "Each other column's figure is followed by its ratio **column / first column** in brackets. ∞: the first column's figure is 0 and this one's is not; =: both 0.\n\n")
	out.WriteString(t.markdown())
	out.WriteString("\nNotes:\n\n")
	for _, n := range append([]string{
		"Slots: onetick's entries carry their slot; River's periodic jobs are inserted with scheduled_at set to the schedule's instant, which is the slot here (a PeriodicSchedule on whole seconds; River's own PeriodicInterval counts from the leader's start). Both are read back from the database after the run (onetick's entries table, River's river_job), so the counts are what the store holds, not what a client believed.",
		"River's leadership TTL is its elect interval (5 s) plus a fixed 10 s padding; river.Config does not expose it. onetick runs twice: with the same 15 s TTL (the first column, the like-for-like comparison) and with 2 s (the TTL of the Redis scenarios above).",
		"Stall: in-process instances cannot be SIGSTOPped. onetick: every backend call blocks while stalled, and a claim held back is sent afterwards with a fresh context, as if it had left the process just before the stall. River: every connection acquisition from the client's pool blocks (pgxpool PrepareConn), then proceeds; River's LISTEN connection, held for good, is not stalled.",
		"River runs with default periodic-job options (no unique options); a River user can add UniqueOpts{ByPeriod} to have the database refuse a second insert of the same job in the same period. onetick needs no option: the claim refuses a slot already recorded.",
	}, notes...) {
		out.WriteString("- " + n + "\n")
	}

	// 2. onetick on PostgreSQL against onetick on Redis.
	t2 := &table{cols: []string{"redis", "pg"}, title: map[string]string{"redis": "onetick on Redis", "pg": "onetick on PostgreSQL"}}
	ot := e.systems()[0]
	for _, n := range []int{1, 1000} {
		row := t2.add(fmt.Sprintf("Tick delay p50 / p99, %d job(s) due each second", n),
			fmt.Sprintf("one replica, default lease; claimed tick handed to the sink − slot; %s after 2 s warm-up", map[bool]string{true: "10 slots (p99 is the maximum)", false: "4 slots (4000 samples)"}[n == 1]))
		progress("postgres: tick delay, %d jobs, Redis", n)
		rr := e.scenarioDelay(ctx, ot, n)
		if rr.err != nil || len(rr.ds) == 0 {
			row.text("redis", "error: %v (%d samples)", rr.err, len(rr.ds))
		} else {
			row.set("redis", cell{text: fmtDur(pct(rr.ds, 50)) + " / " + fmtDur(pct(rr.ds, 99)), vals: []float64{pct(rr.ds, 50).Seconds(), pct(rr.ds, 99).Seconds()}})
		}
		progress("postgres: tick delay, %d jobs, PostgreSQL", n)
		ds, err := p.pgDelay(ctx, n)
		if err != nil || len(ds) == 0 {
			row.text("pg", "error: %v (%d samples)", err, len(ds))
		} else {
			row.set("pg", cell{text: fmtDur(pct(ds, 50)) + " / " + fmtDur(pct(ds, 99)), vals: []float64{pct(ds, 50).Seconds(), pct(ds, 99).Seconds()}})
		}
	}
	bigN, bigRun := 100_000, 8*time.Second
	if quick {
		bigN, bigRun = 20_000, 5*time.Second
	}
	rThr := t2.add(fmt.Sprintf("Claim throughput, %d jobs due at once (ticks/s)", bigN),
		"one replica, default lease, jobs \"@every 1s\": ticks of the first slot / (last claim − slot); claims of up to 2000 ticks (Redis: one Lua call; PostgreSQL: one transaction)")
	rBig := t2.add(fmt.Sprintf("Tick delay p50 / p99, %d jobs due each second", bigN), fmt.Sprintf("the same run, slots after the first over %s", bigRun))
	var notes2 []string
	progress("postgres: %d jobs, Redis", bigN)
	rb := e.scenarioBig(ctx, bigN, bigRun)
	progress("postgres: %d jobs, PostgreSQL", bigN)
	pb := p.pgBig(ctx, bigN, bigRun)
	for _, x := range []struct {
		key string
		r   bigResult
	}{{"redis", rb}, {"pg", pb}} {
		if n := bigRows(rThr, rBig, x.key, t2.title[x.key], bigN, x.r); n != "" {
			notes2 = append(notes2, n)
		}
	}
	fmt.Fprintf(&out, "\n### onetick on PostgreSQL against onetick on Redis\n\nThe PostgreSQL figure is followed by its ratio **PostgreSQL / Redis** in brackets: above 1 PostgreSQL's number is larger (worse for delays, better for throughput).\n\n")
	out.WriteString(t2.markdown())
	if len(notes2) > 0 {
		out.WriteString("\nNotes:\n\n")
		for _, n := range notes2 {
			out.WriteString("- " + n + "\n")
		}
	}
	return out.String(), nil
}

// dupCellPG is a duplicate count with its job-slots and multiplicity.
func dupCellPG(st slotStats) cell {
	text := fmt.Sprint(st.dups)
	if st.dupSlots > 0 {
		text += fmt.Sprintf(" (%d job-slots, up to %d×)", st.dupSlots, st.maxPerSlot)
	}
	return cell{text: text, vals: []float64{float64(st.dups)}}
}

// bigRows fills column key of the throughput and delay rows from r, a
// burst of n jobs, and returns the run's note ("" when it failed).
func bigRows(rThr, rBig *row, key, title string, n int, r bigResult) string {
	if r.err != nil {
		rThr.text(key, "error: %v", r.err)
		return ""
	}
	rThr.set(key, cell{text: fmt.Sprintf("%.0f (%d in %s; first claim after %s)", r.thr, r.firstCount, fmtDur(r.firstSpan), fmtDur(r.firstFirst)), vals: []float64{r.thr}})
	if len(r.ds) > 0 {
		rBig.set(key, cell{text: fmtDur(pct(r.ds, 50)) + " / " + fmtDur(pct(r.ds, 99)), vals: []float64{pct(r.ds, 50).Seconds(), pct(r.ds, 99).Seconds()}})
	} else {
		rBig.text(key, "none: no slot after the first was claimed within the run")
	}
	var spans []string
	for _, sl := range r.slots {
		spans = append(spans, fmt.Sprintf("%s: %d in %s", time.UnixMilli(sl.slot).UTC().Format("15:04:05"), sl.count, fmtDur(sl.span)))
	}
	return fmt.Sprintf("%s, %d jobs: first slot %d ticks, the last %s after the slot; later slots (ticks, slot → last claim): %s.",
		title, n, r.firstCount, fmtDur(r.firstSpan), strings.Join(spans, "; "))
}
