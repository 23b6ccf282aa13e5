package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onetick/onetick"
	otredis "github.com/onetick/onetick/redis"
)

// The "scale" part (issue 11): a million jobs on one replica and one
// redis-server. Three runs of the daemon as a real process, each on an
// empty Redis:
//
//  1. from the file: 1M jobs "0 * * * * *" on one shared stream: start-up,
//     RSS, two minute bursts (enqueue span, tick delay), Redis memory;
//  2. from the store: the same jobs applied with `onetick jobs apply`,
//     the daemon started with an empty file; then one job's schedule
//     changed while the fleet runs;
//  3. spread: 1M jobs "H H * * * *" from the file: tick delay over a
//     minute of firing.
//
// Before them, the claim reference: the backend's Claim alone, in batches,
// on the same redis-server, which bounds what the whole scheduler can do.

func scaleJobs() int {
	if quick {
		return 100_000
	}
	return 1_000_000
}

const scaleStream = "onetick:stream:shared"

type burst struct {
	redisPerTick  time.Duration // Redis's time in scripts during the burst / ticks
	slot          time.Time
	count         int           // entries of the slot
	distinct      int           // distinct job names among them
	span          time.Duration // last entry's time - slot
	p50, p99, max time.Duration
	err           error
}

type scaleFile struct {
	startup       time.Duration // process start -> "firing" logged
	parsed        time.Duration // process start -> "onetick started" (file read, jobs built)
	leader        time.Duration // process start -> "became leader"
	readyIn       string        // the leader's own figure: lease to firing loop
	rssIdle, hwm  int64         // after start-up, before the first burst
	rssAfter      int64         // after the bursts
	hwmAfter      int64
	cpuStartup    time.Duration
	bursts        []burst
	redisPerJob   float64
	redisBreak    string
	warns, errors int
	err           error
}

