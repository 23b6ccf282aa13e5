package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/sqlite"
)

// stdoutSlots waits until p printed a tick of job at or after slot ms,
// and returns the slots of job it printed.
func (p *proc) stdoutSlots(t *testing.T, job string, atLeast int64) []int64 {
	t.Helper()
	return p.waitSlots(t, job, fmt.Sprintf("no tick of %s at or after %d", job, atLeast), func(s []int64) bool {
		return len(s) > 0 && s[len(s)-1] >= atLeast
	})
}

// stdoutCount waits until p has printed at least n ticks of job and
// returns the slots printed so far.
func (p *proc) stdoutCount(t *testing.T, job string, n int) []int64 {
	t.Helper()
	return p.waitSlots(t, job, fmt.Sprintf("fewer than %d ticks of %s", n, job), func(s []int64) bool { return len(s) >= n })
}

// waitSlots waits (20 s at most) until the slots p printed for job satisfy ok.
func (p *proc) waitSlots(t *testing.T, job, what string, ok func([]int64) bool) []int64 {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		slots := p.printedSlots(job)
		if ok(slots) {
			return slots
		}
		select {
		case <-p.stdout.wake:
		case <-p.done:
			t.Fatalf("%s exited (code %d)", p.name, p.code)
		case <-deadline:
			t.Fatalf("%s printed %s within 20s", p.name, what)
		}
	}
}

// TestRunOnFile: `run --data FILE` keeps the state in the file. A second
// process on the same file stands by while the first leads; after the
// first stops and the machine "is down" for a while, a restart catches up
// every slot it missed (prefer: duplicate), and no slot is printed twice.
func TestRunOnFile(t *testing.T) {
	data := filepath.Join(t.TempDir(), "state", "onetick.db")
	cfg := writeFile(t, "file.yaml", "jobs:\n  - name: fast\n    schedule: \"@every 200ms\"\n    prefer: duplicate\n    max_catchup: 1000\n")
	first := startProc(t, "first", "--config", cfg, "--data", data)
	if ev, _ := first.waitEvent("using the durable file store: one host, state survives a restart; ticks go to standard output as JSON lines", 0, 10*time.Second); ev.Msg == "" {
		t.Fatal("no notice of the file store")
	}
	first.waitEvent("became leader", 0, 10*time.Second)
	before := first.stdoutSlots(t, "fast", time.Now().UnixMilli()+400)

	// A second process on the file while the first leads: it never leads.
	second := startProc(t, "second", "--config", cfg, "--data", data)
	second.waitEvent("onetick started", 0, 10*time.Second)
	first.stdoutSlots(t, "fast", time.Now().UnixMilli()+600)
	second.signal(syscall.SIGTERM)
	if code := second.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("second exited with %d", code)
	}
	second.mu.Lock()
	for _, e := range second.events {
		if e.Msg == "became leader" {
			second.mu.Unlock()
			t.Fatal("a second process on the same file became leader while the first led")
		}
	}
	second.mu.Unlock()
	second.stdout.mu.Lock()
	printed := len(second.stdout.lines)
	second.stdout.mu.Unlock()
	if printed != 0 {
		t.Fatalf("the second process printed %d ticks", printed)
	}

	first.signal(syscall.SIGTERM)
	if code := first.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("first exited with %d", code)
	}
	firstSlots := first.stdoutSlots(t, "fast", before[len(before)-1])
	down := time.Now()
	time.Sleep(1500 * time.Millisecond) // the downtime is the scenario
	third := startProc(t, "third", "--config", cfg, "--data", data)
	thirdSlots := third.stdoutSlots(t, "fast", time.Now().UnixMilli()+400)
	all := append(append([]int64(nil), firstSlots...), thirdSlots...)
	for i := 1; i < len(all); i++ {
		if all[i] != all[i-1]+200 {
			t.Fatalf("slot %d follows %d: want every slot once across the restart (first %v, third %v)", all[i], all[i-1], firstSlots, thirdSlots)
		}
	}
	if last := firstSlots[len(firstSlots)-1]; last > down.UnixMilli() || thirdSlots[0] != last+200 {
		t.Fatalf("the restart did not resume right after the last slot before the downtime (%d): %v", last, thirdSlots[:1])
	}
}

