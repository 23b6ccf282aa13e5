package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	otredis "github.com/onetick/onetick/redis"
)

const otPrefix = "bench"

// gatedBackend wraps a backend (Redis or PostgreSQL): while its gate is paused every
// store call of the replica blocks (the replica is "stopped"); a claim that
// was held back is then sent anyway, as if it had left the process just
// before the stall, so the store's fence decides. With noRelease set,
// Release does nothing (a crash: the lease is left to expire).
type gatedBackend struct {
	onetick.Backend
	g         *gate
	noRelease atomic.Bool
	// claims held back by a pause, and how many of them the store fenced
	heldClaims, fencedClaims, fencedTicks atomic.Int64
}

func (b *gatedBackend) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	b.g.wait()
	return b.Backend.Acquire(ctx, holder, ttl)
}

func (b *gatedBackend) Renew(ctx context.Context, l onetick.Lease, ttl time.Duration) (onetick.Grant, error) {
	b.g.wait()
	return b.Backend.Renew(ctx, l, ttl)
}

func (b *gatedBackend) Release(ctx context.Context, l onetick.Lease) error {
	if b.noRelease.Load() {
		return nil
	}
	b.g.wait()
	return b.Backend.Release(ctx, l)
}

func (b *gatedBackend) LastFired(ctx context.Context, jobs []string) (map[string]onetick.Slot, error) {
	b.g.wait()
	return b.Backend.LastFired(ctx, jobs)
}

func (b *gatedBackend) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	if b.g.wait() {
		b.heldClaims.Add(1)
		res, err := b.Backend.Claim(context.WithoutCancel(ctx), l, ticks)
		if errors.Is(err, onetick.ErrFenced) {
			b.fencedClaims.Add(1)
			b.fencedTicks.Add(int64(len(ticks)))
		}
		return res, err
	}
	return b.Backend.Claim(ctx, l, ticks)
}

// CanRelay passes the store's answer through (onetick.Relayer), so that a
// gated replica may relay its jobs' ticks as the store alone would.
func (b *gatedBackend) CanRelay(ctx context.Context, r onetick.Relay) error {
	rl, ok := b.Backend.(onetick.Relayer)
	if !ok {
		return fmt.Errorf("this store cannot relay ticks to %s", r.Kind)
	}
	return rl.CanRelay(ctx, r)
}

// logCounter counts the warnings and errors onetick logs, by message.
type logCounter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *logCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[r.Level.String()+": "+r.Message]++
	c.mu.Unlock()
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

func (c *logCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for k, v := range c.m {
		parts = append(parts, fmt.Sprintf("%q ×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// otInst is one onetick replica running as a goroutine.
type otInst struct {
	id     int
	g      *gate
	be     *gatedBackend
	s      *onetick.Scheduler
	client *goredis.Client
	cancel context.CancelFunc
	done   chan struct{}
	leadAt atomic.Int64 // Unix ns when this replica last became leader
}

func (i *otInst) stop() {
	i.cancel()
	<-i.done
	_ = i.client.Close()
}

func (i *otInst) gate() *gate { return i.g }

type otOptions struct {
	jobs     []onetick.Job
	lease    onetick.LeaseConfig
	rt       *atomic.Int64 // round-trip counter, may be nil
	logs     *logCounter
	onLeader func(id int, l onetick.Lease)
}

// everyJobs returns n jobs "@every <period>" named j000000..., each with
// its own parsed schedule, as a configuration file yields.
func everyJobs(n int, period string) []onetick.Job {
	jobs := make([]onetick.Job, n)
	for i := range jobs {
		sch, err := cron.Parse("@every "+period, nil)
		if err != nil {
			panic(err)
		}
		jobs[i] = onetick.Job{Name: jobName(i), Schedule: sch}
	}
	return jobs
}

func startOnetick(srv *redisServer, id int, o otOptions, r *recorder) (*otInst, error) {
	c := srv.newClient(o.rt)
	be := &gatedBackend{Backend: otredis.New(c, otredis.Options{Prefix: otPrefix}), g: &gate{}}
	inst := &otInst{id: id, g: be.g, be: be, client: c, done: make(chan struct{})}
	logs := o.logs
	if logs == nil {
		logs = &logCounter{}
	}
	cfg := onetick.Config{
		Backend: be,
		Replica: "r" + strconv.Itoa(id),
		Jobs:    o.jobs,
		Lease:   o.lease,
		Logger:  slog.New(logs),
		OnNewLeader: func(l onetick.Lease) {
			if l.Holder == "r"+strconv.Itoa(id) {
				inst.leadAt.Store(time.Now().UnixNano())
			}
			if o.onLeader != nil {
				o.onLeader(id, l)
			}
		},
	}
	cfg.Sink = recordingSink(r, id)
	s, err := onetick.New(cfg)
	if err != nil {
		_ = c.Close()
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

// runEnded counts a scheduler's Run that ended other than by its context
// (a job refused at start, a relay the store cannot hand ticks to) among
// the errors logged, so the run's output shows it.
func runEnded(ctx context.Context, err error, logs *logCounter) {
	if err != nil && ctx.Err() == nil {
		slog.New(logs).Error("bench: scheduler Run ended early: " + err.Error())
	}
}

// otStoreRecs reads every job's stream: the store's own record of what was
// enqueued (at = the entry id's millisecond).
func otStoreRecs(ctx context.Context, c *goredis.Client, n int) ([]rec, error) {
	var out []rec
	for base := 0; base < n; base += 500 {
		p := c.Pipeline()
		cmds := make([]*goredis.XMessageSliceCmd, 0, 500)
		for j := base; j < min(base+500, n); j++ {
			cmds = append(cmds, p.XRange(ctx, "onetick:stream:"+jobName(j), "-", "+"))
		}
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, err
		}
		for k, cmd := range cmds {
			msgs, err := cmd.Result()
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				slot, _ := strconv.ParseInt(m.Values["slot"].(string), 10, 64)
				idms, _ := strconv.ParseInt(strings.SplitN(m.ID, "-", 2)[0], 10, 64)
				rep, _ := m.Values["replica"].(string)
				inst, _ := strconv.Atoi(strings.TrimPrefix(rep, "r"))
				out = append(out, rec{job: int32(base + k), inst: int32(inst), slot: slot, at: idms * int64(time.Millisecond)})
			}
		}
	}
	return out, nil
}

// recordingSink records each tick replica id claimed in r when the sink
// receives it; nil when r is nil.
func recordingSink(r *recorder, id int) onetick.Sink {
	if r == nil {
		return nil
	}
	return onetick.SinkFunc(func(_ context.Context, ticks []onetick.TickRecord) error {
		now := time.Now().UnixNano()
		xs := make([]rec, len(ticks))
		for k, t := range ticks {
			xs[k] = rec{job: jobIndex(t.Job), inst: int32(id), slot: int64(t.Slot), at: now}
		}
		r.addBatch(xs)
		return nil
	})
}
