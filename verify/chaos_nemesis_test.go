//go:build verify && chaos

package verify

// The nemesis: faults drawn at random intervals from a seeded math/rand.
// Each draw takes the same number of values from the generator whatever
// happens at run time, so a seed gives the same schedule (kinds,
// intervals, durations, offsets, "the leader or another replica"); a
// fault whose target is not available when it comes (a replica already
// stopped, a partition already on its link) is skipped and counted.
//
// Faults that last (a stop, a partition, added latency, a store outage,
// the restart after a kill) end by a pending action, so faults overlap;
// everything runs on the test goroutine.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/onetick/onetick/internal/chaos"
)

type pendingAction struct {
	at time.Time
	do func()
}

// nemesisKind is a fault (or an operator's action) and its weight.
type nemesisKind struct {
	name   string
	weight int
	ok     func(c *chaosRun) bool // available on this store
}

var nemesisKinds = []nemesisKind{
	{"kill9", 4, nil},
	{"stop", 3, nil},
	{"term", 2, nil},
	{"skew", 1, nil},
	{"partition", 3, func(c *chaosRun) bool { return c.target != "" }},
	{"latency", 2, func(c *chaosRun) bool { return c.target != "" }},
	{"store-kill", 1, func(c *chaosRun) bool { return c.storeKill != nil }},
	{"failover", 2, func(c *chaosRun) bool { return c.failover != nil }},
	{"worker-kill", 2, nil},
	{"trigger", 2, nil},
	{"backfill", 1, nil},
}

// schedule is the nemesis's seeded draws: for a seed and a store's kinds,
// always the same sequence of gaps, faults and their values.
type schedule struct {
	rng   *rand.Rand
	kinds []nemesisKind
	total int
}

func newSchedule(seed int64, c *chaosRun) *schedule {
	s := &schedule{rng: rand.New(rand.NewSource(seed))}
	for _, k := range nemesisKinds {
		if k.ok == nil || k.ok(c) {
			s.kinds = append(s.kinds, k)
			s.total += k.weight
		}
	}
	return s
}

// gap is the time to the next draw: 0.5s to 4s.
func (s *schedule) gap() time.Duration {
	return 500*time.Millisecond + time.Duration(s.rng.Int63n(int64(3500*time.Millisecond)))
}

// fault draws a fault and its four values (targets, durations, offsets:
// inject reads what it needs; all four are drawn whatever the fault).
func (s *schedule) fault() (string, [4]float64) {
	w := s.rng.Intn(s.total)
	var k nemesisKind
	for _, k = range s.kinds {
		if w < k.weight {
			break
		}
		w -= k.weight
	}
	return k.name, [4]float64{s.rng.Float64(), s.rng.Float64(), s.rng.Float64(), s.rng.Float64()}
}

// nemesis draws faults for dur.
func (c *chaosRun) nemesis(seed int64, dur time.Duration) {
	sch := newSchedule(seed, c)
	end := time.Now().Add(dur)
	next := time.Now().Add(sch.gap())
	for {
		now := time.Now()
		if len(c.pending) > 0 && !c.pending[0].at.After(now) {
			p := c.pending[0]
			c.pending = c.pending[1:]
			p.do()
			continue
		}
		if !now.Before(end) {
			return
		}
		if !now.Before(next) {
			kind, u := sch.fault()
			if !c.inject(kind, u) {
				c.mu.Lock()
				c.skipped[kind]++
				c.mu.Unlock()
			}
			next = time.Now().Add(sch.gap())
			continue
		}
		wake := next
		if end.Before(wake) {
			wake = end
		}
		if len(c.pending) > 0 && c.pending[0].at.Before(wake) {
			wake = c.pending[0].at
		}
		time.Sleep(time.Until(wake))
	}
}

// later schedules do after d.
func (c *chaosRun) later(d time.Duration, do func()) {
	c.pending = append(c.pending, pendingAction{at: time.Now().Add(d), do: do})
	sort.SliceStable(c.pending, func(i, k int) bool { return c.pending[i].at.Before(c.pending[k].at) })
}

// heal runs every pending action now (restarts, resumes, heals) and
// checks that every slot has a live process.
func (c *chaosRun) heal() {
	c.healing = true
	for len(c.pending) > 0 {
		p := c.pending[0]
		c.pending = c.pending[1:]
		p.do()
	}
	for _, s := range c.slots {
		for try := 0; s.r == nil || !s.r.Alive(); try++ {
			if try == 10 {
				c.t.Fatalf("slot %s: no process would start after the faults healed", s.letter)
			}
			if c.startSlot(s, 0) == nil {
				time.Sleep(time.Second)
			}
		}
	}
	c.healing = false
}

