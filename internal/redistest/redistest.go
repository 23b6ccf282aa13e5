// Package redistest starts real redis-server processes on free loopback
// ports for tests, and lets a test kill, pause, resume and restart them.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	Port int
	tb   testing.TB
	dir  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Option adds redis-server arguments.
type Option func(*[]string)

// AppendOnly turns on AOF persistence with fsync on every write.
func AppendOnly() Option {
	return func(a *[]string) { *a = append(*a, "--appendonly", "yes", "--appendfsync", "always") }
}

// KeyspaceEvents enables keyspace notifications for generic and expired
// events, so watchers hear about lease expiry.
func KeyspaceEvents() Option {
	return func(a *[]string) { *a = append(*a, "--notify-keyspace-events", "Kgx") }
}

// Start starts a redis-server on a free port; it is killed at the end of
// the test. The binary comes from PATH; `make test` installs it.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redis-server not found on PATH (run `make test`, which installs it): %v", err)
	}
	var extra []string
	for _, o := range opts {
		o(&extra)
	}
	s := &Server{tb: tb, dir: tb.TempDir()}
	for attempt := 0; ; attempt++ {
		s.Port = freePort(tb)
		s.args = append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", "", "--daemonize", "no"}, extra...)
		err := s.start(bin)
		if err == nil {
			break
		}
		if attempt == 4 {
			tb.Fatalf("redistest: %v", err)
		}
	}
	tb.Cleanup(s.Kill)
	return s
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs the binary and waits for its "Ready to accept connections".
func (s *Server) start(bin string) error {
	cmd := exec.Command(bin, s.args...)
	cmd.Dir = s.dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	var logBuf strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if !signalled {
				logBuf.WriteString(line + "\n")
				if strings.Contains(line, "Ready to accept connections") {
					signalled = true
					close(ready)
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
		return fmt.Errorf("redis-server on port %d exited before it was ready:\n%s", s.Port, logBuf.String())
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis-server on port %d not ready after 20s", s.Port)
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Client returns a client that is closed at the end of the test.
func (s *Server) Client() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Pid is the process id of the running server.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Pause stops the process (SIGSTOP); Resume continues it.
func (s *Server) Pause()  { s.signal(syscall.SIGSTOP) }
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Kill kills the process (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the server and starts it again on the same port and
// directory (so an append-only file, if enabled, is replayed).
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	bin, _ := exec.LookPath("redis-server")
	var err error
	for i := 0; i < 50; i++ { // the port may linger briefly after the kill
		if err = s.start(bin); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

// Flush empties the server.
func (s *Server) Flush(ctx context.Context) error {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	defer c.Close()
	return c.FlushAll(ctx).Err()
}