// scaleSection runs the scale part and returns its markdown.
func (e *env) scaleSection(ctx context.Context) string {
	n := scaleJobs()
	dir, err := os.MkdirTemp("", "onetick-scale-")
	if err != nil {
		return "## Scale\n\nerror: " + err.Error() + "\n"
	}
	defer os.RemoveAll(dir)
	var out strings.Builder
	fmt.Fprintf(&out, "## Scale: a million jobs\n\n")
	started := time.Now()
	bin, err := buildOnetick(dir)
	if err != nil {
		return out.String() + "error: " + err.Error() + "\n"
	}
	url := e.srv.URL()

	progress("scale: claim reference")
	ref := e.claimReference(ctx)

	progress("scale: writing files of %d jobs", n)
	fileCfg := filepath.Join(dir, "file.yaml")
	if err := writeJobsFile(fileCfg, baseConfig(url), n, "0 * * * * *", scaleStream); err != nil {
		return out.String() + "error: " + err.Error() + "\n"
	}
	loadStart := loadAvg()

	progress("scale: %d jobs from the file", n)
	fr := e.scaleFromFile(ctx, bin, fileCfg, n, 2)

	progress("scale: %d jobs from the store", n)
	sr, ch := e.scaleFromStore(ctx, bin, dir, url, n)

	progress("scale: %d jobs spread with H H * * * *", n)
	hr := e.scaleSpread(ctx, bin, dir, url, n)
	loadEnd := loadAvg()

	fmt.Fprintf(&out, "%d jobs on one replica (the daemon, `onetick run`, as its own process, role scheduler) and one redis-server; an empty Redis for each run. Load average at the start %s, at the end %s; the part took %s.\n\n",
		n, loadStart, loadEnd, time.Since(started).Round(time.Second))
	best := ref.best()
	fmt.Fprintf(&out, "Claim reference (the backend's Claim alone, in this process, on the same redis-server, one stream; as redis BenchmarkClaim, the same 10,000 jobs (20,000 at depth 2) claimed again and again for %s per batch size and depth): %s. Best: %s ticks/s. At scale (each of the %d jobs claimed once for one slot, as in the burst): %s.\n\n",
		ref.dur, ref.String(), fmtRate(best), n, strings.Join(ref.atScale, ", "))

	t := &table{title: map[string]string{"file": "from the file", "store": "from the store", "spread": "spread (H H * * * *)"}, cols: []string{"file", "store", "spread"}}
	rStart := t.add("Start-up", "process start to the leader's firing loop ready (target ≤ 10 s); in brackets: file read and jobs built / lease acquired")
	rRSS := t.add("RSS of the replica", "VmRSS 2 s after start-up, before the first burst, and / jobs; in brackets the peak (VmHWM) by then and over the whole run (target ≤ 1 GB, ≤ 1 KiB per job)")
	rRSSAfter := t.add("RSS after the bursts", "VmRSS after the measured bursts (or minute of firing)")
	rBurst := t.add("Burst", "all jobs due at second 0: last tick enqueued after the slot (target ≤ 6 s), ticks/s, and the ratio to the best claim reference (target ≥ 85 %); in brackets to the best at-scale reference")
	rDelay := t.add("Tick delay", "stream entry time - slot: p50 / p99 / max (spread target: p99 ≤ 50 ms)")
	rMem := t.add("Redis memory per job", "used_memory delta / jobs from the daemon's start to after the first burst (target ≤ 300 B; from the store the job definitions were written before, so they are not in the delta); in brackets MEMORY USAGE of the last-fired hash, the shared stream, the tick records (and for the store, the job definitions)")
	for key, r := range map[string]*scaleFile{"file": fr, "store": sr, "spread": hr} {
		if r.err != nil {
			rStart.text(key, "error: %v", r.err)
		}
		if r.startup == 0 {
			continue
		}
		rStart.text(key, "%s (%s / %s)", fmtSec(r.startup), fmtSec(r.parsed), fmtSec(r.leader))
		rRSS.text(key, "%s, %s/job (peak %s, %s)", fmtMB(r.rssIdle), fmtBytes(float64(r.rssIdle)/float64(n)), fmtMB(r.hwm), fmtMB(r.hwmAfter))
		rRSSAfter.text(key, "%s", fmtMB(r.rssAfter))
		var bs, ds []string
		for i, b := range r.bursts {
			if b.err != nil {
				bs = append(bs, fmt.Sprintf("burst %d: %v", i+1, b.err))
				continue
			}
			if key == "spread" {
				ds = append(ds, fmt.Sprintf("%s / %s / %s (%d ticks over %s)", fmtDur(b.p50), fmtDur(b.p99), fmtDur(b.max), b.count, spreadWindow))
				continue
			}
			rate := float64(b.count) / b.span.Seconds()
			bs = append(bs, fmt.Sprintf("%d: %d ticks (%d jobs) in %s, %s/s, %.0f %% (%.0f %% of at scale); Redis in scripts %s per tick", i+1, b.count, b.distinct, fmtSec(b.span), fmtRate(rate), 100*rate/best, 100*rate/ref.bestAtScale, fmtDur(b.redisPerTick)))
			ds = append(ds, fmt.Sprintf("%d: %s / %s / %s", i+1, fmtDur(b.p50), fmtDur(b.p99), fmtDur(b.max)))
		}
		if len(bs) > 0 {
			rBurst.text(key, "%s", strings.Join(bs, "; "))
		}
		if len(ds) > 0 {
			rDelay.text(key, "%s", strings.Join(ds, "; "))
		}
		if r.redisPerJob > 0 {
			rMem.text(key, "%s (%s)", fmtBytes(r.redisPerJob), r.redisBreak)
		}
	}
	out.WriteString(t.markdown())
	out.WriteString("\n")
	if ch.err != nil {
		fmt.Fprintf(&out, "Schedule change on the running fleet (from the store): error: %v\n\n", ch.err)
	} else {
		fmt.Fprintf(&out, "Schedule change on the running fleet of %d jobs from the store: `onetick jobs apply` of one job's new schedule (`* * * * * *`, its own set and stream) took %s; the leader logged the change %s after the apply returned (it reads every stored job again), and enqueued the job's first new slot %s after the apply returned (that tick %s after its slot).\n\n",
			n, fmtSec(ch.apply), fmtSec(ch.applied), fmtSec(ch.fired), fmtDur(ch.firstDelay))
	}
	fmt.Fprintf(&out, "Store start-up: `onetick jobs apply` of the %d jobs, as %d sets of at most %d, took %s in all before the daemon started (not counted in its start-up).\n\n", n, ch.sets, storeSet, fmtSec(ch.applyAll))
	for key, r := range map[string]*scaleFile{"file": fr, "store": sr, "spread": hr} {
		if r.warns+r.errors > 0 {
			fmt.Fprintf(&out, "The daemon %s logged %d warnings and %d errors.\n\n", t.title[key], r.warns, r.errors)
		}
	}
	return out.String()
}

