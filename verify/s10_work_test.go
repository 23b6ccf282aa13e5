//go:build verify

package verify

// Running the work once: three replicas schedule and work command jobs
// while leaders and workers are killed with SIGKILL and the fleet is
// replaced by a rolling deploy; on Redis, on PostgreSQL and on the
// embedded file store.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/pgtest"
)

// workJobs is the work scenario's jobs section (and its worker's), to
// follow a "jobs:" line; %q is the work log.
const workJobs = `  - name: work
    schedule: "@every 1s"
    stream: verify:work
    prefer: duplicate
    run:
      command:
        argv: [sh, -c, 'echo "start $ONETICK_TICK $ONETICK_ATTEMPT $(date +%%s%%N) $PPID" >> "$OUT"; sleep 0.4; echo "done $ONETICK_TICK $ONETICK_ATTEMPT $(date +%%s%%N) $PPID" >> "$OUT"']
        env: {OUT: %q}
      overlap: skip
      max_attempts: 3
      backoff: 200ms
worker:
  takeover_idle: 3s
  heartbeat: 500ms
  shutdown_timeout: 2s
`

// workYAML is the work scenario's configuration on Redis, writing its
// work log to out.
func workYAML(out string) string { return fleetYAML + fmt.Sprintf(workJobs, out) }

// run is one line of the work log: start or done of a tick's attempt.
type runLine struct {
	kind, tick string
	attempt    int
	at         time.Time
	pid        string // the supervisor's pid: one per run
}

func readRuns(t *testing.T, path string) []runLine {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no run yet
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []runLine
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			continue // a line cut by a kill
		}
		a, _ := strconv.Atoi(f[2])
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		out = append(out, runLine{kind: f[0], tick: f[1], attempt: a, at: time.Unix(0, ns), pid: f[4]})
	}
	return out
}