// printedSlots returns every slot of job that p printed, so far.
func (p *proc) printedSlots(job string) []int64 {
	p.stdout.mu.Lock()
	defer p.stdout.mu.Unlock()
	var out []int64
	for _, l := range p.stdout.lines {
		var x struct {
			Job  string `json:"job"`
			Slot int64  `json:"slot"`
		}
		if json.Unmarshal([]byte(l), &x) == nil && x.Job == job {
			out = append(out, x.Slot)
		}
	}
	return out
}

// TestRunOnFileRestartsAtOnce: the single host after a crash. The daemon
// on the file store is killed with SIGKILL, its lease (15 s TTL) still in
// the file, and started again at once, ten times: each time the new
// process leads and fires at once, because the dead one's term lock proves
// it gone, instead of waiting out the TTL. No slot is printed twice.
func TestRunOnFileRestartsAtOnce(t *testing.T) {
	data := filepath.Join(t.TempDir(), "state", "onetick.db")
	cfg := writeFile(t, "restart.yaml", "jobs:\n  - name: fast\n    schedule: \"@every 200ms\"\n    prefer: duplicate\n    max_catchup: 1000\n")
	p := startProc(t, "r0", "--config", cfg, "--data", data)
	p.stdoutSlots(t, "fast", 0)
	printed := map[int64]string{}
	collect := func(p *proc) {
		for _, s := range p.printedSlots("fast") {
			if by, ok := printed[s]; ok {
				t.Fatalf("slot %d printed by %s and again by %s", s, by, p.name)
			}
			printed[s] = p.name
		}
	}
	var leading, firstTick, late []time.Duration
	for round := 1; round <= 10; round++ {
		p.signal(syscall.SIGKILL)
		p.wait(t, 15*time.Second)
		collect(p)
		start := time.Now()
		p = startProc(t, "r"+strconv.Itoa(round), "--config", cfg, "--data", data)
		ev, _ := p.waitEvent("became leader", 0, 30*time.Second)
		first := p.stdoutSlots(t, "fast", 0)[0]
		firstTick = append(firstTick, time.Since(start))
		late = append(late, time.Since(time.UnixMilli(first)))
		leading = append(leading, ev.Time.Sub(start))
		// A few ticks of its own before the next crash.
		p.stdoutSlots(t, "fast", time.Now().UnixMilli()+400)
	}
	p.signal(syscall.SIGKILL)
	p.wait(t, 15*time.Second)
	collect(p)
	for _, d := range [][]time.Duration{leading, firstTick, late} {
		slices.Sort(d)
	}
	t.Logf("kill -9, restart -> leading: p50 %s, max %s; -> first tick printed: p50 %s, max %s, that tick past its slot by p50 %s, max %s (%d rounds, lease TTL 15s)",
		leading[len(leading)/2], leading[len(leading)-1], firstTick[len(firstTick)/2], firstTick[len(firstTick)-1],
		late[len(late)/2], late[len(late)-1], len(firstTick))
	// Generous for a loaded machine; waiting out the TTL takes 15 s.
	if worst := firstTick[len(firstTick)-1]; worst > 5*time.Second {
		t.Fatalf("a restart after kill -9 printed its first tick %s after it started (all: %v): it waited for the dead process's lease", worst, firstTick)
	}
}

