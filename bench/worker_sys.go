package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	otredis "github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/worker"
)

// wInst is one onetick worker.Worker running as a goroutine on its own
// client, as a worker process would.
type wInst struct {
	w      *worker.Worker
	client *goredis.Client
	cancel context.CancelFunc
	done   chan error
}

// stop is Run's graceful stop: cancel, then wait for it to return.
func (i *wInst) stop() error {
	i.cancel()
	err := <-i.done
	_ = i.client.Close()
	return err
}

type wOptions struct {
	jobs    []string
	conc    int
	overlap worker.Overlap // "" = the default (skip)
	rt      *atomic.Int64  // round trips of the worker's client, may be nil
	// wrap, if set, wraps the Redis worker store (to count its calls).
	wrap   func(worker.Store) worker.Store
	handle func(*worker.Task)
}

// startWorker starts one worker over the bench's redis-server with a
// handler per job that calls o.handle and succeeds.
func (e *env) startWorker(o wOptions) (*wInst, error) {
	c := e.srv.newClient(o.rt)
	var st worker.Store = otredis.New(c, otredis.Options{Prefix: otPrefix}).WorkerStore("onetick")
	if o.wrap != nil {
		st = o.wrap(st)
	}
	w, err := worker.New(worker.Config{Store: st, Consumer: "bench-worker", Concurrency: o.conc,
		Logger: slog.New(e.ot.c)})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	var opts []worker.JobOption
	if o.overlap != "" {
		opts = append(opts, worker.WithOverlap(o.overlap))
	}
	h := func(_ context.Context, t *worker.Task) error {
		o.handle(t)
		return nil
	}
	for _, j := range o.jobs {
		if err := w.HandleFunc(j, h, opts...); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &wInst{w: w, client: c, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- w.Run(ctx) }()
	return in, nil
}

// opStat is what a worker spent in one kind of store call.
type opStat struct {
	calls int64
	items int64         // deliveries returned (fetch, reclaim) or passed (begin, finish, heartbeat)
	wall  time.Duration // summed wall time of the calls
}

// countingStore wraps a worker store: it counts the calls by operation and
// the done records written, and signals when target (> 0) of them exist
// (the moment the last tick of a throughput run is settled).
type countingStore struct {
	worker.Store
	target int64

	mu   sync.Mutex
	ops  map[string]*opStat
	done atomic.Int64
	at   atomic.Int64 // Unix ns when done reached target
	all  chan struct{}
}

func newCountingStore(s worker.Store, target int) *countingStore {
	return &countingStore{Store: s, target: int64(target), ops: map[string]*opStat{}, all: make(chan struct{})}
}

func (s *countingStore) note(op string, items int, t0 time.Time) {
	d := time.Since(t0)
	s.mu.Lock()
	o := s.ops[op]
	if o == nil {
		o = &opStat{}
		s.ops[op] = o
	}
	o.calls++
	o.items += int64(items)
	o.wall += d
	s.mu.Unlock()
}

func (s *countingStore) snapshot() map[string]opStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]opStat, len(s.ops))
	for k, v := range s.ops {
		out[k] = *v
	}
	return out
}

func (s *countingStore) Fetch(ctx context.Context, consumer string, streams []string, max int, block time.Duration) ([]*worker.Delivery, error) {
	t0 := time.Now()
	ds, err := s.Store.Fetch(ctx, consumer, streams, max, block)
	s.note("fetch", len(ds), t0)
	return ds, err
}

func (s *countingStore) Reclaim(ctx context.Context, consumer string, streams []string, idle time.Duration, max int) ([]*worker.Delivery, error) {
	t0 := time.Now()
	ds, err := s.Store.Reclaim(ctx, consumer, streams, idle, max)
	s.note("reclaim", len(ds), t0)
	return ds, err
}

func (s *countingStore) Begin(ctx context.Context, consumer string, hold time.Duration, starts []worker.Start) (worker.BeginResult, error) {
	t0 := time.Now()
	r, err := s.Store.Begin(ctx, consumer, hold, starts)
	s.note("begin", len(starts), t0)
	return r, err
}

func (s *countingStore) Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	t0 := time.Now()
	l, err := s.Store.Heartbeat(ctx, consumer, live, hold, holds)
	s.note("heartbeat", len(holds), t0)
	return l, err
}

