package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	otredis "github.com/onetick/onetick/redis"
)

// Memory of a sharded fleet: each replica is its own process (this
// binary run with -shard-replica), so its RSS is its own. `onetick run`
// does not take shards: yet (docs/shards.md, plan step 10), so the
// process is the library (onetick.New with Shards) without the daemon's
// configuration layer; the scale part's RSS figures are the daemon's.
//
// The replica's parameters come in the environment (set by the parent):
// BENCH_SHARD_ADDRS (comma-separated primaries: more than one is a
// Cluster), BENCH_SHARD_JOBS, BENCH_SHARDS. It logs JSON on its standard
// error: "bench replica ready" once onetick.New returned (heap after a
// GC), then "bench replica" every 5 s (ticks delivered, shards led, heap).

const (
	msgReady   = "bench replica ready"
	msgReplica = "bench replica"
	// memJobsSchedule spreads each job's one slot an hour over the hour,
	// as the scale part's spread run: a fleet that fires all the time.
	memJobsSchedule = "H H * * * *"
	// memStreamMax bounds each shard's stream (XADD MAXLEN ~).
	memStreamMax = 10_000
)

// shardReplicaMain is the child's main.
func shardReplicaMain(name string) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	addrs := strings.Split(os.Getenv("BENCH_SHARD_ADDRS"), ",")
	n, err1 := strconv.Atoi(os.Getenv("BENCH_SHARD_JOBS"))
	shards, err2 := strconv.Atoi(os.Getenv("BENCH_SHARDS"))
	if err := errors.Join(err1, err2); err != nil || addrs[0] == "" {
		return fmt.Errorf("-shard-replica needs BENCH_SHARD_ADDRS, BENCH_SHARD_JOBS and BENCH_SHARDS: %v", err)
	}
	var c goredis.UniversalClient
	if len(addrs) > 1 {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	} else {
		c = goredis.NewClient(&goredis.Options{Addr: addrs[0]})
	}
	defer c.Close()
	start := time.Now()
	// Each job its own parsed schedule (H hashes its name), as a
	// configuration file yields.
	jobs := make([]onetick.Job, n)
	for i := range jobs {
		job := fmt.Sprintf("t%07d", i)
		sch, err := cron.ParseFor(memJobsSchedule, nil, job)
		if err != nil {
			return err
		}
		jobs[i] = onetick.Job{Name: job, Schedule: sch, Stream: shardStream(job, shards), MaxLen: memStreamMax}
	}
	var ticks atomic.Int64
	s, err := onetick.New(onetick.Config{
		Backend: otredis.New(c, otredis.Options{Prefix: shPrefix}),
		Replica: name, Jobs: jobs, Lease: shLease, Shards: shards, Logger: log,
		Sink: onetick.SinkFunc(func(_ context.Context, t []onetick.TickRecord) error {
			ticks.Add(int64(len(t)))
			return nil
		}),
	})
	if err != nil {
		return err
	}
	jobs = nil
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	log.Info(msgReady, "build", time.Since(start).Round(10*time.Millisecond).String(), "heap_inuse", ms.HeapInuse, "heap_sys", ms.HeapSys)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The heap the last GC found live: HeapInuse also counts garbage not
	// yet collected, up to the GC's goal (GOGC, GOMEMLIMIT).
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			metrics.Read(live)
			led := 0
			if b := s.Balancer(); b != nil {
				led = len(b.Led())
			}
			log.Info(msgReplica, "ticks", ticks.Load(), "led", led, "heap_inuse", ms.HeapInuse, "heap_sys", ms.HeapSys,
				"heap_live", live[0].Value.Uint64())
		}
	}()
	if err := s.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

type replicaMem struct {
	name        string
	build       string // jobs built and onetick.New, by the replica's own clock
	rssReady    int64  // VmRSS once ready (heap collected)
	rss, hwm    int64  // VmRSS and VmHWM at the end of the firing window
	heapReady   int64  // HeapInuse after a GC once ready
	heapInuse   int64  // at its last report
	heapLive    int64  // live after the last GC before its last report
	ticks       int64  // delivered over its whole run
	led         int    // shards led at the end (store's leases)
	warns, errs int
	problems    []string // the messages of its warnings and errors
}

type shardMem struct {
	jobs, shards int
	window       time.Duration // firing observed once settled
	settle       time.Duration // all ready to settled
	replicas     []replicaMem
	availBefore  int64 // MemAvailable before and lowest seen
	availLow     int64
	err          error
}

// memGuard bounds the run on a shared machine: every child is killed when
// one passes guardRSS or the machine's available memory falls below
// guardAvail.
const (
	guardRSS   = 4 << 30
	guardAvail = 4 << 30
)

