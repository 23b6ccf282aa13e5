package redistest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyLine is what redis-server logs once it accepts connections.
const readyLine = "Ready to accept connections"

// logLines is how many of a process's last log lines are kept.
const logLines = 2000

// Server is one redis-server process (a data node, a Sentinel or a
// cluster node). Its port and directory survive a Restart.
type Server struct {
	// Port is the client port (the TLS port when the server speaks TLS).
	Port int
	// BusPort is the cluster bus port of a cluster node, else 0.
	BusPort int

	tb       testing.TB
	dir      string
	bin      string
	argv     func(port int) []string
	ready    string
	confFile string

	certs     *Certs
	tlsAuth   ClientAuth
	aclFile   string
	users     map[string]string
	adminUser string
	adminPass string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
	log    []string
}

// live holds the processes this package started and has not yet seen
// exit, with the name of the test that started each, so a test can prove
// that nothing it started outlives it.
var live sync.Map // pid -> test name

// livePids lists the processes started by the test named (or one of its
// subtests) that still run; "" lists all.
func livePids(test string) []int {
	var pids []int
	live.Range(func(k, v any) bool {
		if name := v.(string); test == "" || name == test || strings.HasPrefix(name, test+"/") {
			pids = append(pids, k.(int))
		}
		return true
	})
	sort.Ints(pids)
	return pids
}

// start runs the binary and waits for the line that says it is ready.
func (s *Server) start() error { return s.launch()() }

// launch runs the binary and returns a function that waits until it is
// ready; servers that must find each other at once start together.
func (s *Server) launch() (wait func() error) {
	cmd := exec.Command(s.bin, s.argv(s.Port)...)
	cmd.Dir = s.dir
	// The server dies with the test binary even when the binary is killed
	// (a test timeout, ^C) before its cleanups run. The signal follows the
	// OS thread that forked, not the process; the Go runtime retires a
	// thread only when a goroutine exits while locked to it, which this
	// package never does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return func() error { return err }
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return func() error { return err }
	}
	pid := cmd.Process.Pid
	live.Store(pid, s.tb.Name())
	ready := make(chan struct{})
	done := make(chan struct{})
	var head strings.Builder // the log until ready, for the error below
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			s.appendLog(line)
			if !signalled {
				head.WriteString(line + "\n")
				if strings.Contains(line, s.ready) {
					signalled = true
					close(ready)
				}
			}
		}
		_ = cmd.Wait()
		live.Delete(pid)
		close(done)
	}()
	return func() error {
		select {
		case <-ready:
		case <-done:
			return fmt.Errorf("redis-server on port %d exited before it was ready:\n%s", s.Port, head.String())
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d not ready after 20s", s.Port)
		}
		s.mu.Lock()
		s.cmd, s.done, s.paused = cmd, done, false
		s.mu.Unlock()
		return nil
	}
}

func (s *Server) appendLog(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) == logLines {
		copy(s.log, s.log[1:])
		s.log = s.log[:logLines-1]
	}
	s.log = append(s.log, line)
}

// Log is the process's recent log (its last 2000 lines, across restarts),
// for tests that read what Redis did and when (Sentinel events, say).
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

// Pid is the process id of the running server, 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the process is alive (paused counts as alive).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Paused reports whether the process is stopped by Pause.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil && s.paused
}

// Pause stops the process (SIGSTOP); Resume continues it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
		s.paused = paused
	}
}

// Kill kills the process (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.paused = nil, false
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the server and starts it again on the same port and
// directory, with the same arguments. Data survives only with AppendOnly;
// a node that Redis reconfigured (a Sentinel's replica, a cluster node)
// comes back with the configuration Redis saved.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	var err error
	for i := 0; i < 50; i++ {
		if err = s.start(); err == nil {
			return
		}
		// Only a bind failure is worth another try: the kernel may not
		// have released the port of the killed process yet.
		if !strings.Contains(err.Error(), "in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

// cleanup kills the process; when the test failed, it shows the end of
// the process's log, which is usually where the reason is.
func (s *Server) cleanup() {
	s.Kill()
	if s.tb.Failed() {
		s.mu.Lock()
		tail := s.log[max(0, len(s.log)-40):]
		s.mu.Unlock()
		s.tb.Logf("redistest: last log lines of %s:\n%s", s.Addr(), strings.Join(tail, "\n"))
	}
}

// writeFile writes lines to dir/name and returns the path.
func writeFile(tb testing.TB, dir, name string, lines []string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return p
}
