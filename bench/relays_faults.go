package main

// The relays under faults (-only relays-faults, issue 21): onetick
// relaying to asynq beside asynq's own Scheduler with three instances, and
// onetick relaying to River beside River's periodic jobs with three
// clients, in the duplicate scenarios of the side-by-side (steady state,
// leader stall, rolling deploy: scenarioPause, scenarioRolling, pgPause,
// pgRolling). What counts is what the queue's own workers work: a real
// asynq Server, a real River client, each a consumer that runs beside the
// fleet and outside its faults.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/onetick/onetick"
	otredis "github.com/onetick/onetick/redis"
)

// consumerDrain bounds how long a consumer waits for its queue to empty.
const consumerDrain = time.Minute

// asynqTaskType is the type of the tasks startAsynq's Scheduler enqueues.
const asynqTaskType = "tick"

// asynqConsumer is a real asynq Server working the default queue: the
// tasks a relay wrote (their payload carries job and slot) and asynq
// Scheduler's tasks (their payload is the job only: the slot is the one
// the harness saw the Scheduler enqueue under the task's id, so enq keeps
// ids).
func (e *env) asynqConsumer(_ context.Context, _ string, enq *recorder) (*consuming, error) {
	enq.keepIDs()
	r := newRecorder(1 << 12)
	type seen struct {
		id  string
		job int32
		at  int64
	}
	var mu sync.Mutex
	var sched []seen // Scheduler tasks, their slot looked up at the end
	mux := asynq.NewServeMux()
	mux.HandleFunc(relayType, func(_ context.Context, t *asynq.Task) error {
		at := time.Now().UnixNano()
		var rt otredis.RelayedTick
		if err := json.Unmarshal(t.Payload(), &rt); err != nil {
			return err
		}
		r.add(rec{job: jobIndex(rt.Job), inst: -1, slot: rt.Slot, at: at})
		return nil
	})
	mux.HandleFunc(asynqTaskType, func(ctx context.Context, t *asynq.Task) error {
		at := time.Now().UnixNano()
		id, _ := asynq.GetTaskID(ctx)
		mu.Lock()
		sched = append(sched, seen{id: id, job: jobIndex(string(t.Payload())), at: at})
		mu.Unlock()
		return nil
	})
	opt := asynq.RedisClientOpt{Addr: e.srv.Addr()}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 20, LogLevel: asynq.FatalLevel})
	if err := srv.Start(mux); err != nil {
		return nil, err
	}
	c := &consuming{r: r, stop: srv.Shutdown}
	c.drain = func() error {
		insp := asynq.NewInspector(opt)
		defer insp.Close()
		err := waitEmpty(func() (int64, error) {
			q, err := insp.GetQueueInfo("default")
			if errors.Is(err, asynq.ErrQueueNotFound) {
				return 0, nil
			}
			if err != nil {
				return 0, err
			}
			return int64(q.Pending + q.Active + q.Scheduled + q.Retry), nil
		})
		srv.Shutdown()
		mu.Lock()
		defer mu.Unlock()
		unmatched := 0
		for _, s := range sched {
			x, ok := enq.byID(s.id)
			if !ok {
				unmatched++
				continue
			}
			r.add(rec{job: s.job, inst: x.inst, slot: x.slot, at: s.at})
		}
		if err == nil && unmatched > 0 {
			err = fmt.Errorf("%d Scheduler tasks worked whose enqueue the harness did not see (slot unknown)", unmatched)
		}
		return err
	}
	return c, nil
}

// waitEmpty polls left until it reports 0, for at most consumerDrain.
func waitEmpty(left func() (int64, error)) error {
	for deadline := time.Now().Add(consumerDrain); ; time.Sleep(50 * time.Millisecond) {
		n, err := left()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d tasks still to work %s after the fleet stopped", n, consumerDrain)
		}
	}
}

// riverConsumer is a real River client (its own pool) working the default
// queue of the scenario's schema: River's periodic jobs (slot: their
// scheduled_at) and the jobs a relay inserted (slot: in their args). It
// takes no part in River's leader election, so that River's periodic
// jobs are inserted by the fleet's clients only.
func riverConsumer(ctx context.Context, schema string, _ *recorder) (*consuming, error) {
	pool, err := pgxpool.New(ctx, pgURL())
	if err != nil {
		return nil, err
	}
	r := newRecorder(1 << 12)
	workers := river.NewWorkers()
	river.AddWorker(workers, riverWorker{r: r})
	river.AddWorker(workers, riverRelayWorker{r: r})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:                     "consumer",
		Schema:                 schema,
		Logger:                 slog.New(slog.DiscardHandler),
		Queues:                 map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}},
		Workers:                workers,
		LeaderElectionDisabled: true,
	})
	if err == nil {
		err = client.Start(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
		pool.Close()
	}
	return &consuming{r: r, stop: stop, drain: func() error {
		err := waitEmpty(func() (int64, error) {
			var n int64
			err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+
				`.river_job WHERE state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`).Scan(&n)
			return n, err
		})
		stop()
		return err
	}}, nil
}

