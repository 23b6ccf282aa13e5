//go:build verify && chaos

package verify

// The chaos run's observers: they turn what the replicas log, what the
// store's streams hold, what the run commands append and what /metrics
// counts into history events. They run beside the nemesis and never fail
// the test (the store may be down when they read); finish reads
// everything a last time.

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/chaos"
)

// observerState is what the observers remember between reads; only the
// observer goroutine (then finish, after it stopped) touches it.
type observerState struct {
	logIdx   map[*Replica]int
	seen     map[string]map[string]bool // job -> entry ids written
	runOff   int64
	runPart  string
	inflight map[int]inflightRun // command pid -> its run, until its done line
}

type inflightRun struct {
	replica string
	at      time.Time
}

func (c *chaosRun) startObservers() {
	st := &observerState{logIdx: map[*Replica]int{}, seen: map[string]map[string]bool{}, inflight: map[int]inflightRun{}}
	c.obs = st
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-c.ctx.Done():
				return
			case <-tick.C:
			}
			c.observeLogs(st)
			c.observeRuns(st)
			if n%3 == 0 {
				c.observeStreams(st)
			}
			if n%10 == 0 {
				c.observeCounters()
			}
		}
	}()
}

func (c *chaosRun) stopObservers() {
	c.cancel()
	c.wg.Wait()
}

// finish stops the observers, reads everything a last time, scrapes every
// live replica and closes the history.
func (c *chaosRun) finish() {
	c.stopObservers()
	c.observeLogs(c.obs)
	c.observeRuns(c.obs)
	c.observeStreams(c.obs)
	c.observeCounters()
	c.h.Add(chaos.Event{Kind: chaos.KindEnd})
}

// observeLogs turns new log lines into leader and missed events.
func (c *chaosRun) observeLogs(st *observerState) {
	for _, r := range c.f.All() {
		lines := r.Lines()
		for _, l := range lines[st.logIdx[r]:] {
			switch l.Msg {
			case "became leader", "renewed leadership":
				c.mu.Lock()
				off := c.offsets[r.Name]
				c.mu.Unlock()
				// trusted_until is on the replica's (possibly skewed)
				// clock; the history is on the real one.
				tu, _ := time.Parse(time.RFC3339Nano, l.Str("trusted_until"))
				phase := "acquired"
				if l.Msg == "renewed leadership" { // logged at DEBUG
					phase = "renewed"
				}
				c.h.Add(chaos.Event{T: l.Time, Kind: chaos.KindLeader, Phase: phase, Replica: r.Name, Epoch: l.Int("epoch"),
					TrustUntil: tu.Add(-off), Note: offsetNote(off)})
			case "stopped leading":
				c.h.Add(chaos.Event{T: l.Time, Kind: chaos.KindLeader, Phase: "lost", Replica: r.Name, Epoch: l.Int("epoch"), Note: l.Str("reason")})
			case "store call failed":
				if op := l.Str("op"); op == "heartbeat" || op == "finish" {
					c.h.Add(chaos.Event{T: l.Time, Kind: chaos.KindLapse, Replica: r.Name, Note: "store call failed: " + op + ": " + l.Str("err")})
				}
			case "gap: slots skipped":
				from, err1 := time.Parse(time.RFC3339Nano, l.Str("from"))
				to, err2 := time.Parse(time.RFC3339Nano, l.Str("to"))
				if err1 != nil || err2 != nil {
					continue
				}
				for s, n := from, 0; !s.After(to) && n < 100000; s, n = s.Add(interval), n+1 {
					c.h.Add(chaos.Event{T: l.Time, Kind: chaos.KindMissed, Job: l.Str("job"), Slot: s.UnixMilli(), Replica: r.Name})
				}
			}
		}
		for _, l := range lines[st.logIdx[r]:] {
			// The worker's messages (worker/exec.go, worker/heartbeat.go).
			if strings.HasPrefix(l.Msg, "tick result not recorded") || strings.HasPrefix(l.Msg, "giving up recording the tick's result: the store did not answer") {
				c.h.Add(chaos.Event{T: l.Time, Kind: chaos.KindLapse, Replica: r.Name, Job: l.Str("job"), Tick: l.Str("tick"), Note: "not recorded: " + l.Msg})
			}
			if strings.HasPrefix(l.Msg, "cancelling the handler: ") || strings.HasPrefix(l.Msg, "dropping a waiting tick: ") {
				c.h.Add(chaos.Event{T: l.Time, Kind: chaos.KindLapse, Replica: r.Name, Job: l.Str("job"), Tick: l.Str("tick"), Note: "cancelled: " + l.Msg})
			}
		}
		st.logIdx[r] = len(lines)
	}
}

func offsetNote(off time.Duration) string {
	if off == 0 {
		return ""
	}
	return "replica clock offset " + off.String() + " (trust_until converted to the real clock)"
}