// parentOf is the parent pid of process pid (0 if it is gone).
func parentOf(pid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	_, rest, ok := strings.Cut(string(b[bytes.LastIndexByte(b, ')')+1:]), " ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// awaitRun waits up to d for a run of the work job in flight on one of
// rs (its start line written, not its done line; the run's supervisor,
// whose pid the line carries, a child of the replica), and returns the
// replica and the run's tick.
func awaitRun(t *testing.T, out string, rs []*Replica, d time.Duration) (*Replica, string, bool) {
	var who *Replica
	var tick string
	ok := Poll(d, 20*time.Millisecond, func() bool {
		runs := readRuns(t, out)
		done := map[string]bool{}
		for _, l := range runs {
			if l.kind == "done" {
				done[l.tick+" "+l.pid] = true
			}
		}
		for i := len(runs) - 1; i >= 0; i-- {
			l := runs[i]
			if l.kind != "start" || done[l.tick+" "+l.pid] {
				continue
			}
			pp := parentOf(l.pid)
			for _, r := range rs {
				if r.Alive() && pp == r.cmd.Process.Pid {
					who, tick = r, l.tick
					return true
				}
			}
		}
		return false
	})
	return who, tick, ok
}

// TestWorkOnce: every tick enqueued is completed (the job prefers
// duplicate: a tick due while a run is in flight waits, whatever overlap
// skip says, and the catch-up batches after a leader's death run one
// after another); a tick completes twice only when the worker running it
// was killed after its side effect and before its done record (each such
// case is named); two runs of the job never overlap, and they start in
// slot order; a killed replica's command does not outlive it.
func TestWorkOnce(t *testing.T) {
	const scenario = "10. run the work once"
	Scenario(t, scenario)
	out := filepath.Join(t.TempDir(), "work.log")
	workOnce(t, scenario, NewFleetWith(t, scenario, StartRedis(t), workYAML(out)), out, "3 replicas")
}

// TestWorkOncePostgres: as TestWorkOnce, the fleet on PostgreSQL (the
// machine's server, a schema of its own).
func TestWorkOncePostgres(t *testing.T) {
	const scenario = "10b. postgres: run the work once"
	Scenario(t, scenario)
	out := filepath.Join(t.TempDir(), "work.log")
	pf := newPGFleet(t, scenario, pgtest.URL(), func(y string) string { return withJobs(y, fmt.Sprintf(workJobs, out)) })
	workOnce(t, scenario, pf.Fleet, out, "3 replicas on PostgreSQL")
}

// TestWorkOnceFile: as TestWorkOnce, the fleet on the embedded file
// store: every process on one SQLite file, one leading at a time, each
// running a worker.
func TestWorkOnceFile(t *testing.T) {
	const scenario = "10c. file store: run the work once"
	Scenario(t, scenario)
	out := filepath.Join(t.TempDir(), "work.log")
	workOnce(t, scenario, NewFileFleet(t, scenario, workYAML(out)), out, "3 processes on one file store")
}

// workOnce is the work scenario on fleet f, whose command appends to
// the work log out; fleet says what f is, for the report. Three replicas
// start; the leader is killed mid-run twice and a worker that is not the
// leader once, each replaced at once; then a rolling deploy replaces
// every replica. Then every slot of the job must have completed, the
// first runs in slot order, a tick twice only right after a kill, no two
// runs at once and no command outliving its replica.
func workOnce(t *testing.T, scenario string, f *Fleet, out, fleet string) {
	for i := 1; i <= 3; i++ {
		f.Start(fmt.Sprintf("r%d", i))
	}
	leader := f.WaitLeader(2 * ttl)
	Settle(4 * time.Second)

	var kills []string               // what each kill hit
	killed := map[string]time.Time{} // replica -> kill instant
	next := 4
	cut := map[string]time.Time{} // tick -> the kill that cut its run
	// killMidRun kills one of rs in the middle of a run of it (the first
	// of them to start one within 30s, else rs[0] between runs, noted)
	// and starts a replacement.
	killMidRun := func(what string, rs []*Replica) {
		r, tick, ok := awaitRun(t, out, rs, 30*time.Second)
		if !ok {
			r = rs[0]
			WaitPhase(200 * time.Millisecond) // runs start at whole seconds and last 0.4s
			kills = append(kills, fmt.Sprintf("%s %s ran no tick for 30s: killed between runs", what, r.Name))
		}
		killed[r.Name] = f.Kill(r)
		if ok {
			cut[tick] = killed[r.Name]
			kills = append(kills, fmt.Sprintf("%s %s killed while it ran %s", what, r.Name, tick))
		}
		f.Start(fmt.Sprintf("r%d", next))
		next++
	}
	// Kill the leader (it works too) in the middle of a run, twice.
	for round := 0; round < 2; round++ {
		killMidRun("the leader", []*Replica{leader})
		leader = f.WaitLeader(ttl + renew + 5*time.Second)
		Settle(4 * time.Second)
	}
	// Kill a worker that is not the leader, in the middle of a run.
	var others []*Replica
	for _, r := range f.Live() {
		if r != leader {
			others = append(others, r)
		}
	}
	killMidRun("a worker that did not lead,", others)
	Settle(4 * time.Second)
	// A rolling deploy: each replica replaced, with overlap.
	for _, r := range f.Live() {
		f.Start(fmt.Sprintf("r%d", next))
		next++
		WaitPhase(500 * time.Millisecond)
		f.Stop(r)
		Settle(2 * time.Second)
	}
	Settle(3 * ttl) // taken-over ticks run again after the takeover idle time

	// Every scheduled tick ran to completion, at least once.
	entries := f.ReadStream("work")
	runs := readRuns(t, out)
	starts, dones := map[string][]runLine{}, map[string][]runLine{}
	for _, r := range runs {
		if r.kind == "start" {
			starts[r.tick] = append(starts[r.tick], r)
		} else {
			dones[r.tick] = append(dones[r.tick], r)
		}
	}
	scheduled := map[string]bool{}
	for _, e := range entries {
		scheduled[e.Tick] = true
	}
	var missing []string
	for tk := range scheduled {
		if len(dones[tk]) == 0 {
			missing = append(missing, tk)
		}
	}
	sort.Strings(missing)
	// The newest ticks may still be running.
	lastSlot := entries[len(entries)-1].Slot
	var missingOld []string
	for _, tk := range missing {
		if !strings.HasSuffix(tk, strconv.FormatInt(int64(lastSlot), 10)) {
			missingOld = append(missingOld, tk)
		}
	}
	// prefer: duplicate: nothing is skipped for overlap, every slot ran.
	skipped := 0.0
	for _, r := range f.All() {
		skipped += f.LastMetrics(r)[`worker_runs_total{job_name="work",outcome="skipped_overlap"}`]
	}
	if len(missingOld) > 0 || skipped > 0 {
		t.Errorf("%d scheduled ticks never completed (%v), %.0f skipped for overlap: a job that prefers duplicate runs every slot", len(missingOld), missingOld, skipped)
	}
	// The first runs start in slot order.
	type first struct {
		at   time.Time
		tick string
	}
	var firsts []first
	for tk, ss := range starts {
		firsts = append(firsts, first{ss[0].at, tk})
	}
	sort.Slice(firsts, func(i, k int) bool { return firsts[i].at.Before(firsts[k].at) })
	outOfOrder := 0
	for i := 1; i < len(firsts); i++ {
		if firsts[i].tick < firsts[i-1].tick { // same job, same width: ids order as slots
			outOfOrder++
			t.Errorf("%s started at %s, after %s", firsts[i].tick, firsts[i].at.Format("15:04:05.000"), firsts[i-1].tick)
		}
	}
	// Twice only after a kill between the side effect and the done record.
	twice, explained := 0, 0
	var causes []string
	for tk, ds := range dones {
		if len(ds) < 2 {
			continue
		}
		twice++
		first := ds[0]
		for name, at := range killed {
			if !at.Before(first.at) && at.Sub(first.at) < 2*time.Second {
				explained++
				causes = append(causes, fmt.Sprintf("%s: %s was killed %s after its run's side effect, before the done record", tk, name, at.Sub(first.at).Round(time.Millisecond)))
				break
			}
		}
	}
	if twice != explained {
		t.Errorf("%d ticks completed twice, only %d explained by a kill: %v", twice, explained, causes)
	}
	// No two runs overlap in time (overlap: skip, fleet-wide).
	type span struct {
		from, to time.Time
		tick     string
	}
	var spans []span
	for tk, ss := range starts {
		for _, s := range ss {
			end := s.at.Add(400 * time.Millisecond)
			for _, d := range dones[tk] {
				if d.pid == s.pid {
					end = d.at
				}
			}
			spans = append(spans, span{s.at, end, tk})
		}
	}
	sort.Slice(spans, func(i, k int) bool { return spans[i].from.Before(spans[k].from) })
	overlaps := 0
	for i := 1; i < len(spans); i++ {
		if spans[i].from.Before(spans[i-1].to.Add(-5 * time.Millisecond)) {
			overlaps++
			t.Errorf("runs overlap: %s from %s and %s until %s", spans[i].tick, spans[i].from.Format("15:04:05.000"),
				spans[i-1].tick, spans[i-1].to.Format("15:04:05.000"))
		}
	}
	// A killed replica's command did not outlive it: every run either
	// wrote done, or was started by a replica killed within its 0.4s.
	orphans := 0
	for tk, ss := range starts {
		for _, s := range ss {
			finished := false
			for _, d := range dones[tk] {
				finished = finished || d.pid == s.pid
			}
			if finished {
				continue
			}
			cut := false
			for _, at := range killed {
				if !at.Before(s.at) && at.Sub(s.at) < time.Second {
					cut = true
				}
			}
			if !cut && !strings.HasSuffix(tk, strconv.FormatInt(int64(lastSlot), 10)) {
				orphans++
				t.Errorf("run of %s started at %s never finished and no kill explains it", tk, s.at.Format("15:04:05.000"))
			}
		}
	}
	dead := len(f.DeadLetters())
	// Who ran what: every replica works (measured, not asserted).
	var ticks []string
	for tk := range scheduled {
		ticks = append(ticks, tk)
	}
	by := map[string]int{}
	for _, d := range f.DoneRecords(ticks) {
		by[d.Consumer]++
	}
	// How soon each run cut by a kill started again (measured).
	var again []time.Duration
	var agains []string
	cutTicks := make([]string, 0, len(cut))
	for tk := range cut {
		cutTicks = append(cutTicks, tk)
	}
	sort.Strings(cutTicks)
	for _, tk := range cutTicks {
		at := cut[tk]
		var next time.Time
		for _, s := range starts[tk] {
			if s.at.After(at) && (next.IsZero() || s.at.Before(next)) {
				next = s.at
			}
		}
		if next.IsZero() {
			agains = append(agains, tk+" not started again (its run had written done before the kill)")
			continue
		}
		again = append(again, next.Sub(at))
		agains = append(agains, fmt.Sprintf("%s started again %s after the kill", tk, fmtDur(next.Sub(at))))
	}
	var ran []string
	for _, r := range f.All() {
		ran = append(ran, fmt.Sprintf("%s %d", r.Name, by[r.Name]))
		delete(by, r.Name)
	}
	for c, n := range by {
		ran = append(ran, fmt.Sprintf("%s (not a replica's name) %d", c, n))
	}
	sort.Strings(causes)
	notes := []string{fmt.Sprintf("%s scheduling and working a 0.4s command job every second (prefer: duplicate, overlap: skip, heartbeat 500ms, so a liveness TTL of 1.5s); 2 leaders and 1 worker killed with SIGKILL (%d of the 3 while running a tick) and replaced, then a rolling deploy of every replica: %d ticks scheduled, %d completed (the newest may still run when the log is read), %d completed twice (each right after a SIGKILL between its side effect and its done record), %d not completed, %.0f overlap skips counted, %d dead letters, %d overlapping runs, %d first runs out of slot order, %d runs left running by a dead replica.",
		fleet, len(cut), len(scheduled), len(dones), twice, len(missingOld), skipped, dead, overlaps, outOfOrder, orphans)}
	notes = append(notes, "kills: "+strings.Join(kills, "; ")+"; "+strings.Join(append(agains, "ticks run per replica (done records): "+strings.Join(ran, ", ")), "; ")+".")
	for _, c := range causes {
		notes = append(notes, "completed twice: "+c)
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 3 + 3, Duplicates: twice, Missed: fmt.Sprintf("%d", len(missingOld)),
		TimeLabel: "kill → the cut tick starts again", Times: again, Notes: notes})
}
