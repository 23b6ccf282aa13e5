package main

// The contenders on PostgreSQL: onetick's postgres backend, and River's
// periodic jobs (github.com/riverqueue/river, the Go job queue on
// PostgreSQL; periodic jobs are inserted by the elected leader client).

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/onetick/onetick"
	otpostgres "github.com/onetick/onetick/postgres"
)

// pgURL is the machine's PostgreSQL (BENCH_POSTGRES_URL overrides).
func pgURL() string {
	if u := getenv("BENCH_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// pgAdmin is the harness's own connection: schemas, counts, version.
type pgAdmin struct{ pool *pgxpool.Pool }

func (a pgAdmin) version(ctx context.Context) string {
	var v string
	if err := a.pool.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "unknown"
	}
	return v
}

// freshSchema creates a new empty schema for one scenario and returns its
// name; dropSchemas drops every schema made so.
func (a pgAdmin) freshSchema(ctx context.Context, tag string) (string, error) {
	name := fmt.Sprintf("bench_%s_%d", tag, time.Now().UnixNano()%1e9)
	_, err := a.pool.Exec(ctx, "CREATE SCHEMA "+name)
	return name, err
}

func (a pgAdmin) dropSchemas(ctx context.Context) {
	rows, err := a.pool.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench\_%'`)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		_, _ = a.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{n}.Sanitize()+" CASCADE")
	}
}

// otPGInst is one onetick replica on PostgreSQL, as a goroutine with its
// own connection pool (and LISTEN connection), as a process would have.
type otPGInst struct {
	g      *gate
	be     *gatedBackend
	s      *onetick.Scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

func (i *otPGInst) stop() {
	i.cancel()
	<-i.done
	_ = i.be.Close()
}

func (i *otPGInst) gate() *gate { return i.g }

// migrateOnetick creates onetick's tables in schema.
func migrateOnetick(ctx context.Context, schema string) error {
	b, err := otpostgres.Open(ctx, pgURL(), otpostgres.Options{Schema: schema})
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Migrate(ctx)
}

// startOnetickPG starts replica id of jobs in schema; r, if set, records
// each claimed tick when the sink receives it. River's tables, for jobs
// relayed to River, are looked for in the same schema.
func startOnetickPG(schema string, id int, jobs []onetick.Job, lease onetick.LeaseConfig, r *recorder, logs *logCounter) (*otPGInst, error) {
	pg, err := otpostgres.Open(context.Background(), pgURL(), otpostgres.Options{Schema: schema, RiverSchema: schema})
	if err != nil {
		return nil, err
	}
	return startOnetickOn(pg, id, jobs, lease, r, logs)
}

// startOnetickOn starts replica id of jobs on the store b (closed when it
// fails to start), behind a gate (the same as on Redis); r, if set,
// records each claimed tick when the sink receives it.
func startOnetickOn(b onetick.Backend, id int, jobs []onetick.Job, lease onetick.LeaseConfig, r *recorder, logs *logCounter) (*otPGInst, error) {
	be := &gatedBackend{Backend: b, g: &gate{}}
	inst := &otPGInst{g: be.g, be: be, done: make(chan struct{})}
	if logs == nil {
		logs = &logCounter{}
	}
	cfg := onetick.Config{Backend: be, Replica: "r" + strconv.Itoa(id), Jobs: jobs, Lease: lease, Logger: slog.New(logs), Sink: recordingSink(r, id)}
	s, err := onetick.New(cfg)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	inst.s = s
	ctx, cancel := context.WithCancel(context.Background())
	inst.cancel = cancel
	go func() {
		defer close(inst.done)
		runEnded(ctx, s.Run(ctx), logs)
	}()
	return inst, nil
}

// otPGStoreRecs reads the entries table: what onetick enqueued, at the
// database's clock of the append.
func (a pgAdmin) otPGStoreRecs(ctx context.Context, schema string) ([]rec, error) {
	rows, err := a.pool.Query(ctx, `SELECT job, slot, ms, replica FROM `+schema+`.entries`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (rec, error) {
		var job, replica string
		var slot, at int64
		err := row.Scan(&job, &slot, &at, &replica)
		inst, _ := strconv.Atoi(replica[1:])
		return rec{job: jobIndex(job), inst: int32(inst), slot: slot, at: at * int64(time.Millisecond)}, err
	})
}

// River.

// riverArgs is the periodic job's payload: which of the n jobs it is.
type riverArgs struct {
	Job int `json:"job"`
}

func (riverArgs) Kind() string { return "bench_tick" }

// riverWorker works the periodic jobs: with r set it records each, its
// slot the job's scheduled_at (the schedule's instant); else it does
// nothing.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	r *recorder
}