// runFleet starts the daemon, waits for its firing loop, reads its
// memory, and measures bursts at the next minute boundaries.
func (e *env) runFleet(ctx context.Context, bin, cfg string, n, bursts int, r *scaleFile) *daemon {
	if bursts > 0 {
		// Start just after a minute begins, so that the daemon's first
		// burst is the first one measured (and the memory delta holds one
		// burst's entries and records).
		if now := time.Now(); now.Second() > 2 {
			sleepUntil(now.Truncate(time.Minute).Add(time.Minute + time.Second))
		}
	}
	before, err := e.adm.usedMemory(ctx)
	if err != nil {
		r.err = err
		return nil
	}
	d, err := startDaemon(bin, cfg)
	if err != nil {
		r.err = err
		return nil
	}
	ready, err := d.waitFor("firing", 0, 3*time.Minute)
	if err != nil {
		r.err = err
		return d
	}
	r.startup = ready.at.Sub(d.started)
	if l, err := d.waitFor("onetick started", 0, 0); err == nil {
		r.parsed = l.at.Sub(d.started)
	}
	if l, err := d.waitFor("became leader", 0, 0); err == nil {
		r.leader = l.at.Sub(d.started)
	}
	r.readyIn = fmt.Sprint(ready.fields["ready_in"])
	r.cpuStartup = d.cpu()
	time.Sleep(2 * time.Second) // let the start-up garbage be collected
	r.rssIdle, r.hwm = d.memory()
	for i := range bursts {
		// The next minute that starts at least 2 s from now.
		slot := time.Now().Add(2 * time.Second).Truncate(time.Minute).Add(time.Minute)
		if i == 0 && slot.Sub(d.started) > time.Minute+2*time.Second {
			r.err = fmt.Errorf("start-up took too long for the first burst to be measured")
		}
		b := e.measureBurst(ctx, slot, n)
		r.bursts = append(r.bursts, b)
		if i == 0 {
			after, err := e.adm.usedMemory(ctx)
			if err == nil {
				r.redisPerJob = float64(after-before) / float64(n)
			}
			r.redisBreak = e.memoryBreakdown(ctx, n)
		}
	}
	r.rssAfter, r.hwmAfter = d.memory()
	r.warns, r.errors = d.problems()
	return d
}

