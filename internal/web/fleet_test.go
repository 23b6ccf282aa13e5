package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fleet of the browser tests: real `onetick run` processes, built
// once per test binary from cmd/onetick.

var (
	binDir   string // made by TestMain, removed after the tests
	binOnce  sync.Once
	binPath  string
	binError error
)

func onetickBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(binDir, "onetick")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/onetick/onetick/cmd/onetick").CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("building onetick: %v\n%s", err, out)
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// fleet is replicas of one configuration.
type fleet struct {
	t    *testing.T
	cfg  string
	wake chan struct{} // any replica logged or exited
}

func newFleet(t *testing.T, cfg string) *fleet {
	return &fleet{t: t, cfg: writeConfig(t, cfg), wake: make(chan struct{}, 1)}
}

// replica is one running `onetick run`.
type replica struct {
	t    *testing.T
	f    *fleet
	name string
	cmd  *exec.Cmd
	addr string // its HTTP listener

	mu     sync.Mutex
	events []logEvent
	wake   chan struct{} // a new event, or the process exited
	done   chan struct{}
}

type logEvent struct {
	Msg   string `json:"msg"`
	Addr  string `json:"addr"`
	Epoch int64  `json:"epoch"`
}

// start starts `onetick run` as name, listening on a free loopback port,
// and returns once it listens. It is killed at the end of the test.
func (f *fleet) start(name string) *replica {
	t := f.t
	t.Helper()
	r := &replica{t: t, f: f, name: name, wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.cmd = exec.Command(onetickBinary(t), "run", "--config", f.cfg, "--replica", name,
		"--listen", "127.0.0.1:0", "--log-format", "json")
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer r.notify()
		defer close(r.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var ev logEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				t.Logf("%s: %s", name, sc.Text())
				continue
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
			r.notify()
		}
		_ = r.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
	r.addr = r.waitEvent("http listening", 0, 20*time.Second).Addr
	return r
}

func (r *replica) notify() {
	for _, c := range []chan struct{}{r.wake, r.f.wake} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// mark is the number of events logged so far, for waitEvent's from.
func (r *replica) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// waitEvent waits for a log line with msg at or after index from.
func (r *replica) waitEvent(msg string, from int, timeout time.Duration) logEvent {
	r.t.Helper()
	if ev, ok := r.find(msg, from); ok {
		return ev
	}
	deadline := time.After(timeout)
	for {
		select {
		case <-r.wake:
		case <-r.done:
			if ev, ok := r.find(msg, from); ok {
				return ev
			}
			r.t.Fatalf("%s exited before logging %q", r.name, msg)
		case <-deadline:
			r.t.Fatalf("%s did not log %q within %s", r.name, msg, timeout)
		}
		if ev, ok := r.find(msg, from); ok {
			return ev
		}
	}
}

func (r *replica) find(msg string, from int) (logEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events[min(from, len(r.events)):] {
		if ev.Msg == msg {
			return ev, true
		}
	}
	return logEvent{}, false
}

// leader waits until one of rs logs "became leader" at or after its mark
// and returns it with its epoch.
func (f *fleet) leader(rs []*replica, marks []int, timeout time.Duration) (*replica, int64) {
	f.t.Helper()
	deadline := time.After(timeout)
	for {
		for i, r := range rs {
			if ev, ok := r.find("became leader", marks[i]); ok {
				return r, ev.Epoch
			}
		}
		select {
		case <-f.wake:
		case <-deadline:
			f.t.Fatalf("no replica became leader within %s", timeout)
		}
	}
}

func (r *replica) stop(sig syscall.Signal) {
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		r.t.Fatalf("%s did not exit within 15s of %s", r.name, sig)
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "onetick.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
