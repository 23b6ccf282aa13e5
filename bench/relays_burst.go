package main

// The relays part's burst: 100,000 ticks due at once (1,000 jobs, 100
// slots each, long past), claimed through the store's Claim in calls of
// relayBurstCall ticks, as a scheduler catching up claims them; the time
// until all are in the relay's queue, counted there.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/onetick/onetick"
	otpostgres "github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/relay/natsrelay"
	"github.com/onetick/onetick/worker"
)

const (
	relayBurst     = 100_000
	relayBurstCall = 2000
)

// burstResult: claims is the time the claims took; all, the time from the
// first claim until the relay's queue held every tick (0: it never did in
// the time allowed); held is what it held at the end.
type burstResult struct {
	claims, all time.Duration
	held        int64
	err         error
}

// burstClaim claims the burst on be with relay r, then polls count until
// it reaches relayBurst (or 5 minutes pass).
func burstClaim(ctx context.Context, be onetick.Backend, r *onetick.Relay, stream string, count func() (int64, error)) burstResult {
	g, err := be.Acquire(ctx, "bench", 10*time.Minute)
	if err != nil {
		return burstResult{err: err}
	}
	base := onetick.SlotOf(time.Now().Add(-2 * time.Hour).Truncate(time.Second))
	ticks := make([]onetick.Tick, 0, relayBurst)
	for k := range relayBurst / relayJobs {
		for j := range relayJobs {
			ticks = append(ticks, onetick.Tick{Job: jobName(j), Slot: base + onetick.Slot(k*1000), Stream: stream,
				Payload: `{}`, Retention: time.Hour, Relay: r})
		}
	}
	start := time.Now()
	for i := 0; i < len(ticks); i += relayBurstCall {
		if _, err := be.Claim(ctx, g.Lease, ticks[i:min(i+relayBurstCall, len(ticks))]); err != nil {
			return burstResult{err: err}
		}
	}
	res := burstResult{claims: time.Since(start)}
	if count == nil {
		res.all, res.held = res.claims, relayBurst
		return res
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n, err := count()
		if err != nil {
			return burstResult{err: err}
		}
		res.held = n
		if n >= relayBurst {
			res.all = time.Since(start)
			break
		}
	}
	return res
}

func (e *env) burstNative(ctx context.Context) burstResult {
	if err := e.adm.flush(ctx); err != nil {
		return burstResult{err: err}
	}
	c := e.srv.newClient(nil)
	defer c.Close()
	return burstClaim(ctx, otredis.New(c, otredis.Options{Prefix: otPrefix}), nil, "burst", nil)
}

func (e *env) burstAsynq(ctx context.Context) burstResult {
	if err := e.adm.flush(ctx); err != nil {
		return burstResult{err: err}
	}
	c := e.srv.newClient(nil)
	defer c.Close()
	return burstClaim(ctx, otredis.New(c, otredis.Options{Prefix: otPrefix}), &onetick.Relay{Kind: onetick.RelayAsynq, Type: relayType}, "burst",
		func() (int64, error) { return asynqStoreCount(ctx, e.adm.c) })
}

func (e *env) burstRiver(ctx context.Context, pg pgAdmin) burstResult {
	ot, err := pg.freshSchema(ctx, "rburst")
	if err != nil {
		return burstResult{err: err}
	}
	rs, err := pg.freshSchema(ctx, "riverburst")
	if err != nil {
		return burstResult{err: err}
	}
	if err := migrateRiver(ctx, pg.pool, rs); err != nil {
		return burstResult{err: err}
	}
	be, err := otpostgres.Open(ctx, pgURL(), otpostgres.Options{Schema: ot, RiverSchema: rs})
	if err != nil {
		return burstResult{err: err}
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		return burstResult{err: err}
	}
	return burstClaim(ctx, be, &onetick.Relay{Kind: onetick.RelayRiver, Type: relayType}, "burst", func() (int64, error) {
		var n int64
		err := pg.pool.QueryRow(ctx, `SELECT count(*) FROM `+rs+`.river_job`).Scan(&n)
		return n, err
	})
}

// burstNATS claims the burst into the jobs' stream; one worker (the relay
// consumer, concurrency relayConc) publishes it; counted in JetStream.
func (e *env) burstNATS(ctx context.Context) burstResult {
	if err := e.adm.flush(ctx); err != nil {
		return burstResult{err: err}
	}
	js, st, name, subject, done, err := benchStream(ctx, "BURST")
	if err != nil {
		return burstResult{err: err}
	}
	defer done()
	c := e.srv.newClient(nil)
	defer c.Close()
	be := otredis.New(c, otredis.Options{Prefix: otPrefix})
	w, err := worker.New(worker.Config{Store: be.WorkerStore("onetick"), Consumer: "bench-burst", Concurrency: relayConc, Logger: slog.New(e.ot.c)})
	if err != nil {
		return burstResult{err: err}
	}
	for i := range relayJobs {
		p, err := natsrelay.New(natsrelay.Config{JetStream: js, Subject: subject, Stream: name, Prefer: onetick.PreferDuplicate})
		if err == nil {
			err = w.Handle(jobName(i), p, worker.WithStream("burst"), worker.WithPrefer(onetick.PreferDuplicate),
				worker.WithOverlap(worker.OverlapAllow))
		}
		if err != nil {
			return burstResult{err: err}
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	// A nats relay is not InClaim: its ticks reach the store without one.
	res := burstClaim(ctx, be, nil, "burst", func() (int64, error) {
		info, err := st.Info(ctx)
		if err != nil {
			return 0, err
		}
		return int64(info.State.Msgs), nil
	})
	cancel()
	if err := <-wdone; err != nil && res.err == nil {
		res.err = fmt.Errorf("worker.Run: %w", err)
	}
	return res
}

func fmtBurst(r burstResult) string {
	if r.err != nil {
		return "error: " + esc(r.err.Error())
	}
	if r.all == 0 {
		return fmt.Sprintf("claims %s; only %d of %d in the queue after 5 min", fmtSec(r.claims), r.held, relayBurst)
	}
	return fmt.Sprintf("%s (%s ticks/s); claims %s", fmtSec(r.all), fmtRate(float64(relayBurst)/r.all.Seconds()), fmtSec(r.claims))
}