// measureBurst waits for slot and reads every entry of the shared stream
// for that slot.
func (e *env) measureBurst(ctx context.Context, slot time.Time, n int) burst {
	b := burst{slot: slot}
	sleepUntil(slot.Add(-500 * time.Millisecond))
	len0, err := e.adm.c.XLen(ctx, scaleStream).Result()
	if err != nil {
		b.err = err
		return b
	}
	script0 := e.scriptTime(ctx)
	// Wait until the stream holds the slot's n entries or 30 s passed.
	deadline := slot.Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if l, err := e.adm.c.XLen(ctx, scaleStream).Result(); err == nil && l-len0 >= int64(n) {
			break
		}
	}
	scriptTotal := e.scriptTime(ctx) - script0
	minID := strconv.FormatInt(slot.UnixMilli(), 10) + "-0"
	ds, jobs, err := e.readDelays(ctx, minID, slot.UnixMilli(), slot.UnixMilli())
	if len(ds) > 0 {
		b.redisPerTick = scriptTotal / time.Duration(len(ds))
	}
	if err != nil {
		b.err = err
		return b
	}
	b.count, b.distinct = len(ds), jobs
	if len(ds) == 0 {
		b.err = fmt.Errorf("no tick of the slot %s enqueued within 30 s", slot.Format(time.TimeOnly))
		return b
	}
	slices.Sort(ds)
	b.span, b.p50, b.p99, b.max = ds[len(ds)-1], pct(ds, 50), pct(ds, 99), ds[len(ds)-1]
	return b
}

// readDelays reads the entries with ids from minID whose slot lies in
// [lo, hi] and returns entry time - slot for each, and the number of
// distinct jobs.
func (e *env) readDelays(ctx context.Context, minID string, lo, hi int64) ([]time.Duration, int, error) {
	var ds []time.Duration
	jobs := map[string]struct{}{}
	start := minID
	for {
		xs, err := e.adm.c.XRangeN(ctx, scaleStream, start, "+", 20000).Result()
		if err != nil {
			return nil, 0, err
		}
		for _, x := range xs {
			s, _ := x.Values["slot"].(string)
			sl, err := strconv.ParseInt(s, 10, 64)
			if err != nil || sl < lo || sl > hi {
				continue
			}
			ms, _, _ := strings.Cut(x.ID, "-")
			at, _ := strconv.ParseInt(ms, 10, 64)
			ds = append(ds, time.Duration(at-sl)*time.Millisecond)
			j, _ := x.Values["job"].(string)
			jobs[j] = struct{}{}
		}
		if len(xs) < 20000 {
			return ds, len(jobs), nil
		}
		start = "(" + xs[len(xs)-1].ID
	}
}

// memoryBreakdown reports MEMORY USAGE of the main keys, per job.
func (e *env) memoryBreakdown(ctx context.Context, n int) string {
	usage := func(key string) int64 {
		v, err := e.adm.c.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			return 0
		}
		return v
	}
	last := usage("onetick:last")
	stream := usage(scaleStream)
	var ticks int64
	keys, _ := e.adm.c.Keys(ctx, "onetick:ticks:*").Result()
	for _, k := range keys {
		ticks += usage(k)
	}
	s := fmt.Sprintf("last-fired %s, stream %s, tick records %s", fmtBytes(float64(last)/float64(n)),
		fmtBytes(float64(stream)/float64(n)), fmtBytes(float64(ticks)/float64(n)))
	if defs := usage("onetick:jobs"); defs > 0 {
		sets, _ := e.adm.c.Keys(ctx, "onetick:jobset:*").Result()
		for _, k := range sets {
			defs += usage(k)
		}
		s += fmt.Sprintf(", job definitions %s", fmtBytes(float64(defs)/float64(n)))
	}
	return s + " per job"
}

// scaleFromFile: the jobs in the configuration file.
func (e *env) scaleFromFile(ctx context.Context, bin, cfg string, n, bursts int) *scaleFile {
	r := &scaleFile{}
	if err := e.adm.flush(ctx); err != nil {
		r.err = err
		return r
	}
	d := e.runFleet(ctx, bin, cfg, n, bursts, r)
	if d != nil {
		d.stop()
	}
	return r
}

// storeSet is the most jobs applied as one set.
const storeSet = 100_000

type changeResult struct {
	sets       int
	applyAll   time.Duration // jobs apply of the n jobs
	apply      time.Duration // jobs apply of the change
	applied    time.Duration // apply returned -> leader logged the change
	fired      time.Duration // apply returned -> first new tick's entry
	firstDelay time.Duration // that entry's time - its slot
	err        error
}

