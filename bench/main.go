// Command bench runs onetick side by side with two widely used Go
// schedulers on one redis-server and prints one markdown table (also
// written to RESULTS.md):
//
//   - github.com/hibiken/asynq's Scheduler, several instances as users run
//     it (no leader election: each instance enqueues);
//   - github.com/go-co-op/gocron/v2 with a Redis Locker, and with a Redis
//     Elector.
//
// It lives in its own module so that the main module never depends on the
// baselines. Run it with `make bench` or `cd bench && go run .`; it needs
// redis-server on PATH and takes a few minutes. BENCH_QUICK=1 runs a
// shortened version (for development; its figures are not for quoting).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

var quick = os.Getenv("BENCH_QUICK") != ""

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func main() {
	only := flag.String("only", "", `run one part only: "schedulers", "workers", "scale", "postgres", "ledger", "etcd", "relays", "relays-faults" or "shards" (results in RESULTS-<part>.md)`)
	shardReplica := flag.String("shard-replica", "", "internal: run as the named replica of the shards part's memory run (its parameters in BENCH_SHARD_*)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of each worker-throughput run to `prefix`-<system>-c<concurrency>.pprof")
	flag.Parse()
	if *shardReplica != "" {
		if err := shardReplicaMain(*shardReplica); err != nil {
			fmt.Fprintln(os.Stderr, "bench -shard-replica:", err)
			os.Exit(1)
		}
		return
	}
	switch *only {
	case "", "schedulers", "workers", "scale", "postgres", "ledger", "etcd", "relays", "relays-faults", "shards":
	default:
		fmt.Fprintf(os.Stderr, "bench: -only must be schedulers, workers, scale, postgres, ledger, etcd, relays, relays-faults or shards, got %q\n", *only)
		os.Exit(2)
	}
	if err := run(*only, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(only, cpuprofile string) error {
	started := time.Now()
	loadBefore := loadAvg()
	ctx := context.Background()
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.Stop()
	// Do not leave redis-server behind when interrupted.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		srv.Stop()
		os.Exit(130)
	}()
	adm := admin{c: goredis.NewClient(&goredis.Options{Addr: srv.Addr()})}
	defer adm.c.Close()
	e := &env{srv: srv, adm: adm, ot: otLogs{c: &logCounter{}}}
	systems := e.systems()

	progress("timer and round-trip floor")
	floor := measureFloor(ctx, adm)

	var sched, workers, scale string
	if only == "" || only == "schedulers" {
		sched = e.schedulerSection(ctx, systems, started)
	}
	if only == "" || only == "workers" {
		workers = e.workersSection(ctx, cpuprofile)
	}
	if only == "postgres" { // not in a full run: it needs PostgreSQL
		if sched, err = e.postgresSection(ctx); err != nil {
			return err
		}
	}
	if only == "ledger" { // not in a full run: it needs PostgreSQL
		if sched, err = e.ledgerSection(ctx); err != nil {
			return err
		}
	}
	if only == "etcd" { // not in a full run: it needs etcd and PostgreSQL
		if sched, err = e.etcdSection(ctx); err != nil {
			return err
		}
	}
	if only == "relays" { // not in a full run: it needs PostgreSQL and nats-server
		if sched, err = e.relaysSection(ctx); err != nil {
			return err
		}
	}
	if only == "relays-faults" { // not in a full run: it needs PostgreSQL
		if sched, err = e.relaysFaultsSection(ctx); err != nil {
			return err
		}
	}
	if only == "shards" { // not in a full run: about five minutes and up to 4 GB of memory
		if sched, err = e.shardsSection(ctx); err != nil {
			return err
		}
	}
	if only == "" || only == "scale" {
		scale = e.scaleSection(ctx)
	}

	// Output.
	var out strings.Builder
	fmt.Fprintf(&out, "# onetick side-by-side benchmark\n\n")
	fmt.Fprintf(&out, "Machine: %s, runtime.NumCPU=%d, %s/%s, %s; redis-server %s (one server, all systems in turn, FLUSHALL between scenarios; every instance an in-process goroutine). onetick at %s. Run %s, %s in total%s.\n\n",
		cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), adm.version(ctx), gitRev(),
		started.UTC().Format("2006-01-02 15:04 UTC"), time.Since(started).Round(time.Second), map[bool]string{true: " (BENCH_QUICK: shortened, not for quoting)", false: ""}[quick])
	fmt.Fprintf(&out, "Floor on this machine, 5 samples at whole seconds after 1 s idle: Go timer lateness p50 %s (max %s); first PING round trip after the idle p50 %s (max %s), the next one p50 %s. Every tick-delay figure below includes this wake-up cost.\n\n",
		fmtDur(pct(floor.timer, 50)), fmtDur(pct(floor.timer, 100)), fmtDur(pct(floor.first, 50)), fmtDur(pct(floor.first, 100)), fmtDur(pct(floor.second, 50)))
	fmt.Fprintf(&out, "Load average (1, 5, 15 min) of the machine at the start %s, at the end %s: other work on a shared machine shows here, and inflates every figure.\n\n", loadBefore, loadAvg())
	out.WriteString(sched)
	if workers != "" {
		if sched != "" {
			out.WriteString("\n")
		}
		out.WriteString(workers)
	}
	if scale != "" {
		out.WriteString("\n" + scale)
	}
	if s := e.ot.c.String(); s != "" {
		fmt.Fprintf(&out, "\nonetick warnings and errors logged over the whole run (schedulers and workers): %s.\n", s)
	}
	file := "RESULTS.md"
	if only != "" {
		file = "RESULTS-" + only + ".md" // a partial run does not replace a full one
	}
	fmt.Print(out.String())
	if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
		return err
	}
	progress("done in %s; wrote %s", time.Since(started).Round(time.Second), file)
	return nil
}

