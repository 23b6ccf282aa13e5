package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/testsupport/redisserver"
)

// readyLine is what redis-server logs once it accepts connections.
const readyLine = redisserver.ReadyLine

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
	proc   *redisserver.Process // nil while not running
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
// ready; servers that must find each other at once start together. The
// process dies with the test binary even when the binary is killed (a
// test timeout, ^C) before its cleanups run.
func (s *Server) launch() (wait func() error) {
	name := s.tb.Name()
	p, err := redisserver.Launch(redisserver.Command{
		Bin: s.bin, Args: s.argv(s.Port), Dir: s.dir, Ready: s.ready, Log: s.appendLog,
		Started: func(pid int) { live.Store(pid, name) },
		Exited:  func(pid int) { live.Delete(pid) },
	})
	if err != nil {
		return func() error { return err }
	}
	return func() error {
		if err := p.Wait(0); err != nil {
			return fmt.Errorf("redis-server on port %d: %w", s.Port, err)
		}
		s.mu.Lock()
		s.proc, s.paused = p, false
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
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// Running reports whether the process is alive (paused counts as alive).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return false
	}
	select {
	case <-s.proc.Done():
		return false
	default:
		return true
	}
}

// Paused reports whether the process is stopped by Pause.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.paused
}

// Pause stops the process (SIGSTOP); Resume continues it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.Signal(sig)
		s.paused = paused
	}
}

// Kill kills the process (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc, s.paused = nil, false
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.Signal(syscall.SIGCONT)
	p.Kill()
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