func (s *countingStore) PromoteDue(ctx context.Context, max int) (worker.Promoted, error) {
	t0 := time.Now()
	p, err := s.Store.PromoteDue(ctx, max)
	s.note("promote", p.N, t0)
	return p, err
}

func (s *countingStore) Finish(ctx context.Context, consumer string, fs []worker.Finish) ([]bool, error) {
	t0 := time.Now()
	owned, err := s.Store.Finish(ctx, consumer, fs)
	s.note("finish", len(fs), t0)
	if err == nil {
		var n int64
		for i, f := range fs {
			if f.Kind == worker.FinishDone && i < len(owned) && owned[i] {
				n++
			}
		}
		if n > 0 && s.done.Add(n) >= s.target && s.target > 0 && s.at.CompareAndSwap(0, time.Now().UnixNano()) {
			close(s.all)
		}
	}
	return owned, err
}

// opsSince is what was spent between two snapshots.
func opsSince(before, after map[string]opStat) map[string]opStat {
	out := make(map[string]opStat, len(after))
	for k, a := range after {
		b := before[k]
		out[k] = opStat{calls: a.calls - b.calls, items: a.items - b.items, wall: a.wall - b.wall}
	}
	return out
}

// fmtOps describes store calls over a run of the given span: per
// operation, the calls, items per call and the share of the span its calls
// took (the intake loop makes fetch, begin and reclaim one after the
// other; the settler makes finish concurrently).
func fmtOps(ops map[string]opStat, span time.Duration) string {
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		o := ops[k]
		parts = append(parts, fmt.Sprintf("%s %d calls, %.1f per call, %.0f%% of the time", k, o.calls,
			float64(o.items)/float64(max(o.calls, 1)), 100*o.wall.Seconds()/span.Seconds()))
	}
	return strings.Join(parts, "; ")
}

// procCPU is the CPU time (user + system) this process has used.
func procCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is the CPU time (user + system) redis-server has used, from
// INFO cpu.
func (a admin) redisCPU(ctx context.Context) (time.Duration, error) {
	s, err := a.c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var t float64
	for line := range strings.SplitSeq(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			t += x
		}
	}
	return time.Duration(t * float64(time.Second)), nil
}

// usage is a reading of what Redis and this process have done so far.
type usage struct {
	at       time.Time
	cmds     int64
	redisCPU time.Duration
	procCPU  time.Duration
	rt       int64
	stats    map[string]cmdStat
}

func (e *env) readUsage(ctx context.Context, rt *atomic.Int64) (usage, error) {
	u := usage{at: time.Now(), procCPU: procCPU()}
	var err error
	if u.cmds, err = e.adm.commandCalls(ctx); err != nil {
		return u, err
	}
	if u.stats, err = e.adm.commandStats(ctx); err != nil {
		return u, err
	}
	if u.redisCPU, err = e.adm.redisCPU(ctx); err != nil {
		return u, err
	}
	if rt != nil {
		u.rt = rt.Load()
	}
	return u, nil
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  int64
}

// commandStats reads INFO commandstats by command name.
func (a admin) commandStats(ctx context.Context) (map[string]cmdStat, error) {
	s, err := a.c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]cmdStat{}
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}

// fmtCommands lists the commands Redis ran between two readings, most
// time first, per tick (ticks > 0): calls and microseconds. A script's
// own line (evalsha) includes the time of the commands it ran, which also
// appear on their own lines.
func fmtCommands(before, after map[string]cmdStat, ticks int, top int) string {
	type row struct {
		name string
		d    cmdStat
	}
	var rows []row
	for k, a := range after {
		switch k {
		case "info", "config|resetstat", "flushall", "config":
			continue // the harness's own
		}
		d := cmdStat{calls: a.calls - before[k].calls, usec: a.usec - before[k].usec}
		if d.calls > 0 {
			rows = append(rows, row{k, d})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].d.usec > rows[j].d.usec })
	var parts []string
	for i, r := range rows {
		if i == top {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f calls %.1fµs", strings.ToUpper(r.name),
			float64(r.d.calls)/float64(ticks), float64(r.d.usec)/float64(ticks)))
	}
	return strings.Join(parts, ", ")
}
