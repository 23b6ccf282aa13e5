//go:build verify

package verify

// A worker killed with SIGKILL in the middle of its runs: how long until
// each run it was doing runs elsewhere. The fleet keeps the worker's
// defaults (heartbeat 1s, liveness TTL 3s, takeover_idle 30s as the
// backstop): the others take the dead worker's ticks over once its
// liveness lapses in the store.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Each run writes its start and end with the tick, the time and the pid
// of the replica running it (the parent of its supervisor).
const takeoverYAML = fleetYAML + `  - name: long
    schedule: "@every 1s"
    stream: verify:long
    prefer: duplicate
    run:
      command:
        argv: [sh, -c, 'echo "start $ONETICK_TICK $(date +%%s%%N) $(cut -d" " -f4 /proc/$PPID/stat)" >> "$OUT"; sleep 4; echo "done $ONETICK_TICK $(date +%%s%%N) $(cut -d" " -f4 /proc/$PPID/stat)" >> "$OUT"']
        env: {OUT: %q}
      timeout: 30s
      overlap: allow
`

// takeoverRun is one line of the run log.
type takeoverRun struct {
	kind, tick string
	at         time.Time
	pid        int
}

func readTakeoverRuns(t *testing.T, path string) []takeoverRun {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []takeoverRun
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue // a line cut by a kill, or none yet
		}
		ns, err1 := strconv.ParseInt(f[2], 10, 64)
		pid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, takeoverRun{kind: f[0], tick: f[1], at: time.Unix(0, ns), pid: pid})
	}
	return out
}

// TestWorkerTakeover kills, round after round, a replica in the middle of
// runs of a 4-second command job (every second, overlap allow) and
// measures, for each run it was doing, the time from the kill to the same
// tick's start on another replica. Every interrupted run must start again
// elsewhere, and no tick may complete twice.
func TestWorkerTakeover(t *testing.T) {
	const scenario = "14. worker killed mid-run: its ticks run elsewhere"
	const rounds = 10
	Scenario(t, scenario)
	out := filepath.Join(t.TempDir(), "runs.log")
	f := NewFleetWith(t, scenario, StartRedis(t), fmt.Sprintf(takeoverYAML, out))
	for i := 1; i <= 3; i++ {
		f.Start(fmt.Sprintf("r%d", i))
	}
	f.WaitLeader(2 * ttl)
	Settle(3 * time.Second)
	var times []time.Duration
	var leaders int
	killedAt := map[int]time.Time{} // pid -> kill
	next := 4
	for round := 0; round < rounds; round++ {
		// The replica whose newest run started last: it is mid-run.
		byPid := map[int]*Replica{}
		for _, r := range f.Live() {
			byPid[r.cmd.Process.Pid] = r
		}
		var victim *Replica
		if !Poll(20*time.Second, 50*time.Millisecond, func() bool {
			runs := readTakeoverRuns(t, out)
			for i := len(runs) - 1; i >= 0; i-- {
				if r := byPid[runs[i].pid]; r != nil && runs[i].kind == "start" && time.Since(runs[i].at) > 300*time.Millisecond {
					victim = r
					return true
				}
			}
			return false
		}) {
			t.Fatalf("round %d: no run in progress on a live replica", round)
		}
		if ls, _ := f.Leaders(); len(ls) == 1 && ls[0] == victim {
			leaders++
		}
		pid := victim.cmd.Process.Pid
		killed := f.Kill(victim)
		killedAt[pid] = killed
		f.Start(fmt.Sprintf("r%d", next))
		next++
		// The runs the victim was doing: started there, not done there.
		done := map[string]bool{}
		var cut []string
		before := readTakeoverRuns(t, out)
		for _, r := range before {
			if r.pid == pid && r.kind == "done" {
				done[r.tick] = true
			}
		}
		for _, r := range before {
			if r.pid == pid && r.kind == "start" && !done[r.tick] && r.at.Before(killed) {
				cut = append(cut, r.tick)
			}
		}
		if len(cut) == 0 {
			t.Fatalf("round %d: %s was running nothing when killed", round, victim.Name)
		}
		restarted := map[string]time.Time{}
		if !Poll(30*time.Second, 50*time.Millisecond, func() bool {
			for _, r := range readTakeoverRuns(t, out) {
				if r.kind == "start" && r.pid != pid && r.at.After(killed) {
					if _, seen := restarted[r.tick]; !seen {
						restarted[r.tick] = r.at
					}
				}
			}
			for _, tk := range cut {
				if _, ok := restarted[tk]; !ok {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("round %d: the runs %v cut by the kill of %s did not all start again elsewhere within 30s", round, cut, victim.Name)
		}
		for _, tk := range cut {
			times = append(times, restarted[tk].Sub(killed))
		}
		Settle(2 * time.Second)
	}
	Settle(5 * time.Second) // the last reruns end
	// A tick may complete twice only when its first run ended just before
	// its replica was killed, before the done record was written (the
	// documented case).
	dones := map[string][]takeoverRun{}
	for _, r := range readTakeoverRuns(t, out) {
		if r.kind == "done" {
			dones[r.tick] = append(dones[r.tick], r)
		}
	}
	twice := 0
	var causes []string
	for tk, ds := range dones {
		if len(ds) < 2 {
			continue
		}
		twice++
		k, ok := killedAt[ds[0].pid]
		if !ok || k.Before(ds[0].at) || k.Sub(ds[0].at) > 2*time.Second {
			t.Errorf("tick %s completed %d times, and no kill right after its first run explains it", tk, len(ds))
			continue
		}
		causes = append(causes, fmt.Sprintf("completed twice: %s: its replica was killed %s after the run's side effect, before the done record", tk, fmtDur(k.Sub(ds[0].at))))
	}
	sort.Slice(times, func(i, k int) bool { return times[i] < times[k] })
	row := &Row{Scenario: scenario, Runs: rounds, Duplicates: twice, Missed: "0", Times: times,
		TimeLabel: "kill → the tick runs elsewhere",
		Notes: []string{fmt.Sprintf("3 replicas working a 4 s command job every second (overlap allow; worker defaults: heartbeat 1 s, liveness TTL 3 s, takeover_idle 30 s as the backstop); %d rounds, each a SIGKILL of the replica with the newest run (%d of them the leader) and a replacement started: %d runs cut by the kills, each started again on another replica %s after the kill at p50, %s at p99 (min %s, max %s).",
			rounds, leaders, len(times), fmtDur(percentile(times, 0.5)), fmtDur(percentile(times, 0.99)), fmtDur(times[0]), fmtDur(times[len(times)-1]))},
	}
	sort.Strings(causes)
	row.Notes = append(row.Notes, causes...)
	AddRow(t, row)
}