// scaleFromStore: the jobs applied with `onetick jobs apply`, then one
// changed while the fleet runs.
func (e *env) scaleFromStore(ctx context.Context, bin, dir, url string, n int) (*scaleFile, changeResult) {
	r := &scaleFile{}
	var ch changeResult
	fail := func(err error) (*scaleFile, changeResult) {
		r.err, ch.err = err, err
		return r, ch
	}
	if err := e.adm.flush(ctx); err != nil {
		return fail(err)
	}
	base := filepath.Join(dir, "base.yaml")
	jobsFile := filepath.Join(dir, "jobs.yaml")
	change := filepath.Join(dir, "change.yaml")
	if err := os.WriteFile(base, []byte(baseConfig(url)), 0o644); err != nil {
		return fail(err)
	}
	// Applied as sets of at most 100,000 jobs (tenants' sets): one set of
	// a million is one Lua script that keeps Redis busy for tens of
	// seconds.
	sets := (n + storeSet - 1) / storeSet
	for k := range sets {
		if err := writeJobsFileFrom(fmt.Sprintf("%s.%d", jobsFile, k), k*storeSet, min(storeSet, n-k*storeSet), "0 * * * * *", scaleStream); err != nil {
			return fail(err)
		}
	}
	changeJob := func(sched string) error {
		return os.WriteFile(change, []byte("jobs:\n  - name: changed\n    schedule: \""+sched+"\"\n    stream: onetick:stream:changed\n"), 0o644)
	}
	if err := changeJob("0 0 1 1 *"); err != nil {
		return fail(err)
	}
	var err error
	for k := range sets {
		d, err := runCLI(ctx, bin, "jobs", "apply", "-config", base, "-set", fmt.Sprintf("scale-%d", k), "-f", fmt.Sprintf("%s.%d", jobsFile, k))
		if err != nil {
			return fail(err)
		}
		ch.applyAll += d
	}
	ch.sets = sets
	if _, err = runCLI(ctx, bin, "jobs", "apply", "-config", base, "-set", "change", "-f", change); err != nil {
		return fail(err)
	}
	d := e.runFleet(ctx, bin, base, n, 1, r)
	if d == nil {
		return r, ch
	}
	defer d.stop()
	if r.err != nil {
		ch.err = r.err
		return r, ch
	}
	// The change, at second 20 of a minute (away from the bursts).
	at := time.Now().Truncate(time.Minute).Add(20 * time.Second)
	if time.Until(at) < 0 {
		at = at.Add(time.Minute)
	}
	sleepUntil(at)
	seen := d.count("jobs defined at run time changed")
	if err := changeJob("* * * * * *"); err != nil {
		ch.err = err
		return r, ch
	}
	if ch.apply, err = runCLI(ctx, bin, "jobs", "apply", "-config", base, "-set", "change", "-f", change); err != nil {
		ch.err = err
		return r, ch
	}
	done := time.Now()
	if l, err := d.waitFor("jobs defined at run time changed", seen, 2*time.Minute); err == nil {
		ch.applied = l.at.Sub(done)
	} else {
		ch.err = err
		return r, ch
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		xs, err := e.adm.c.XRangeN(ctx, "onetick:stream:changed", "-", "+", 1).Result()
		if err == nil && len(xs) > 0 {
			ms, _, _ := strings.Cut(xs[0].ID, "-")
			at, _ := strconv.ParseInt(ms, 10, 64)
			sl, _ := strconv.ParseInt(fmt.Sprint(xs[0].Values["slot"]), 10, 64)
			ch.fired = time.UnixMilli(at).Sub(done)
			ch.firstDelay = time.Duration(at-sl) * time.Millisecond
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ch.fired == 0 {
		ch.err = fmt.Errorf("the changed job did not fire within 2 minutes")
	}
	r.rssAfter, r.hwmAfter = d.memory()
	return r, ch
}

// spreadWindow is how long the spread run is observed.
const spreadWindow = time.Minute

// scaleSpread: 1M jobs "H H * * * *" from the file, observed for a
// minute of firing.
func (e *env) scaleSpread(ctx context.Context, bin, dir, url string, n int) *scaleFile {
	r := &scaleFile{}
	if err := e.adm.flush(ctx); err != nil {
		r.err = err
		return r
	}
	cfg := filepath.Join(dir, "spread.yaml")
	if err := writeJobsFile(cfg, baseConfig(url), n, "H H * * * *", scaleStream); err != nil {
		r.err = err
		return r
	}
	d := e.runFleet(ctx, bin, cfg, n, 0, r)
	if d == nil {
		return r
	}
	defer d.stop()
	if r.err != nil {
		return r
	}
	from := time.Now().Add(time.Second).Truncate(time.Second)
	sleepUntil(from.Add(spreadWindow + 2*time.Second))
	ds, _, err := e.readDelays(ctx, "-", from.UnixMilli(), from.Add(spreadWindow).UnixMilli())
	b := burst{slot: from, count: len(ds), err: err}
	if err == nil && len(ds) == 0 {
		b.err = fmt.Errorf("no tick in %s", spreadWindow)
	}
	if b.err == nil {
		slices.Sort(ds)
		b.span, b.p50, b.p99, b.max = ds[len(ds)-1], pct(ds, 50), pct(ds, 99), ds[len(ds)-1]
	}
	r.bursts = append(r.bursts, b)
	r.rssAfter, r.hwmAfter = d.memory()
	r.warns, r.errors = d.problems()
	return r
}

// claimRef is the backend's Claim alone, in batches, on one stream.
type claimRef struct {
	dur     time.Duration
	rates   map[string]float64
	perTick map[string]time.Duration // Redis's time in scripts per tick
	// atScale: every one of the scale part's jobs claimed once, for one
	// slot (the tick and last-fired hashes grow to a million fields, as in
	// the burst).
	atScale     []string
	bestAtScale float64
	err         error
}

func (c claimRef) best() float64 {
	b := 0.0
	for _, r := range c.rates {
		b = max(b, r)
	}
	return b
}

func (c claimRef) String() string {
	if c.err != nil {
		return "error: " + c.err.Error()
	}
	var keys []string
	for k := range c.rates {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s ticks/s (Redis in scripts %s per tick)", k, fmtRate(c.rates[k]), fmtDur(c.perTick[k])))
	}
	return strings.Join(parts, ", ")
}

// claimReference measures Claim throughput in batches of 2,000 (the
// scheduler's default) and 10,000 ticks (as redis BenchmarkClaim), one
// call at a time and two in flight (as the scheduler sends them), every
// tick to one shared stream with the payload {} (as the burst).
func (e *env) claimReference(ctx context.Context) claimRef {
	ref := claimRef{dur: 3 * time.Second, rates: map[string]float64{}, perTick: map[string]time.Duration{}}
	if quick {
		ref.dur = time.Second
	}
	be, err := otredis.Open(e.srv.URL(), otredis.Options{Prefix: "claimref"})
	if err != nil {
		ref.err = err
		return ref
	}
	defer be.Close()
	for _, batch := range []int{2000, 10000} {
		for _, depth := range []int{1, 2} {
			if err := e.adm.flush(ctx); err != nil {
				ref.err = err
				return ref
			}
			g, err := be.Acquire(ctx, "bench", time.Hour)
			if err != nil {
				ref.err = err
				return ref
			}
			base := onetick.SlotOf(time.Now().Add(-24 * time.Hour))
			// Calls in flight together claim different jobs: one job's
			// slots must reach the store in order.
			calls := make([][]onetick.Tick, depth)
			for k := range calls {
				calls[k] = make([]onetick.Tick, batch)
				for i := range calls[k] {
					calls[k][i] = onetick.Tick{Job: fmt.Sprintf("tenant-%07d", k*batch+i), Stream: "stream:shared", Payload: "{}",
						Retention: 3 * time.Minute}
				}
			}
			mk := func(it, k int) []onetick.Tick {
				for i := range calls[k] {
					calls[k][i].Slot = base + onetick.Slot(it)*60_000
				}
				return calls[k]
			}
			claimed := 0
			script0 := e.scriptTime(ctx)
			start := time.Now()
			errs := make(chan error, depth)
			it := 0
			for time.Since(start) < ref.dur && err == nil {
				for k := range depth {
					ticks := mk(it, k)
					go func() {
						_, err := be.Claim(ctx, g.Lease, ticks)
						errs <- err
					}()
				}
				for range depth {
					if e := <-errs; e != nil {
						err = e
					}
				}
				claimed += batch * depth
				it++
			}
			if err != nil {
				ref.err = err
				return ref
			}
			key := fmt.Sprintf("batch %d depth %d", batch, depth)
			ref.rates[key] = float64(claimed) / time.Since(start).Seconds()
			ref.perTick[key] = (e.scriptTime(ctx) - script0) / time.Duration(claimed)
		}
	}
	// At scale: n distinct jobs claimed once each for one slot, as in the
	// burst, by the backend alone.
	for _, c := range []struct{ batch, depth int }{{2000, 2}, {10000, 1}} {
		if err := e.adm.flush(ctx); err != nil {
			ref.err = err
			return ref
		}
		g, err := be.Acquire(ctx, "bench", time.Hour)
		if err != nil {
			ref.err = err
			return ref
		}
		slot := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Minute))
		n := scaleJobs()
		script0 := e.scriptTime(ctx)
		start := time.Now()
		errs := make(chan error, c.depth)
		for i := 0; i < n && err == nil; i += c.batch * c.depth {
			for k := range c.depth {
				lo := i + k*c.batch
				hi := min(lo+c.batch, n)
				if lo >= hi {
					errs <- nil
					continue
				}
				ticks := make([]onetick.Tick, 0, hi-lo)
				for x := lo; x < hi; x++ {
					ticks = append(ticks, onetick.Tick{Job: fmt.Sprintf("tenant-%07d", x), Stream: "stream:shared", Payload: "{}",
						Retention: 3 * time.Minute, Slot: slot})
				}
				go func() {
					_, err := be.Claim(ctx, g.Lease, ticks)
					errs <- err
				}()
			}
			for range c.depth {
				if e := <-errs; e != nil {
					err = e
				}
			}
		}
		if err != nil {
			ref.err = err
			return ref
		}
		rate := float64(n) / time.Since(start).Seconds()
		ref.atScale = append(ref.atScale, fmt.Sprintf("batch %d depth %d %s ticks/s (Redis in scripts %s per tick)", c.batch, c.depth, fmtRate(rate),
			fmtDur((e.scriptTime(ctx)-script0)/time.Duration(n))))
		ref.bestAtScale = max(ref.bestAtScale, rate)
	}
	_ = e.adm.flush(ctx)
	return ref
}

// scriptTime is the CPU time Redis has spent in scripts (EVALSHA and
// EVAL, INFO commandstats), which includes every command they run.
func (e *env) scriptTime(ctx context.Context) time.Duration {
	s, err := e.adm.c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0
	}
	var us int64
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if k, v, _ := strings.Cut(f, "="); k == "usec" {
				n, _ := strconv.ParseInt(v, 10, 64)
				us += n
			}
		}
	}
	return time.Duration(us) * time.Microsecond
}

func fmtRate(r float64) string {
	if r >= 1000 {
		return fmt.Sprintf("%.0fk", r/1000)
	}
	return fmt.Sprintf("%.0f", r)
}

func fmtSec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func fmtMB(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