// leadsNow reports whether r leads by its own log, with the epoch.
func leadsNow(r *Replica) (int64, bool) {
	lines := r.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		switch lines[i].Msg {
		case "became leader":
			return lines[i].Int("epoch"), true
		case "stopped leading":
			return 0, false
		}
	}
	return 0, false
}

// pick returns a slot with a live process: the leader when u < 0.6 and
// one leads, else the slot chosen by v. usable filters the slots.
func (c *chaosRun) pick(u, v float64, usable func(*slot) bool) *slot {
	var ok []*slot
	for _, s := range c.slots {
		if s.r != nil && s.r.Alive() && usable(s) {
			ok = append(ok, s)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	if u < 0.6 {
		for _, s := range ok {
			if _, leads := leadsNow(s.r); leads {
				return s
			}
		}
	}
	return ok[int(v*float64(len(ok)))%len(ok)]
}

func notStopped(s *slot) bool { return !s.stopped }

// inject applies one drawn fault; false when it had no target.
func (c *chaosRun) inject(kind string, u [4]float64) bool {
	switch kind {
	case "kill9", "worker-kill":
		var s *slot
		if kind == "kill9" {
			s = c.pick(u[0], u[1], func(*slot) bool { return true })
		} else {
			s = c.midRun(u[1])
		}
		if s == nil {
			return false
		}
		r := s.r
		role := c.role(r)
		c.fault(kind, "start", r.Name, role)
		c.kill(r)
		s.stopped = false
		restart := 200*time.Millisecond + time.Duration(u[2]*float64(3*time.Second))
		c.later(restart, func() {
			if !s.r.Alive() { // not restarted by another retry meanwhile
				c.startSlot(s, 0)
			}
		})
	case "stop":
		s := c.pick(u[0], u[1], notStopped)
		if s == nil {
			return false
		}
		r := s.r
		c.scrapeCounters(r)
		c.fault("stop", "start", r.Name, c.role(r))
		if err := r.Signal(syscall.SIGSTOP); err != nil {
			c.t.Errorf("SIGSTOP %s: %v", r.Name, err)
		}
		s.stopped = true
		c.setStopped(r.Name, true)
		d := 500*time.Millisecond + time.Duration(u[2]*float64(7500*time.Millisecond))
		c.later(d, func() {
			if r.Alive() {
				_ = r.Signal(syscall.SIGCONT)
			}
			c.setStopped(r.Name, false)
			if s.r == r {
				s.stopped = false
			}
			c.fault("stop", "end", r.Name, "SIGCONT")
		})
	case "term", "skew":
		// A rolling step: the replacement starts first, then the old
		// process gets SIGTERM (and must exit 0 within the CLI's bound).
		s := c.pick(u[0], u[1], notStopped)
		if s == nil {
			return false
		}
		old := s.r
		var off time.Duration
		if kind == "skew" {
			off = time.Duration((u[2]*2 - 1) * float64(chaosMaxSkew)).Round(time.Millisecond)
		} else {
			c.fault("term", "start", old.Name, c.role(old))
		}
		nr := c.startSlot(s, off)
		if nr == nil { // the replacement did not come up: the old process stays
			if kind == "term" {
				c.fault("term", "end", old.Name, "its replacement did not start (store unreachable): not stopped")
			}
			return true
		}
		if kind == "skew" {
			c.fault("skew", "start", nr.Name, fmt.Sprintf("clock %s off (bound ±%s); replaces %s (%s), which gets SIGTERM", off, chaosMaxSkew, old.Name, c.role(old)))
		}
		c.scrapeCounters(old)
		c.f.Stop(old)
		if kind == "term" {
			c.fault("term", "end", old.Name, fmt.Sprintf("exited %d; replaced by %s", old.ExitCode(), nr.Name))
		}
	case "partition", "latency":
		s := c.pick(u[0], u[1], func(s *slot) bool { return !s.netBusy })
		if s == nil {
			return false
		}
		r := s.r
		s.netBusy = true
		var note string
		if kind == "partition" {
			mode := ModeCut
			if u[3] >= 0.5 {
				mode = ModeBlackhole
			}
			note = fmt.Sprintf("%s, %s", c.role(r), mode)
			c.fault(kind, "start", r.Name, note)
			s.proxy.SetMode(mode)
		} else {
			delay := 20*time.Millisecond + time.Duration(u[3]*float64(400*time.Millisecond)).Round(time.Millisecond)
			note = fmt.Sprintf("%s, %s each way; its connections reset, so they are set up again over the slow link", c.role(r), delay)
			c.fault(kind, "start", r.Name, note)
			s.proxy.SetDelay(delay)
			s.proxy.Reset() // the connections are set up again over the slow link
		}
		d := 500*time.Millisecond + time.Duration(u[2]*float64(7500*time.Millisecond))
		c.later(d, func() {
			s.proxy.SetMode(ModePass)
			s.proxy.SetDelay(0)
			s.netBusy = false
			c.fault(kind, "end", r.Name, "healed (slot "+s.letter+", now "+s.r.Name+")")
		})
	case "store-kill":
		if c.storeDown {
			return false
		}
		down := time.Duration(u[2] * float64(6*time.Second))
		c.fault(kind, "start", "store", fmt.Sprintf("kill -9, restart after %s", down.Round(time.Millisecond)))
		c.storeKill()
		c.storeDown = true
		c.later(down, func() {
			c.storeRestart()
			c.storeDown = false
			c.fault(kind, "end", "store", "restarted")
		})
	case "failover":
		// Blocks the nemesis until the topology is whole again (up to
		// minutes): the pending restarts and heals wait meanwhile.
		target, note := c.failover(u[2])
		c.fault("failover", "end", target, note)
	case "trigger", "backfill":
		return c.operate(kind, u)
	default:
		c.t.Fatalf("unknown fault %q", kind)
	}
	return true
}

// role names whether r leads, for a fault's note.
func (c *chaosRun) role(r *Replica) string {
	if e, ok := leadsNow(r); ok {
		return fmt.Sprintf("leader (epoch %d)", e)
	}
	return "standby"
}

func (c *chaosRun) setStopped(name string, v bool) {
	c.mu.Lock()
	if v {
		c.stopped[name] = true
	} else {
		delete(c.stopped, name)
	}
	c.mu.Unlock()
}

// midRun waits up to 2s for a replica (not stopped) in the middle of a
// run, preferring the slot chosen by v; nil if none.
func (c *chaosRun) midRun(v float64) *slot {
	var found *slot
	Poll(2*time.Second, 10*time.Millisecond, func() bool {
		on := c.runningOn(50 * time.Millisecond)
		var ok []*slot
		for _, s := range c.slots {
			if s.r != nil && s.r.Alive() && !s.stopped && on[s.r.Name] {
				ok = append(ok, s)
			}
		}
		if len(ok) == 0 {
			return false
		}
		found = ok[int(v*float64(len(ok)))%len(ok)]
		return true
	})
	return found
}

// operate triggers a job or backfills a range of its slots through the
// API of a live replica.
func (c *chaosRun) operate(kind string, u [4]float64) bool {
	s := c.pick(1, u[0], notStopped)
	if s == nil {
		return false
	}
	job := chaosJobs[int(u[1]*float64(len(chaosJobs)))%len(chaosJobs)].name
	c.mu.Lock()
	c.ops[kind]++
	n := c.ops[kind]
	c.mu.Unlock()
	e := chaos.Event{Kind: chaos.KindOp, Name: kind, Job: job, Replica: s.r.Name}
	var body any
	if kind == "trigger" {
		e.Tick = fmt.Sprintf("chaos-%d", n)
		body = map[string]string{"key": e.Tick, "who": "chaos"}
	} else {
		// A range that fired already, sometimes reaching into a gap:
		// slots still within their record's retention (3 intervals) must
		// be refused as duplicates, older ones are enqueued again (README).
		to := time.Now().Add(-time.Duration(u[2] * float64(20*time.Second))).Truncate(time.Second)
		from := to.Add(-time.Duration(u[3]*8) * time.Second)
		e.Slot = from.UnixMilli()
		body = map[string]any{"from": from.UTC().Format(time.RFC3339), "to": to.UTC().Format(time.RFC3339), "who": "chaos"}
		e.Note = from.UTC().Format(time.RFC3339) + " .. " + to.UTC().Format(time.RFC3339) + ": "
	}
	code, resp, err := apiPost(s.r, "/api/v1/jobs/"+job+"/"+kind, body)
	if err != nil {
		e.Note += "request failed: " + err.Error()
	} else {
		e.Note += fmt.Sprintf("HTTP %d %s", code, strings.TrimSpace(resp))
	}
	c.h.Add(e)
	return true
}

// apiPost posts a JSON body to a replica's API with the run's token.
func apiPost(r *Replica, path string, body any) (int, string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+r.Addr+path, bytes.NewReader(b))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+chaosToken)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(out), err
}