// readStream reads a job's stream without failing the test.
func (c *chaosRun) readStream(job string) ([]onetick.TickRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	switch {
	case c.f.pg != nil:
		return c.f.pg.ReadStream(ctx, c.streamKey(job), 0)
	case c.f.filePath != "":
		c.f.mu.Lock()
		b := c.f.file
		c.f.mu.Unlock()
		if b == nil {
			return nil, fmt.Errorf("file store not open yet")
		}
		return b.Stream(ctx, c.streamKey(job))
	default:
		return c.f.backend.ReadStream(ctx, c.streamKey(job), 0)
	}
}

// observeStreams writes every stream entry not written yet.
func (c *chaosRun) observeStreams(st *observerState) {
	for _, j := range chaosJobs {
		recs, err := c.readStream(j.name)
		if err != nil {
			continue // the store is down or unreachable: read again later
		}
		if st.seen[j.name] == nil {
			st.seen[j.name] = map[string]bool{}
		}
		for i, r := range recs {
			id := r.ID
			if id == "" {
				id = "#" + strconv.Itoa(i)
			}
			if st.seen[j.name][id] {
				continue
			}
			st.seen[j.name][id] = true
			e := chaos.Event{Kind: chaos.KindEnqueue, Job: r.Job, Slot: int64(r.Slot), Tick: r.Tick, Entry: r.ID,
				Epoch: int64(r.Epoch), Replica: r.Replica, TickKind: r.Kind}
			if r.Kind == "trigger" {
				e.Slot = 0
			}
			if r.ID != "" {
				// The store's clock is the machine's: the append's time is
				// the event's (the observation comes up to 600ms later).
				e.At = entryTime(r.ID)
				e.T = e.At
			}
			c.h.Add(e)
			c.mu.Lock()
			c.ticks++
			c.mu.Unlock()
		}
	}
}

// observeRuns reads the lines the run commands appended since the last
// read.
func (c *chaosRun) observeRuns(st *observerState) {
	f, err := os.Open(c.runLog)
	if err != nil {
		return // no run yet
	}
	defer f.Close()
	if _, err := f.Seek(st.runOff, io.SeekStart); err != nil {
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return
	}
	st.runOff += int64(len(data))
	text := st.runPart + string(data)
	lines := strings.Split(text, "\n")
	st.runPart = lines[len(lines)-1] // a line not finished yet
	for _, l := range lines[:len(lines)-1] {
		c.runLine(st, l)
	}
}

// runLine parses "start|done job slot_ms tick attempt pid replica
// unix_ns" into a run event.
func (c *chaosRun) runLine(st *observerState, l string) {
	f := strings.Fields(l)
	if len(f) != 8 || (f[0] != "start" && f[0] != "done") {
		return // a line cut by a kill
	}
	slotMS, _ := strconv.ParseInt(f[2], 10, 64)
	attempt, _ := strconv.Atoi(f[4])
	pid, _ := strconv.Atoi(f[5])
	worker := f[6]
	ns, err := strconv.ParseInt(f[7], 10, 64)
	if err != nil {
		return
	}
	at := time.Unix(0, ns)
	e := chaos.Event{T: at, Kind: chaos.KindRunStart, Job: f[1], Slot: slotMS, Tick: f[3], Attempt: attempt, Worker: worker, PID: pid}
	if f[0] == "done" {
		ok := true
		e.Kind, e.OK = chaos.KindRunEnd, &ok
		c.mu.Lock()
		delete(st.inflight, pid)
		c.runs++
		c.mu.Unlock()
	} else {
		c.mu.Lock()
		st.inflight[pid] = inflightRun{replica: worker, at: at}
		c.mu.Unlock()
	}
	c.h.Add(e)
}

// runningOn returns the names of replicas with a run in flight that
// started at least min ago (and is not expected to have ended).
func (c *chaosRun) runningOn(min time.Duration) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for _, r := range c.obs.inflight {
		if age := time.Since(r.at); age >= min && age < runFor-50*time.Millisecond {
			out[r.replica] = true
		}
	}
	return out
}

// chaosCounters are the counters written to the history.
var chaosCounters = []string{"scheduler_job_missed_ticks_total", "scheduler_job_ticks_enqueued_total"}

// observeCounters scrapes every live replica that is not stopped.
func (c *chaosRun) observeCounters() {
	c.mu.Lock()
	up := append([]*Replica(nil), c.up...)
	c.mu.Unlock()
	for _, r := range up {
		c.mu.Lock()
		stopped := c.stopped[r.Name]
		c.mu.Unlock()
		if r.Alive() && !stopped {
			c.scrapeCounters(r)
		}
	}
}

// scrapeCounters scrapes r and writes each counter that changed.
func (c *chaosRun) scrapeCounters(r *Replica) {
	m, err := c.f.scrape(r)
	if err != nil {
		return
	}
	var keys []string
	for _, name := range chaosCounters {
		for _, j := range chaosJobs {
			keys = append(keys, name+"|"+j.name)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, job, _ := strings.Cut(k, "|")
		v := m.Job(name, job)
		ck := r.Name + "|" + k
		c.mu.Lock()
		old, had := c.counted[ck]
		c.counted[ck] = v
		c.mu.Unlock()
		if !had || old != v {
			c.h.Add(chaos.Event{Kind: chaos.KindCounter, Name: name, Job: job, Replica: r.Name, Value: v})
		}
	}
}
