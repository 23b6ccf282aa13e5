package main

// The relays part (-only relays, issue 21): a fleet of "@every 1s" jobs
// relayed to asynq (same Redis), River (same PostgreSQL) and NATS
// JetStream (the worker's relay consumer), beside the native stream. The
// delay is measured on the relay's side: the instant a consumer of the
// other system receives the tick, minus its slot.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/onetick/onetick"
	otpostgres "github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/relay/natsrelay"
	"github.com/onetick/onetick/worker"
)

const (
	relayJobs = 1000
	relayConc = 128 // consumers' concurrency (asynq, River, onetick worker)
	relayType = "bench_relay"
	natsURL   = "nats://127.0.0.1:4222"
)

// relayResult is one relay's fleet run.
type relayResult struct {
	ds  []time.Duration // receive − slot, sorted
	st  slotStats
	err error
}

// relayJobsOf is a fleet of n jobs with relay r (nil: the native stream).
func relayJobsOf(n int, r *onetick.Relay) []onetick.Job {
	jobs := everyJobs(n, "1s")
	for i := range jobs {
		jobs[i].Relay = r
		if r != nil && r.Kind == onetick.RelayNATS {
			jobs[i].Stream = "relay"
		}
	}
	return jobs
}

// relayWindow waits warm, measures win, lets the last slot land, and
// returns the window's bounds (Unix ms).
func relayWindow(warm, win time.Duration) (from, to int64) {
	tA := nextSecond(time.Now().Add(warm), 500*time.Millisecond)
	tB := tA.Add(win)
	sleepUntil(tB.Add(2 * time.Second))
	return ms(tA), ms(tB)
}

func relayOutcome(r *recorder, from, to int64) relayResult {
	rs := r.snapshot()
	return relayResult{ds: delays(rs, from, to), st: analyse(rs, relayJobs, 1000, from, to, time.Hour)}
}

// relayAsynq: onetick on Redis writes asynq tasks in its claim; a real
// asynq Server receives them.
func (e *env) relayAsynq(ctx context.Context, warm, win time.Duration) relayResult {
	if err := e.adm.flush(ctx); err != nil {
		return relayResult{err: err}
	}
	r := newRecorder(relayJobs * int((warm+win)/time.Second+8))
	mux := asynq.NewServeMux()
	mux.HandleFunc(relayType, func(_ context.Context, t *asynq.Task) error {
		at := time.Now().UnixNano()
		var rt otredis.RelayedTick
		if err := json.Unmarshal(t.Payload(), &rt); err != nil {
			return err
		}
		r.add(rec{job: jobIndex(rt.Job), slot: rt.Slot, at: at})
		return nil
	})
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: e.srv.Addr()}, asynq.Config{Concurrency: relayConc, LogLevel: asynq.FatalLevel})
	if err := srv.Start(mux); err != nil {
		return relayResult{err: err}
	}
	defer srv.Shutdown()
	// Not startOnetick: runScheduler returns Run's error, so a relay the
	// store refuses shows as an error here, not as missed ticks.
	c := e.srv.newClient(nil)
	defer c.Close()
	stop, err := e.runScheduler(ctx, otredis.New(c, otredis.Options{Prefix: otPrefix}),
		relayJobsOf(relayJobs, &onetick.Relay{Kind: onetick.RelayAsynq, Type: relayType}))
	if err != nil {
		return relayResult{err: err}
	}
	from, to := relayWindow(warm, win)
	if err := stop(); err != nil {
		return relayResult{err: err}
	}
	return relayOutcome(r, from, to)
}

// runScheduler runs one scheduler replica of jobs on be; stop ends it and
// returns Run's error (nil when it ended by stop).
func (e *env) runScheduler(ctx context.Context, be onetick.Backend, jobs []onetick.Job) (stop func() error, err error) {
	s, err := onetick.New(onetick.Config{Backend: be, Replica: "r0", Logger: slog.New(e.ot.c), Jobs: jobs})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	return func() error {
		select {
		case err := <-done: // it ended before stop: refused, or failed
			cancel()
			return fmt.Errorf("scheduler ended early: %v", err)
		default:
		}
		cancel()
		<-done
		return nil
	}, nil
}

// riverRelayArgs is the River job onetick inserts.
type riverRelayArgs struct{ otpostgres.RiverTick }

func (riverRelayArgs) Kind() string { return relayType }

type riverRelayWorker struct {
	river.WorkerDefaults[riverRelayArgs]
	r *recorder
}