// TestRunOnFileRefusesDamagedLog is issue 17's reproduction: the daemon
// is killed with SIGKILL, then 64 bytes of garbage are written into its
// write-ahead log. `status` refuses the file (exit 1) naming the file, the
// log and the commit record, instead of showing an older last-fired slot;
// `run` refuses it too and prints no tick (it would fire again ticks it
// had printed); neither writes to the files.
func TestRunOnFileRefusesDamagedLog(t *testing.T) {
	data := filepath.Join(t.TempDir(), "onetick.db")
	cfg := writeFile(t, "wal.yaml", "jobs:\n  - name: fast\n    schedule: \"@every 200ms\"\n    prefer: duplicate\n    max_catchup: 1000\n")
	p := startProc(t, "first", "--config", cfg, "--data", data)
	p.stdoutCount(t, "fast", 6)
	p.signal(syscall.SIGKILL)
	p.wait(t, 15*time.Second)
	if n := len(p.printedSlots("fast")); n < 6 {
		t.Fatalf("%d ticks printed before the kill", n)
	}
	wal, err := os.ReadFile(data + "-wal")
	if err != nil || len(wal) < 32+24+4096 {
		t.Fatalf("write-ahead log after the kill: %d bytes, %v", len(wal), err)
	}
	// Into the page of the log's first frame: every commit after it is
	// dropped by SQLite's recovery.
	for i := 0; i < 64; i++ {
		wal[100+i] ^= 0xa5
	}
	if err := os.WriteFile(data+"-wal", wal, 0o600); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, s := range []string{"", "-wal", "-commit"} {
		if b, err := os.ReadFile(data + s); err == nil {
			before[s] = string(b)
		}
	}

	out, stderr, code := runCmd(t, nil, "status", "--config", cfg, "--data", data)
	if code != 1 {
		t.Fatalf("status of a store whose log is damaged: exit %d, want 1\n%s%s", code, out, stderr)
	}
	for _, w := range []string{data + ": corrupted onetick store", data + "-wal is damaged", "move " + data + "-commit aside"} {
		if !strings.Contains(stderr, w) {
			t.Fatalf("status: %q does not say %q", stderr, w)
		}
	}
	second := startProc(t, "second", "--config", cfg, "--data", data)
	if code := second.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("run on a store whose log is damaged: exit %d, want 1", code)
	}
	if n := len(second.printedSlots("fast")); n != 0 {
		t.Fatalf("run on a store whose log is damaged printed %d ticks", n)
	}
	for s, b := range before {
		if now, _ := os.ReadFile(data + s); string(now) != b {
			t.Fatalf("%s%s changed", data, s)
		}
	}
	t.Logf("status: %s", strings.TrimSpace(stderr))
}

// TestFileStoreModes: a store file and directory others can reach are
// named with their modes by `validate`, `status` and `run`.
func TestFileStoreModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	data := filepath.Join(dir, "onetick.db")
	b, err := sqlite.Open(data, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if err := os.Chmod(data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "modes.yaml", "backend: {file: {path: "+data+"}}\njobs:\n  - {name: solo, schedule: \"@every 1s\"}\n")
	fileWarn, dirWarn := "the store "+data+" is mode 0644", "the store's directory "+dir+" is mode 0755"
	_, stderr, code := runCmd(t, nil, "validate", "--config", cfg)
	if code != 0 || !strings.Contains(stderr, fileWarn) || !strings.Contains(stderr, dirWarn) {
		t.Fatalf("validate: exit %d, stderr %q; want 0 and both warnings", code, stderr)
	}
	_, stderr, code = runCmd(t, nil, "status", "--config", cfg)
	if code != 0 || !strings.Contains(stderr, "level=WARN") || !strings.Contains(stderr, fileWarn) || !strings.Contains(stderr, dirWarn) {
		t.Fatalf("status: exit %d, stderr %q; want 0 and both warnings", code, stderr)
	}
	p := startProc(t, "solo", "--config", cfg)
	ev, _ := p.waitEvent(fileWarn+": others than its owner can read or write it; chmod 600 "+data+" (onetick makes it 0600)", 0, 20*time.Second)
	if !strings.Contains(ev.Raw, `"level":"WARN"`) || !strings.Contains(ev.Raw, `"mode":"0644"`) {
		t.Fatalf("run's warning: %s", ev.Raw)
	}
	p.waitEvent(dirWarn+": others can list and reach it; chmod o-rwx "+dir+" (onetick makes it 0700)", 0, 20*time.Second)
}