// riverRelayStoreRecs reads the River jobs a relay inserted, their slot
// from their args, at their created_at.
func (a pgAdmin) riverRelayStoreRecs(ctx context.Context, schema string) ([]rec, error) {
	rows, err := a.pool.Query(ctx, `SELECT args->>'job', (args->>'slot')::timestamptz, created_at FROM `+schema+`.river_job WHERE kind = $1`, relayType)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (rec, error) {
		var job string
		var slot, at time.Time
		err := row.Scan(&job, &slot, &at)
		return rec{job: jobIndex(job), inst: -1, slot: slot.UnixMilli(), at: at.UnixNano()}, err
	})
}

// relayFaultSystems: onetick relaying to asynq, then asynq's Scheduler,
// both counted by an asynq Server.
func (e *env) relayFaultSystems() []system {
	base := e.systems()
	ot, aq := base[0], base[1]
	relay := system{
		key: "onetick-asynq", title: fmt.Sprintf("onetick relaying to asynq (lease TTL %s)", dupTTL),
		start: func(id, n int, ttl time.Duration, r *recorder, rt *atomic.Int64) (instance, error) {
			return startOnetick(e.srv, id, otOptions{jobs: relayJobsOf(n, &onetick.Relay{Kind: onetick.RelayAsynq, Type: relayType}),
				lease: onetick.LeaseConfig{TTL: ttl}, rt: rt, logs: e.ot.c}, r)
		},
		victim:   ot.victim,
		consumer: e.asynqConsumer,
	}
	aq.title = "asynq v0.26.0 Scheduler, plain (no TaskID, no Unique)"
	aq.storeCount = nil // the consumer empties the pending list
	aq.consumer = e.asynqConsumer
	return []system{relay, aq}
}

// relayFaultPGSystems: onetick relaying to River (lease TTL 15 s, as
// River's leadership), River's periodic jobs, onetick relaying to River
// (lease TTL 2 s), all counted by one River client.
func (p *pgEnv) relayFaultPGSystems() []pgSys {
	base := p.pgSystems()
	relay := func(o pgSys) pgSys {
		ttl := o.ttl
		o.key = "relay-" + ttl.String()
		o.title = fmt.Sprintf("onetick relaying to River (lease TTL %s)", ttl)
		o.setup = func(ctx context.Context, schema string) error {
			if err := migrateOnetick(ctx, schema); err != nil {
				return err
			}
			return migrateRiver(ctx, p.adm.pool, schema)
		}
		o.start = func(schema string, id int) (instance, error) {
			return startOnetickPG(schema, id, relayJobsOf(dupJobs, &onetick.Relay{Kind: onetick.RelayRiver, Type: relayType}),
				onetick.LeaseConfig{TTL: ttl}, nil, p.logs)
		}
		o.recs = p.adm.riverRelayStoreRecs
		o.consumer = riverConsumer
		return o
	}
	rv := base[1]
	rv.title = "River v0.51.2 periodic jobs, 3 clients (leadership TTL 15 s, fixed; no unique options)"
	rv.start = func(schema string, id int) (instance, error) { return startRiver(schema, id, dupJobs, "bench_idle") }
	rv.consumer = riverConsumer
	return []pgSys{relay(base[0]), rv, relay(base[2])}
}

// faultRows are one scenario's rows of a relays-faults table.
type faultRows struct{ recv, dup, miss *row }

func addFaultRows(t *table, name, how string) faultRows {
	return faultRows{
		recv: t.add(name+": received / expected", how+"; (job, slot) pairs of the window worked at least once by the queue's workers"),
		dup:  t.add(name+": received twice", "extra times a (job, slot) of the window was worked (job-slots worked more than once, most times one was worked)"),
		miss: t.add(name+": missed", "(job, slot) pairs of the window the workers never worked / expected"),
	}
}

func (f faultRows) set(key string, st slotStats, err error) {
	if err != nil {
		f.recv.text(key, "error: %v", err)
		return
	}
	f.recv.text(key, "%d / %d", st.expected-st.missed, st.expected)
	f.dup.set(key, dupCellPG(st))
	f.miss.set(key, cell{text: fmt.Sprintf("%d / %d", st.missed, st.expected), vals: []float64{float64(st.missed)}})
}