func (w riverRelayWorker) Work(_ context.Context, j *river.Job[riverRelayArgs]) error {
	w.r.add(rec{job: jobIndex(j.Args.Job), slot: j.Args.Slot.UnixMilli(), at: time.Now().UnixNano()})
	return nil
}

// relayRiver: onetick on PostgreSQL inserts River jobs in its claim's
// transaction; a real River client works them.
func (e *env) relayRiver(ctx context.Context, pg pgAdmin, warm, win time.Duration) relayResult {
	ot, err := pg.freshSchema(ctx, "relay")
	if err != nil {
		return relayResult{err: err}
	}
	rs, err := pg.freshSchema(ctx, "river")
	if err != nil {
		return relayResult{err: err}
	}
	if err := migrateRiver(ctx, pg.pool, rs); err != nil {
		return relayResult{err: err}
	}
	r := newRecorder(relayJobs * int((warm+win)/time.Second+8))
	workers := river.NewWorkers()
	river.AddWorker(workers, riverRelayWorker{r: r})
	client, err := river.NewClient(riverpgxv5.New(pg.pool), &river.Config{
		Schema:  rs,
		Logger:  slog.New(slog.DiscardHandler),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: relayConc}},
		Workers: workers,
	})
	if err != nil {
		return relayResult{err: err}
	}
	if err := client.Start(ctx); err != nil {
		return relayResult{err: err}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	be, err := otpostgres.Open(ctx, pgURL(), otpostgres.Options{Schema: ot, RiverSchema: rs})
	if err != nil {
		return relayResult{err: err}
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		return relayResult{err: err}
	}
	stop, err := e.runScheduler(ctx, be, relayJobsOf(relayJobs, &onetick.Relay{Kind: onetick.RelayRiver, Type: relayType}))
	if err != nil {
		return relayResult{err: err}
	}
	from, to := relayWindow(warm, win)
	if err := stop(); err != nil {
		return relayResult{err: err}
	}
	return relayOutcome(r, from, to)
}

