//go:build verify && chaos

package verify

// The chaos run's fleet: the jobs, the stores it runs on, and the replica
// slots (each slot one process at a time, behind its own proxy to the
// store, replaced after every kill or restart).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/chaos"
	"github.com/onetick/onetick/internal/redistest"
)

const (
	// chaosMaxSkew is the clock skew the nemesis gives a replica at most:
	// the documented bound (README: ±TTL/2 tested).
	chaosMaxSkew = ttl / 2
	// chaosSettle is how long the run goes on after the last fault healed,
	// and how long before the end a slot may still be without an outcome
	// (a run cut by a kill is taken over after the worker's takeover idle
	// time, 3s, and its catch-up waits its turn).
	chaosSettle = 15 * time.Second
	// chaosToken is the replicas' API token (triggers and backfills).
	chaosToken = "chaos-run-token-0123456789abcdef"
	// runFor is how long a run of a command job lasts.
	runFor = 300 * time.Millisecond
)

// chaosJob is one job of the run.
type chaosJob struct {
	name   string
	prefer string
	grace  time.Duration // 0: the default (2×ttl)
	run    bool
}

var chaosJobs = []chaosJob{
	{name: "c-missed", prefer: "missed", grace: time.Millisecond},
	{name: "c-grace", prefer: "missed"},
	{name: "c-dup", prefer: "duplicate"},
	{name: "c-run-dup", prefer: "duplicate", run: true},
	{name: "c-run-missed", prefer: "missed", run: true},
}

// chaosRunCommand appends "start|done job slot_ms tick attempt pid
// replica unix_ns" to $OUT. The replica's name is the last element of
// $TMPDIR, which a command inherits from its replica (startSlot gives each
// process its own): unlike the parent pid, it survives the replica's death.
const chaosRunCommand = `S=$ONETICK_SLOT_MS; [ -n "$S" ] || S=0; L="$ONETICK_JOB $S $ONETICK_TICK $ONETICK_ATTEMPT $$ $(basename "$TMPDIR")"; echo "start $L $(date +%%s%%N)" >> "$OUT"; sleep 0.3; echo "done $L $(date +%%s%%N)" >> "$OUT"`

// chaosYAML is the run's configuration (on Redis: setups for other stores
// replace its backend section); runs write to out.
func chaosYAML(out string) string {
	y := strings.Replace(fleetYAML, "http:\n  listen: 127.0.0.1:0\n", "http:\n  listen: 127.0.0.1:0\n  token: "+chaosToken+"\n", 1)
	var b strings.Builder
	b.WriteString(y)
	for _, j := range chaosJobs {
		fmt.Fprintf(&b, "  - name: %s\n    schedule: \"@every 1s\"\n    prefer: %s\n    stream: %q\n", j.name, j.prefer, streamOf(j.name))
		if j.grace > 0 {
			fmt.Fprintf(&b, "    grace: %s\n", j.grace)
		}
		if j.run {
			fmt.Fprintf(&b, "    run:\n      command:\n        argv: [sh, -c, '%s']\n        env: {OUT: %q}\n      overlap: allow\n      max_attempts: 3\n      backoff: 200ms\n",
				fmt.Sprintf(chaosRunCommand), out)
		}
	}
	b.WriteString("worker:\n  takeover_idle: 3s\n  heartbeat: 500ms\n  shutdown_timeout: 2s\n")
	return b.String()
}

// chaosStoreSetup prepares the fleet of one store: it sets c.f, the
// proxy target (empty: no proxy), how a replica is pointed at an address,
// the store's kill and restart (nil: none) and the replica count.
type chaosStoreSetup func(c *chaosRun, yaml string)