// schedulerSection runs the scheduler scenarios (onetick side by side with
// asynq's Scheduler and gocron) and returns their table and notes.
func (e *env) schedulerSection(ctx context.Context, systems []system, started time.Time) string {
	t := &table{title: map[string]string{}}
	for _, s := range systems {
		t.cols = append(t.cols, s.key)
		t.title[s.key] = s.title
	}
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }

	// 1. Rolling deploy.
	rDup := t.add("Rolling deploy: duplicate (job, slot)", fmt.Sprintf(
		"%d instances, %d jobs every 1 s, TTL %s; each instance replaced in turn (new one started, old one stopped 1 s later, 1 s pause); slots of the whole run", dupInstances, dupJobs, dupTTL))
	rMiss := t.add("Rolling deploy: missed (job, slot)", "job-slots in the window that nobody enqueued / expected")
	for _, s := range systems {
		progress("rolling deploy: %s", s.title)
		res := e.scenarioRolling(ctx, s)
		if res.err != nil {
			rDup.text(s.key, "error: %v", res.err)
			continue
		}
		dupCell(rDup, s.key, res, res.st.dups)
		rMiss.set(s.key, cell{text: fmt.Sprintf("%d / %d", res.st.missed, res.st.expected), vals: []float64{float64(res.st.missed)}})
		crossCheck(note, "rolling deploy", s, res)
	}

	// 2. Pause.
	pDup := t.add("Pause: duplicate (job, slot)", fmt.Sprintf(
		"%d instances, %d jobs every 1 s, TTL %s; the leader (asynq, gocron Locker: instance 0) stalls %s: every Redis call and enqueue it makes blocks; slot = the scheduled second", dupInstances, dupJobs, dupTTL, 2*dupTTL))
	pSec := t.add("Pause: duplicate (job, enqueue second)", "the same, counting two enqueues of one job in the same wall-clock second (slot = enqueue instant truncated to the period) as a duplicate; onetick's catch-up of a slot missed during the takeover lands in the same second as the next slot and counts here although the two slots differ")
	pStale := t.add("Pause: stale enqueues accepted", fmt.Sprintf("enqueues that reached Redis more than the TTL (%s) after their slot: writes by an instance whose lease or lock had expired", dupTTL))
	pMiss := t.add("Pause: missed (job, slot)", "job-slots in the window that nobody enqueued / expected")
	pFence := t.add("Pause: stalled claims refused by the store", "onetick: claims held back by the stall and sent afterwards, refused by the store's epoch fence (ticks in them)")
	for _, s := range systems {
		progress("pause: %s", s.title)
		res := e.scenarioPause(ctx, s, true)
		if res.err != nil {
			pDup.text(s.key, "error: %v", res.err)
			continue
		}
		dupCell(pDup, s.key, res, res.st.dups)
		pSec.set(s.key, cell{text: fmt.Sprint(res.st.dupSecond), vals: []float64{float64(res.st.dupSecond)}})
		pStale.set(s.key, cell{text: fmt.Sprint(res.st.stale), vals: []float64{float64(res.st.stale)}})
		pMiss.set(s.key, cell{text: fmt.Sprintf("%d / %d", res.st.missed, res.st.expected), vals: []float64{float64(res.st.missed)}})
		if s.key == "onetick" {
			pFence.text(s.key, "%d of %d (%d ticks)", res.fenced, res.held, res.fencedTicks)
		} else {
			pFence.text(s.key, "n/a: no store-side fence")
		}
		crossCheck(note, "pause", s, res)
	}

	// 3. Tick delay, commands and round trips.
	var delayRows = map[int]*row{}
	var cmdRow, rtRow *row
	for _, n := range []int{1, 1000} {
		delayRows[n] = t.add(fmt.Sprintf("Tick delay p50 / p99, %d job(s) due each second", n),
			fmt.Sprintf("one instance, default TTL (onetick, gocron Elector 15 s; Locker 8 s); enqueue instant (the enqueue call returned) − scheduled slot; %s after 2 s warm-up", map[bool]string{true: "10 slots (10 samples: p99 is the maximum)", false: "4 slots (4000 samples)"}[n == 1]))
	}
	cmdRow = t.add("Redis commands per tick (1000 jobs)", "INFO commandstats delta over 4 s (every command, including those inside Lua scripts; lease renewals and heartbeats included) / ticks enqueued meanwhile")
	rtRow = t.add("Client round trips per tick (1000 jobs)", "go-redis hook on the instance's client: commands sent outside a pipeline + pipelines, / ticks")
	for _, n := range []int{1, 1000} {
		for _, s := range systems {
			progress("tick delay, %d jobs: %s", n, s.title)
			res := e.scenarioDelay(ctx, s, n)
			r := delayRows[n]
			if res.err != nil {
				r.text(s.key, "error: %v", res.err)
				continue
			}
			if len(res.ds) == 0 {
				r.text(s.key, "no tick enqueued")
				continue
			}
			p50, p99 := pct(res.ds, 50), pct(res.ds, 99)
			r.set(s.key, cell{text: fmtDur(p50) + " / " + fmtDur(p99), vals: []float64{p50.Seconds(), p99.Seconds()}})
			if n == 1000 {
				cmdRow.set(s.key, cell{text: fmt.Sprintf("%.2f", res.cmdsPerTick), vals: []float64{res.cmdsPerTick}})
				rtRow.set(s.key, cell{text: fmt.Sprintf("%.3f", res.rtPerTick), vals: []float64{res.rtPerTick}})
			}
			if res.store != int64(res.total) {
				note("Tick delay (%d jobs), %s: the harness saw %d enqueues, Redis holds %d.", n, s.title, res.total, res.store)
			}
		}
	}

	// 4. 100,000 jobs: onetick.
	bigN := 100_000
	bigRun := 8 * time.Second
	if quick {
		bigN, bigRun = 20_000, 5*time.Second
	}
	progress("onetick with %d jobs due each second", bigN)
	big := e.scenarioBig(ctx, bigN, bigRun)
	rBigDelay := t.add(fmt.Sprintf("Tick delay p50 / p99, %d jobs due each second", bigN),
		fmt.Sprintf("onetick only: one replica, %d jobs \"@every 1s\", default lease, slots after the first over %s", bigN, bigRun))
	rThr := t.add(fmt.Sprintf("Throughput, %d jobs due at once (ticks/s)", bigN),
		"enqueued ticks of the first slot / (last enqueue − slot); onetick: claimed by one scheduler (Lua claim, 2000 per call); asynq: \"@every 5s\" entries; gocron: \"*/5 * * * * *\" jobs, one instance")
	if big.err != nil {
		rBigDelay.text("onetick", "error: %v", big.err)
		rThr.text("onetick", "error: %v", big.err)
	} else {
		p50, p99 := pct(big.ds, 50), pct(big.ds, 99)
		rBigDelay.text("onetick", "%s / %s", fmtDur(p50), fmtDur(p99))
		rThr.set("onetick", cell{text: fmt.Sprintf("%.0f (%d in %s; first claim after %s)", big.thr, big.firstCount, fmtDur(big.firstSpan), fmtDur(big.firstFirst)), vals: []float64{big.thr}})
		var spans []string
		for _, sl := range big.slots {
			spans = append(spans, fmt.Sprintf("%s: %d in %s", time.UnixMilli(sl.slot).UTC().Format("15:04:05"), sl.count, fmtDur(sl.span)))
		}
		note("onetick, %d jobs every second: building the jobs and onetick.New took %s; first slot %s: %d ticks, the last %s after the slot; later slots (ticks, slot → last claim): %s.",
			bigN, fmtDur(big.setup), time.UnixMilli(big.firstSlot).UTC().Format("15:04:05"), big.firstCount, fmtDur(big.firstSpan), strings.Join(spans, "; "))
	}
	for _, key := range []string{"asynq", "elector", "locker"} {
		if time.Since(started) > 6*time.Minute {
			rThr.text(key, "not run: time budget")
			continue
		}
		n := bigN
		progress("throughput, %d due at once: %s", n, key)
		res := e.baselineThroughput(ctx, key, n, 45*time.Second)
		if res.err != nil {
			rThr.text(key, "error: %v", res.err)
			continue
		}
		rThr.set(key, cell{text: fmt.Sprintf("%.0f (%d in %s)", res.thr, res.count, fmtDur(res.span)), vals: []float64{res.thr}})
		note("Throughput, %s: registering %d entries and starting took %s; shutting down after the slot took %s.", t.title[key], n, fmtDur(res.setup), fmtDur(res.stopped))
		if res.count < n {
			note("Throughput, %s: only %d of %d enqueued for the first slot before the next was due; the figure is that count over its span.", t.title[key], res.count, n)
		}
	}

	// 5. Handover and takeover (onetick).
	rounds := 20
	if quick {
		rounds = 5
	}
	rHand := t.add("Handover latency p50 / p99 (graceful release)", fmt.Sprintf("onetick: %d rounds, TTL 1 s: leader's Run cancelled (it releases) → standby leads (OnNewLeader)", rounds))
	rTake := t.add("Takeover latency p50 / p99 (crash)", fmt.Sprintf("onetick: %d rounds, TTL 1 s: leader stopped without releasing (Release a no-op) → standby leads; bounded by the lease's remaining TTL", rounds))
	for _, crash := range []bool{false, true} {
		r := rHand
		if crash {
			r = rTake
		}
		progress("onetick lease rounds, crash=%v", crash)
		ds, err := e.leaseRounds(ctx, rounds, time.Second, crash)
		if err != nil {
			r.text("onetick", "error after %d rounds: %v", len(ds), err)
			continue
		}
		ds = sortedCopy(ds)
		r.text("onetick", "%s / %s (max %s)", fmtDur(pct(ds, 50)), fmtDur(pct(ds, 99)), fmtDur(ds[len(ds)-1]))
	}
	for _, r := range []*row{rHand, rTake} {
		r.text("asynq", "n/a: no leader election")
		r.text("locker", "n/a: no leader (lock per run)")
		r.text("elector", "not measured")
	}

	// 6. Memory per job (onetick).
	rMem := t.add("Redis memory per job", fmt.Sprintf("onetick, %d jobs after about %s of firing every second: used_memory delta / jobs (per-job streams with one entry per fire); in brackets MEMORY USAGE of the last-fired hash and tick-record buckets only", bigN, bigRun))
	rHeap := t.add("Go heap per job", "onetick, same run: HeapAlloc after GC with the scheduler running, minus before building the jobs, / jobs; in brackets: the []Job with parsed schedules alone, and what onetick.New retains on top (job state, per-job metric series)")
	if big.err == nil {
		rMem.text("onetick", "%s (%s)", fmtBytes(big.redisPerJob), fmtBytes(big.statePerJob))
		rHeap.text("onetick", "%s (config %s, onetick.New %s)", fmtBytes(big.heapPerJob), fmtBytes(big.cfgPerJob), fmtBytes(big.newPerJob))
		rCmdBig := big.cmdsPerTick
		note("onetick, %d jobs: %.2f Redis commands and %.4f round trips per tick over the run (%d ticks in all). One job's stream (%d entries) takes %s in Redis (MEMORY USAGE): with the default one stream per job, streams dominate Redis memory per job. Go heap was read while claims were in flight (at 100,000 due each second the scheduler never idles), so it includes one slot's in-flight ticks.", bigN, rCmdBig, big.rtPerTick, big.ticks, big.streamLen, fmtBytes(float64(big.streamBytes)))
	}
	for _, r := range []*row{rMem, rHeap} {
		for _, k := range []string{"asynq", "locker", "elector"} {
			r.text(k, "not measured")
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "Each baseline figure is followed by its ratio **baseline / onetick** in brackets (for two figures, one ratio each): above 1 the baseline's number is larger — worse for duplicates, delays, commands and round trips, better for throughput. ∞: onetick's figure is 0 and the baseline's is not; =: both 0.\n\n")
	out.WriteString(t.markdown())
	out.WriteString("\nNotes:\n\n")
	base := []string{
		"Slots: onetick's ticks carry their slot. asynq tasks carry none: a firing's slot is the instant asynq's cron called PreEnqueueFunc, truncated to the second; its enqueue instant is when PostEnqueueFunc saw the enqueue succeed. gocron: the slot is the instant gocron started the job run, truncated to the second; the run appends an entry to a per-job Redis stream (the enqueue).",
		"asynq: NewScheduler with a RedisClientOpt in the duplicate scenarios; NewSchedulerFromRedisClient (same code path, the harness's client) where round trips are counted. Every instance enqueues every entry, by design: the duplicate counts are that design measured.",
		"gocron: jobs are CronJob(\"* * * * * *\", true) so every instance fires on whole seconds. github.com/go-co-op/gocron-redis-lock/v2 is not served by the module proxy reachable here, so the Locker is a minimal equivalent written in bench/sys_gocron.go of what it does with the options in its README (redsync: SET NX PX with expiry 8 s by default, WithTries(1); compare-and-delete on Unlock after the run); the Elector is the common hand-written one (one script: keep the key with PEXPIRE if ours, else SET NX PX) called by gocron before every run, and the harness deletes the key after Shutdown (gocron's Elector has no release hook).",
		"Pause: in-process instances cannot be SIGSTOPped, so the stalled instance's store calls block in a wrapper (onetick: a Backend whose every call blocks; a claim held back is sent afterwards with a fresh context, as if it had left the process just before the stall; baselines: Lock/IsLeader/PreEnqueueFunc/job body block before touching Redis).",
		"Round trips: a go-redis Script.Run counts one EVALSHA (plus one EVAL the first time a script is loaded).",
	}
	for _, n := range append(base, notes...) {
		out.WriteString("- " + n + "\n")
	}
	return out.String()
}