// relayNATS: onetick on Redis claims into the jobs' stream; a worker's
// relay consumer (natsrelay.Publisher, one per job as `onetick run`
// builds them, sharing one connection here) publishes each tick; a
// JetStream consumer receives them.
func (e *env) relayNATS(ctx context.Context, warm, win time.Duration) relayResult {
	if err := e.adm.flush(ctx); err != nil {
		return relayResult{err: err}
	}
	js, st, name, subject, done, err := benchStream(ctx, "RELAY")
	if err != nil {
		return relayResult{err: err}
	}
	defer done()
	r := newRecorder(relayJobs * int((warm+win)/time.Second+8))
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		return relayResult{err: err}
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		at := time.Now().UnixNano()
		var msg natsrelay.Message
		if json.Unmarshal(m.Data(), &msg) == nil {
			r.add(rec{job: jobIndex(msg.Job), slot: msg.Slot, at: at})
		}
	})
	if err != nil {
		return relayResult{err: err}
	}
	defer cc.Stop()

	c := e.srv.newClient(nil)
	defer c.Close()
	w, err := worker.New(worker.Config{Store: otredis.New(c, otredis.Options{Prefix: otPrefix}).WorkerStore("onetick"),
		Consumer: "bench-relay", Concurrency: relayConc, Logger: slog.New(e.ot.c)})
	if err != nil {
		return relayResult{err: err}
	}
	for i := range relayJobs {
		p, err := natsrelay.New(natsrelay.Config{JetStream: js, Subject: subject, Stream: name, Prefer: onetick.PreferDuplicate})
		if err == nil {
			err = w.Handle(jobName(i), p, worker.WithStream("relay"), worker.WithPrefer(onetick.PreferDuplicate),
				worker.WithOverlap(worker.OverlapAllow))
		}
		if err != nil {
			return relayResult{err: err}
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	sch, err := startOnetick(e.srv, 0, otOptions{jobs: relayJobsOf(relayJobs, &onetick.Relay{Kind: onetick.RelayNATS}), logs: e.ot.c}, nil)
	if err != nil {
		cancel()
		<-wdone
		return relayResult{err: err}
	}
	from, to := relayWindow(warm, win)
	sch.stop()
	cancel()
	if err := <-wdone; err != nil {
		return relayResult{err: fmt.Errorf("worker.Run: %w", err)}
	}
	return relayOutcome(r, from, to)
}

func (e *env) relaysSection(ctx context.Context) (string, error) {
	warm, win := 3*time.Second, 20*time.Second
	if quick {
		win = 6 * time.Second
	}
	pool, err := pgxPool(ctx)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	pg := pgAdmin{pool: pool}
	defer pg.dropSchemas(context.Background())

	type run struct {
		name string
		res  relayResult
	}
	var runs []run
	progress("relays: native stream (onetick worker), %d jobs", relayJobs)
	nat := e.workerDelay(ctx, relayJobs, relayConc, warm, win)
	runs = append(runs, run{"native stream (onetick worker, Redis)", relayResult{ds: nat.ds, st: nat.st, err: nat.err}})
	progress("relays: asynq, %d jobs", relayJobs)
	runs = append(runs, run{"asynq (same Redis; asynq v0.26.0 Server)", e.relayAsynq(ctx, warm, win)})
	progress("relays: River, %d jobs", relayJobs)
	runs = append(runs, run{"River (same PostgreSQL; River v0.51.2 client)", e.relayRiver(ctx, pg, warm, win)})
	progress("relays: NATS JetStream, %d jobs", relayJobs)
	runs = append(runs, run{"NATS JetStream (worker's relay consumer; JetStream push consumer)", e.relayNATS(ctx, warm, win)})

	var bursts []burstResult
	for i, f := range []func() burstResult{
		func() burstResult { return e.burstNative(ctx) },
		func() burstResult { return e.burstAsynq(ctx) },
		func() burstResult { return e.burstRiver(ctx, pg) },
		func() burstResult { return e.burstNATS(ctx) },
	} {
		progress("relays: burst of %d ticks: %s", relayBurst, runs[i].name)
		bursts = append(bursts, f())
	}

	var b strings.Builder
	b.WriteString("## Relays (issue 21): a 1,000-job fleet per relay\n\n")
	fmt.Fprintf(&b, "One onetick scheduler (one replica, default lease) in this process with %d jobs \"@every 1s\", each relayed through `onetick.Job.Relay` (type/kind `%s`), beside the same fleet on the native stream. The delay is taken on the relay's side: the instant the other system's consumer receives the tick (asynq Server handler, River worker, JetStream consumer callback; onetick worker's handler for the native stream), minus the tick's slot. Consumers' concurrency %d. Slots of a %s window after %s of warm-up; received counts (job, slot) pairs of the window received at least once.\n\n",
		relayJobs, relayType, relayConc, win, warm)
	fmt.Fprintf(&b, "Burst: %d ticks due at once (the %d jobs, %d slots each, two hours old), claimed through the store's `Claim` in calls of %d ticks as a scheduler catching up does; the time from the first claim until the relay's queue holds them all, counted there (asynq's pending list, River's `river_job` rows, the JetStream stream's messages; for the native stream, the claims themselves). asynq and River: the claims write them. NATS: the claims fill the stream while one worker (concurrency %d) runs the relay consumer, publishing each.\n\n",
		relayBurst, relayJobs, relayBurst/relayJobs, relayBurstCall, relayConc)
	b.WriteString("| relay | received / expected | received twice | slot → received p50 / p99 / max | burst of 100,000: all in the queue |\n|---|---|---|---|---|\n")
	for i, r := range runs {
		if r.res.err != nil {
			fmt.Fprintf(&b, "| %s | error: %s | | | %s |\n", r.name, esc(r.res.err.Error()), fmtBurst(bursts[i]))
			continue
		}
		st := r.res.st
		if len(r.res.ds) == 0 {
			fmt.Fprintf(&b, "| %s | 0 / %d | | | %s |\n", r.name, st.expected, fmtBurst(bursts[i]))
			continue
		}
		fmt.Fprintf(&b, "| %s | %d / %d | %d | %s / %s / %s | %s |\n", r.name, st.expected-st.missed, st.expected, st.dups,
			fmtDur(pct(r.res.ds, 50)), fmtDur(pct(r.res.ds, 99)), fmtDur(r.res.ds[len(r.res.ds)-1]), fmtBurst(bursts[i]))
	}
	return b.String(), nil
}

// benchStream connects to nats-server and makes a fresh memory stream
// BENCH_<tag>_<n> on its own subject; done deletes it and disconnects.
func benchStream(ctx context.Context, tag string) (jetstream.JetStream, jetstream.Stream, string, string, func(), error) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, nil, "", "", nil, fmt.Errorf("nats-server on %s: %w", natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, "", "", nil, err
	}
	id := time.Now().UnixNano()
	name, subject := fmt.Sprintf("BENCH_%s_%d", tag, id), fmt.Sprintf("bench%s%d", strings.ToLower(tag), id)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		nc.Close()
		return nil, nil, "", "", nil, err
	}
	return js, st, name, subject, func() { _ = js.DeleteStream(context.Background(), name); nc.Close() }, nil
}