var chaosStoreSetups = map[string]chaosStoreSetup{
	"redis": func(c *chaosRun, yaml string) {
		srv := StartRedis(c.t, redistest.AppendOnly())
		c.f = NewFleetWith(c.t, "chaos redis", srv, yaml)
		c.f.StoreFaults = true
		c.target = srv.Addr()
		c.via = func(addr string) StartOpt { return WithRedisURL("redis://" + addr + "/0") }
		c.storeKill, c.storeRestart = srv.Kill, srv.Restart
		c.nReplicas = 3
	},
	"postgres": func(c *chaosRun, yaml string) {
		pg := StartPGServer(c.t)
		pf := newPGFleet(c.t, "chaos postgres", pg.URL(), func(y string) string {
			backend, _, _ := strings.Cut(y, "lease:") // the fleet's backend section, with its schema
			return onBackend(yaml, backend)
		})
		c.f = pf.Fleet
		c.f.StoreFaults = true
		c.target = pg.Addr()
		base := pg.URL()
		c.via = func(addr string) StartOpt { return WithEnv(pgURLEnv + "=" + withHost(c.t, base, addr)) }
		c.storeKill, c.storeRestart = pg.Kill, pg.Restart
		c.nReplicas = 3
	},
	"file": func(c *chaosRun, yaml string) {
		// The embedded file store: one process (the documented setup),
		// killed, stopped and restarted; no network, no store process.
		c.f = NewFileFleet(c.t, "chaos file", yaml)
		c.nReplicas = 1
	},
}

// slot is one replica position: its current process, its proxy and the
// clock offset of that process.
type slot struct {
	letter string
	gen    int
	r      *Replica
	proxy  *Proxy
	offset time.Duration
	// stopped: the process is under SIGSTOP; netBusy: its proxy is
	// partitioned or slowed.
	stopped, netBusy bool
}

// chaosRun is one store's run.
type chaosRun struct {
	t     *testing.T
	store string
	h     *chaos.Writer
	f     *Fleet

	target       string
	via          func(addr string) StartOpt
	storeKill    func()
	storeRestart func()
	// failover fails a Redis topology's primary over (u draws how) and
	// waits until the topology is whole again; nil for other stores.
	failover func(u float64) (target, note string)
	// streamKey is a job's stream key (default streamOf).
	streamKey func(job string) string
	nReplicas int
	asyncLoss bool
	runLog    string
	procDir   string // a TMPDIR per process, named after it
	started   time.Time
	from      int64

	slots     []*slot
	obs       *observerState
	pending   []pendingAction // the nemesis's, sorted by time
	storeDown bool
	healing   bool

	mu           sync.Mutex
	up           []*Replica               // every process that came up (its Addr set)
	offsets      map[string]time.Duration // replica name -> clock offset
	stopped      map[string]bool          // replicas under SIGSTOP (not scraped)
	faults       map[string]int           // fault kind -> count
	ops          map[string]int
	skipped      map[string]int // drawn faults without a target when they came
	failedStarts int
	ticks        int
	runs         int
	counted      map[string]float64 // "replica|name|job" -> last value written

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newChaosRun(t *testing.T, store string, h *chaos.Writer) *chaosRun {
	ctx, cancel := context.WithCancel(context.Background())
	c := &chaosRun{t: t, store: store, h: h, offsets: map[string]time.Duration{},
		stopped: map[string]bool{}, faults: map[string]int{}, ops: map[string]int{}, skipped: map[string]int{}, counted: map[string]float64{},
		ctx: ctx, cancel: cancel, streamKey: streamOf}
	return c
}

func (c *chaosRun) setup() {
	dir := c.t.TempDir()
	c.runLog, c.procDir = filepath.Join(dir, "runs.log"), filepath.Join(dir, "proc")
	chaosStoreSetups[c.store](c, chaosYAML(c.runLog))
	// Registered after the fleet's cleanup: runs before it, so the
	// observers stop reading before the store goes away.
	c.t.Cleanup(c.stopObservers)
	c.started = time.Now()
	for i := 0; i < c.nReplicas; i++ {
		s := &slot{letter: string(rune('a' + i))}
		if c.target != "" {
			s.proxy = StartProxy(c.t, c.target)
		}
		c.slots = append(c.slots, s)
	}
}

func (c *chaosRun) jobSpecs() []chaos.JobSpec {
	var out []chaos.JobSpec
	for _, j := range chaosJobs {
		g := j.grace
		if g == 0 {
			g = 2 * ttl
		}
		out = append(out, chaos.JobSpec{Name: j.name, Every: interval, Prefer: j.prefer, Grace: g, Run: j.run, From: c.from})
	}
	return out
}

// startFleet starts every slot's first process and waits for a leader.
func (c *chaosRun) startFleet() {
	for _, s := range c.slots {
		if c.startSlot(s, 0) == nil {
			c.t.Fatalf("slot %s: the first process did not start", s.letter)
		}
	}
	c.f.WaitLeader(4 * ttl)
	// The jobs are new: the first leader fires from the slot after it
	// began, so the slots expected start a little after it leads.
	c.from = time.Now().Add(2 * time.Second).Truncate(time.Second).UnixMilli()
	if c.store == "file" {
		c.f.fileStore() // opened here, on the test goroutine; the stream reader uses it
	}
}

// startSlot starts a new process in s with the given clock offset; nil
// when it does not come up (a replica exits when it cannot reach its
// store: the store is down or its link cut), and then, unless the slot
// still has a live process, another try is scheduled.
func (c *chaosRun) startSlot(s *slot, offset time.Duration) *Replica {
	s.gen++
	name := fmt.Sprintf("%s%d", s.letter, s.gen)
	var opts []StartOpt
	if s.proxy != nil {
		opts = append(opts, c.via(s.proxy.Addr()))
	}
	if offset != 0 {
		opts = append(opts, WithEnv("ONETICK_TEST_CLOCK_OFFSET="+offset.String()))
	}
	tmp := filepath.Join(c.procDir, name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		c.t.Fatal(err)
	}
	opts = append(opts, WithEnv("TMPDIR="+tmp), WithLogLevel("debug")) // debug: "renewed leadership" lines
	c.mu.Lock()
	c.offsets[name] = offset
	c.mu.Unlock()
	r, err := c.f.TryStart(name, opts...)
	if err != nil {
		c.t.Logf("chaos: %v", firstLines(err.Error(), 3))
		c.mu.Lock()
		c.failedStarts++
		c.mu.Unlock()
		if !c.healing && (s.r == nil || !s.r.Alive()) {
			c.later(time.Second, func() {
				if s.r == nil || !s.r.Alive() {
					c.startSlot(s, 0)
				}
			})
		}
		return nil
	}
	if s.offset != 0 && s.r != nil { // the skewed process is replaced
		c.fault("skew", "end", s.r.Name, "replaced by "+name)
	}
	s.r, s.offset, s.stopped = r, offset, false
	c.mu.Lock()
	c.up = append(c.up, r)
	c.mu.Unlock()
	return r
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, " | ")
}