type floorResult struct{ timer, first, second []time.Duration }

// measureFloor samples what any scheduler pays at a whole second on this
// machine: how late a Go timer fires, and the first Redis round trip after
// a second of idleness (both the process and redis-server wake up).
func measureFloor(ctx context.Context, adm admin) floorResult {
	var f floorResult
	for range 5 {
		next := time.Now().Truncate(time.Second).Add(time.Second)
		tm := time.NewTimer(time.Until(next))
		<-tm.C
		t0 := time.Now()
		_ = adm.c.Ping(ctx).Err()
		t1 := time.Now()
		_ = adm.c.Ping(ctx).Err()
		t2 := time.Now()
		f.timer = append(f.timer, t0.Sub(next))
		f.first = append(f.first, t1.Sub(t0))
		f.second = append(f.second, t2.Sub(t1))
	}
	f.timer, f.first, f.second = sortedCopy(f.timer), sortedCopy(f.first), sortedCopy(f.second)
	return f
}

func dupCell(r *row, key string, res dupResult, dups int) {
	text := fmt.Sprint(dups)
	if res.st.dupSlots > 0 {
		text += fmt.Sprintf(" (%d job-slots, up to %d×)", res.st.dupSlots, res.st.maxPerSlot)
	}
	if key == "onetick" && res.storeDups != dups {
		text += fmt.Sprintf(" (streams: %d)", res.storeDups)
	}
	r.set(key, cell{text: text, vals: []float64{float64(dups)}})
}

func crossCheck(note func(string, ...any), what string, s system, res dupResult) {
	if s.storeCount != nil && res.store != int64(res.total) {
		note("%s, %s: the harness saw %d enqueues over the run, Redis holds %d.", what, s.title, res.total, res.store)
	}
}

// gitRev describes the main module's checkout: commit, and whether its
// tracked files outside bench/ differ from it.
func gitRev() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown commit"
	}
	rev := "commit " + strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += " with uncommitted changes"
	}
	return rev
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