func (e *env) relaysFaultsSection(ctx context.Context) (string, error) {
	pool, err := pgxPool(ctx)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	p := &pgEnv{env: e, adm: pgAdmin{pool: pool}, logs: e.ot.c}
	defer p.adm.dropSchemas(context.Background())

	var b strings.Builder
	b.WriteString("## Relays (issue 21) under faults: onetick relaying to asynq and River beside asynq's Scheduler and River's periodic jobs\n\n")
	fmt.Fprintf(&b, "%d instances of each contender, %d jobs every 1 s, in the duplicate scenarios of the side-by-side above (the same code). What is counted is what the queue's own workers worked: a real asynq Server (concurrency 20) on the same Redis, a real River client (20 workers) on the same PostgreSQL schema, started before the fleet, outside the faults, and drained after the fleet stopped (until the queue held nothing left to work). Each other column's figure is followed by its ratio **column / first column** in brackets (∞: the first column's is 0 and this one's is not; =: both 0).\n\n", dupInstances, dupJobs)

	// asynq.
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	systems := e.relayFaultSystems()
	t := &table{title: map[string]string{}}
	for _, s := range systems {
		t.cols = append(t.cols, s.key)
		t.title[s.key] = s.title
	}
	steady := addFaultRows(t, "Steady state", fmt.Sprintf("no fault; slots over %s", 2*dupTTL+3*time.Second))
	stall := addFaultRows(t, "Leader stall", fmt.Sprintf("the leader (asynq: instance 0) stalls %s: every Redis call and enqueue it makes blocks; a onetick claim held back is sent afterwards", 2*dupTTL))
	fence := t.add("Leader stall: stalled claims refused by the store", "onetick: claims held back by the stall, sent afterwards and refused by the store's epoch fence (ticks in them): their asynq tasks were never written")
	roll := addFaultRows(t, "Rolling deploy", "each instance replaced in turn (new one started, old one stopped 1 s later, 1 s pause)")
	for _, s := range systems {
		progress("relays under faults, steady state: %s", s.title)
		res := e.scenarioPause(ctx, s, false)
		steady.set(s.key, res.st, res.err)
		progress("relays under faults, leader stall: %s", s.title)
		res = e.scenarioPause(ctx, s, true)
		stall.set(s.key, res.st, res.err)
		if s.key == "onetick-asynq" {
			fence.text(s.key, "%d of %d (%d ticks)", res.fenced, res.held, res.fencedTicks)
		} else {
			fence.text(s.key, "n/a: no store-side fence")
		}
		progress("relays under faults, rolling deploy: %s", s.title)
		res = e.scenarioRolling(ctx, s)
		roll.set(s.key, res.st, res.err)
	}
	b.WriteString("### asynq (Redis)\n\n")
	b.WriteString(t.markdown())

	// River.
	pgs := p.relayFaultPGSystems()
	t2 := &table{title: map[string]string{}}
	for _, s := range pgs {
		t2.cols = append(t2.cols, s.key)
		t2.title[s.key] = s.title
	}
	psteady := addFaultRows(t2, "Steady state", "no fault; slots over 2× the column's TTL + 3 s")
	pstall := addFaultRows(t2, "Leader stall", "the leader stalls for 2× its TTL: every database call it starts blocks until the stall ends, then proceeds")
	pfence := t2.add("Leader stall: stalled claims refused by the store", "onetick: claims held back by the stall, sent afterwards and refused by the claim transaction's lease check (ticks in them): their River jobs were never inserted")
	proll := addFaultRows(t2, "Rolling deploy", "each instance replaced in turn (new one started, old one stopped gracefully 1 s later, 1 s pause)")
	for _, s := range pgs {
		progress("relays under faults, PostgreSQL steady state: %s", s.title)
		res := p.pgPause(ctx, s, false)
		psteady.set(s.key, res.st, res.err)
		progress("relays under faults, PostgreSQL leader stall: %s", s.title)
		res = p.pgPause(ctx, s, true)
		pstall.set(s.key, res.st, res.err)
		if s.key == "river" {
			pfence.text(s.key, "n/a: no fence on the insert")
		} else if res.err == nil {
			pfence.text(s.key, "%d of %d (%d ticks)", res.fenced, res.held, res.fencedTicks)
		}
		if res.err == nil {
			note("Leader stall, %s: instance %s stalled for %s.", s.title, res.victim, fmtDur(res.stallDuration))
		}
		progress("relays under faults, PostgreSQL rolling deploy: %s", s.title)
		res = p.pgRolling(ctx, s)
		proll.set(s.key, res.st, res.err)
	}
	b.WriteString("\n### River (PostgreSQL)\n\n")
	b.WriteString(t2.markdown())
	b.WriteString("\nNotes:\n\n")
	for _, n := range append([]string{
		"Slots: a relayed task or job carries its tick's slot (asynq: the RelayedTick payload; River: RiverTick args). asynq's Scheduler task carries only its job: its slot is the second in which that Scheduler's cron fired it (PreEnqueueFunc), looked up by the task id PostEnqueueFunc returned, as in the side-by-side above. River's periodic job: its scheduled_at, the schedule's whole second.",
		"asynq's Scheduler runs plain, as its documentation shows it: no TaskID, no Unique option. The hand-rolled TaskID + Retention variant (asynq #395, #554) is not measured: the side-by-side has no such variant either.",
		"River's three clients insert the periodic jobs (one elected leader does) and work only an empty queue of their own; the consumer client works River's default queue and takes no part in the election (LeaderElectionDisabled), so that it never leads without the periodic jobs. River users usually let the same clients work the jobs; who works them does not change what was inserted.",
		"onetick's relay writes the asynq task in the claim's Lua script and inserts the River job in the claim's transaction (uniqueness by args); onetick's replicas are the gated in-process instances of the side-by-side, the same stall (a held-back claim is sent afterwards).",
		"One run of each scenario: figures move from run to run on a shared machine; a rate of duplicates or misses is not a measurement of a rare event.",
	}, notes...) {
		b.WriteString("- " + n + "\n")
	}
	return b.String(), nil
}
