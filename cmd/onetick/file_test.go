package main_test

import (
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// stdoutSlots waits until p printed a tick of job at or after slot ms,
// and returns the slots of job it printed.
func (p *proc) stdoutSlots(t *testing.T, job string, atLeast int64) []int64 {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		var slots []int64
		p.stdout.mu.Lock()
		for _, l := range p.stdout.lines {
			var x struct {
				Job  string `json:"job"`
				Slot int64  `json:"slot"`
			}
			if json.Unmarshal([]byte(l), &x) == nil && x.Job == job {
				slots = append(slots, x.Slot)
			}
		}
		p.stdout.mu.Unlock()
		if n := len(slots); n > 0 && slots[n-1] >= atLeast {
			return slots
		}
		select {
		case <-p.stdout.wake:
		case <-p.done:
			t.Fatalf("%s exited (code %d)", p.name, p.code)
		case <-deadline:
			t.Fatalf("%s printed no tick of %s at or after %d within 20s", p.name, job, atLeast)
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