func (w riverWorker) Work(_ context.Context, j *river.Job[riverArgs]) error {
	if w.r != nil {
		w.r.add(rec{job: int32(j.Args.Job), inst: -1, slot: j.ScheduledAt.UnixMilli(), at: time.Now().UnixNano()})
	}
	return nil
}

// everySecond is a PeriodicSchedule on whole seconds, as the other
// systems fire (River's PeriodicInterval counts from the leader's start).
type everySecond struct{}

func (everySecond) Next(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }

// riverLeaderTTL is River's leadership TTL: its elect interval (5 s) plus
// a fixed 10 s padding; not configurable through river.Config.
const riverLeaderTTL = 15 * time.Second

// migrateRiver creates River's tables in schema.
func migrateRiver(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// riverInst is one River client with n periodic jobs, its own pool whose
// connection acquisitions block while its gate is paused (a stalled
// process: every database call it starts waits, then proceeds).
type riverInst struct {
	id     string
	g      *gate
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
}

func (i *riverInst) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = i.client.Stop(ctx)
	i.pool.Close()
}

func (i *riverInst) gate() *gate { return i.g }

// startRiver starts client id with n periodic jobs (kind bench_tick, on
// River's default queue); the client works queue (river.QueueDefault: it
// works its own periodic jobs, with a worker that does nothing).
func startRiver(schema string, id, n int, queue string) (*riverInst, error) {
	g := &gate{}
	cfg, err := pgxpool.ParseConfig(pgURL())
	if err != nil {
		return nil, err
	}
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		g.wait()
		return true, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, riverWorker{})
	var periodic []*river.PeriodicJob
	for j := range n {
		periodic = append(periodic, river.NewPeriodicJob(everySecond{}, func() (river.JobArgs, *river.InsertOpts) {
			return riverArgs{Job: j}, nil
		}, nil))
	}
	name := "c" + strconv.Itoa(id)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:           name,
		Schema:       schema,
		Logger:       slog.New(slog.DiscardHandler),
		Queues:       map[string]river.QueueConfig{queue: {MaxWorkers: 10}},
		Workers:      workers,
		PeriodicJobs: periodic,
	})
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := client.Start(context.Background()); err != nil {
		pool.Close()
		return nil, err
	}
	return &riverInst{id: name, g: g, pool: pool, client: client}, nil
}

// riverLeader is the id of the client River's leader table names.
func (a pgAdmin) riverLeader(ctx context.Context, schema string) (string, error) {
	var id string
	err := a.pool.QueryRow(ctx, `SELECT leader_id FROM `+schema+`.river_leader`).Scan(&id)
	return id, err
}

// riverStoreRecs reads river_job: every periodic job inserted, its slot
// the scheduled_at River set (the schedule's instant), at its created_at
// (the database's clock at insert).
func (a pgAdmin) riverStoreRecs(ctx context.Context, schema string) ([]rec, error) {
	rows, err := a.pool.Query(ctx, `SELECT (args->>'job')::int, scheduled_at, created_at FROM `+schema+`.river_job WHERE kind = 'bench_tick'`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (rec, error) {
		var job int32
		var slot, at time.Time
		err := row.Scan(&job, &slot, &at)
		return rec{job: job, inst: -1, slot: slot.UnixMilli(), at: at.UnixNano()}, err
	})
}