// fault writes a fault event and counts its start.
func (c *chaosRun) fault(kind, phase, target, note string) {
	c.h.Add(chaos.Event{Kind: chaos.KindFault, Fault: kind, Phase: phase, Target: target, Note: note})
	if phase == "start" {
		c.mu.Lock()
		c.faults[kind]++
		c.mu.Unlock()
	}
}

// kill kills r with SIGKILL (scraping its counters first unless it is
// stopped: a stopped process answers nothing, and a SIGCONT would let it
// run again before it dies) and writes that it no longer leads (a killed
// process logs nothing).
func (c *chaosRun) kill(r *Replica) {
	c.mu.Lock()
	stopped := c.stopped[r.Name]
	c.mu.Unlock()
	if !stopped {
		c.scrapeCounters(r)
	}
	e, leads := leadsNow(r)
	if err := r.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill %s: %v", r.Name, err)
	}
	if !r.WaitExit(10 * time.Second) {
		c.t.Fatalf("%s still running 10s after SIGKILL", r.Name)
	}
	if leads {
		c.h.Add(chaos.Event{Kind: chaos.KindLeader, Phase: "lost", Replica: r.Name, Epoch: e, Note: "killed (SIGKILL): it logs nothing more"})
	}
}

// summary is the store's line of the run's summary: faults by kind,
// operator actions, ticks, runs and the history's path.
func (c *chaosRun) summary(path string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := func(m map[string]int) (int, string) {
		keys := make([]string, 0, len(m))
		n := 0
		for k, v := range m {
			keys = append(keys, k)
			n += v
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return n, strings.Join(parts, ", ")
	}
	nf, faults := count(c.faults)
	_, ops := count(c.ops)
	ns, skipped := count(c.skipped)
	return fmt.Sprintf("%-9s %d faults in %s (%s); %d drawn without a target (%s); ops: %s; %d replica starts failed (store unreachable) and were retried; %d ticks enqueued, %d runs finished; history %s",
		c.store, nf, time.Since(c.started).Round(time.Second), faults, ns, skipped, ops, c.failedStarts, c.ticks, c.runs, path)
}