func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// shardMemoryRun starts replicas processes over t with n jobs in shards
// shards, waits until they are ready and the leaders settled, lets them
// fire for window, and reads each one's memory.
func (e *env) shardMemoryRun(ctx context.Context, t *topology, n, shards, replicas int, window time.Duration) (res shardMem) {
	res = shardMem{jobs: n, shards: shards, window: window, availBefore: memAvailable()}
	var low atomic.Int64
	low.Store(res.availBefore)
	defer func() { res.availLow = low.Load() }()
	if err := t.flush(ctx); err != nil {
		res.err = err
		return res
	}
	bin, err := os.Executable()
	if err != nil {
		res.err = err
		return res
	}
	var ds []*daemon
	defer func() {
		for _, d := range ds {
			d.stop()
		}
	}()
	for r := range replicas {
		name := fmt.Sprintf("m%d", r)
		cmd := exec.Command(bin, "-shard-replica", name)
		cmd.Env = append(os.Environ(), "BENCH_SHARD_ADDRS="+strings.Join(t.addrs, ","),
			"BENCH_SHARD_JOBS="+strconv.Itoa(n), "BENCH_SHARDS="+strconv.Itoa(shards))
		d, err := startProcess(cmd)
		if err != nil {
			res.err = err
			return res
		}
		ds = append(ds, d)
		res.replicas = append(res.replicas, replicaMem{name: name})
	}
	// The guard.
	var tripped atomic.Value
	guardCtx, stopGuard := context.WithCancel(ctx)
	defer stopGuard()
	go func() {
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-guardCtx.Done():
				return
			case <-tk.C:
			}
			avail := memAvailable()
			if avail > 0 && avail < low.Load() {
				low.Store(avail)
			}
			for i, d := range ds {
				rss, _ := d.memory()
				if rss > guardRSS || (avail > 0 && avail < guardAvail) {
					tripped.Store(fmt.Sprintf("memory guard: replica %d at %s RSS, %s available on the machine: every replica killed", i, fmtMB(rss), fmtMB(avail)))
					for _, d := range ds {
						_ = d.cmd.Process.Kill()
					}
					return
				}
			}
		}
	}()
	guardErr := func() error {
		if s, ok := tripped.Load().(string); ok {
			return errors.New(s)
		}
		return nil
	}
	for i, d := range ds {
		l, err := d.waitFor(msgReady, 0, 10*time.Minute)
		if err != nil {
			res.err = errors.Join(guardErr(), err)
			return res
		}
		res.replicas[i].build, _ = l.fields["build"].(string)
		if v, ok := l.fields["heap_inuse"].(float64); ok {
			res.replicas[i].heapReady = int64(v)
		}
	}
	for i, d := range ds {
		res.replicas[i].rssReady, _ = d.memory()
	}
	// Settled: the stores' leases, every shard held, nobody above its
	// fair share, the same for two renew periods.
	root := otredis.New(t.client, otredis.Options{Prefix: shPrefix})
	views := make([]onetick.Backend, shards)
	for i := range views {
		if views[i], err = root.Shard(i, shards); err != nil {
			res.err = err
			return res
		}
	}
	holders := func() (map[string]int, error) {
		h := map[string]int{}
		for _, v := range views {
			li, err := v.Leader(ctx)
			if err != nil {
				return nil, err
			}
			if li.Held {
				h[li.Lease.Holder]++
			}
		}
		return h, nil
	}
	settleStart := time.Now()
	var stableSince time.Time
	var last string
	for {
		if err := guardErr(); err != nil {
			res.err = err
			return res
		}
		h, err := holders()
		if err != nil {
			res.err = err
			return res
		}
		ok, sum := true, 0
		for _, c := range h {
			sum += c
			ok = ok && c <= onetick.FairShare(shards, replicas)
		}
		ok = ok && sum == shards
		switch {
		case !ok:
			stableSince = time.Time{}
		case stableSince.IsZero() || fmt.Sprint(h) != last:
			stableSince = time.Now()
		}
		last = fmt.Sprint(h)
		if !stableSince.IsZero() && time.Since(stableSince) >= 2*shLease.WithDefaults().Renew {
			break
		}
		if time.Since(settleStart) > 3*time.Minute {
			res.err = fmt.Errorf("the shards' leaders did not settle within 3 minutes: %v", h)
			return res
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.settle = time.Since(settleStart)
	time.Sleep(window)
	if err := guardErr(); err != nil {
		res.err = err
		return res
	}
	h, err := holders()
	if err != nil {
		res.err = err
		return res
	}
	for i, d := range ds {
		r := &res.replicas[i]
		r.rss, r.hwm = d.memory()
		r.led = h[r.name]
		d.mu.Lock()
		if ls := d.all[msgReplica]; len(ls) > 0 {
			f := ls[len(ls)-1].fields
			if v, ok := f["ticks"].(float64); ok {
				r.ticks = int64(v)
			}
			if v, ok := f["heap_inuse"].(float64); ok {
				r.heapInuse = int64(v)
			}
			if v, ok := f["heap_live"].(float64); ok {
				r.heapLive = int64(v)
			}
		}
		for msg, ls := range d.all {
			if lv := ls[0].fields["level"]; lv == "WARN" || lv == "ERROR" {
				r.problems = append(r.problems, fmt.Sprintf("%v %q ×%d", lv, msg, len(ls)))
			}
		}
		d.mu.Unlock()
		slices.Sort(r.problems)
		r.warns, r.errs = d.problems()
	}
	return res
}

// memoryOnly: BENCH_SHARDS_MEMORY=only runs the part's memory run alone
// (no bursts), once per shard count of BENCH_SHARDS_MEMORY_SHARDS
// (comma-separated, default 6).
func memoryOnly() bool { return os.Getenv("BENCH_SHARDS_MEMORY") == "only" }

func memoryShardCounts() []int {
	v := os.Getenv("BENCH_SHARDS_MEMORY_SHARDS")
	if v == "" {
		return []int{6}
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// shardMemorySection is the part with BENCH_SHARDS_MEMORY=only.
func (e *env) shardMemorySection(ctx context.Context, cl *topology, loadStart string, started time.Time) string {
	var out strings.Builder
	n := shardMemJobs()
	for _, shards := range memoryShardCounts() {
		progress("shards: memory, %d jobs over 3 replica processes, %d shards, %s", n, shards, cl.name)
		mem := e.shardMemoryRun(ctx, cl, n, shards, 3, 30*time.Second)
		if mem.err != nil {
			progress("shards: memory: %v", mem.err)
		}
		out.WriteString(shardMemMarkdown(mem))
	}
	fmt.Fprintf(&out, "Load average (1, 5, 15 min): %s at the start, %s at the end; %s in all.\n\n", loadStart, loadAvg(), time.Since(started).Round(time.Second))
	return out.String()
}

// shardMemMarkdown is the memory run's section.
func shardMemMarkdown(mem shardMem) string {
	var out strings.Builder
	fmt.Fprintf(&out, "### Memory: %d jobs over 3 replicas, %d shards\n\n", mem.jobs, mem.shards)
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		fmt.Fprintf(&out, "The replicas ran with GOMEMLIMIT=%s (from the harness's environment).\n\n", v)
	}
	fmt.Fprintf(&out, "Each replica its own process (this binary with `-shard-replica`: `onetick.New` with `Shards`, every job `%s` with its own parsed schedule, one stream per shard trimmed to ~%d), on the 3-primary Cluster; RSS from /proc/PID/status once ready (jobs built, heap collected), and after the leaders settled and %s of firing. MemAvailable on the machine before %s, lowest %s.\n\n",
		memJobsSchedule, memStreamMax, mem.window, fmtMB(mem.availBefore), fmtMB(mem.availLow))
	if mem.err != nil {
		fmt.Fprintf(&out, "error: %s\n\n", mem.err)
	}
	if len(mem.replicas) > 0 && mem.err == nil {
		fmt.Fprintf(&out, "Settled %s after every replica was ready.\n\n", fmtSec(mem.settle))
		out.WriteString("| Replica | Jobs built + onetick.New | RSS ready | Go heap in use ready | RSS after firing (peak), per job | Go heap in use after (live at the last GC) | Shards led | Ticks delivered |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range mem.replicas {
			fmt.Fprintf(&out, "| %s | %s | %s | %s | %s (%s), %s | %s (%s) | %d | %d |\n", r.name, r.build, fmtMB(r.rssReady), fmtMB(r.heapReady),
				fmtMB(r.rss), fmtMB(r.hwm), fmtBytes(float64(r.rss)/float64(mem.jobs)), fmtMB(r.heapInuse), fmtMB(r.heapLive), r.led, r.ticks)
		}
		out.WriteString("\n")
	}
	for _, r := range mem.replicas {
		if r.warns+r.errs > 0 {
			fmt.Fprintf(&out, "Replica %s logged %d warnings and %d errors: %s.\n\n", r.name, r.warns, r.errs, strings.Join(r.problems, "; "))
		}
	}
	return out.String()
}
