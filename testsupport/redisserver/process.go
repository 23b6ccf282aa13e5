// Package redisserver is test support: it starts redis-server processes
// on free loopback ports and stops them, for tests and benchmarks. It
// knows nothing of package testing, so the benchmark harness (a module of
// its own, which cannot import the main module's internal packages) uses
// it as well as internal/redistest, which adds what tests need on top
// (testing.TB cleanups, TLS, ACL users, Sentinel and Cluster topologies).
//
// Launch starts any redis-server or redis-sentinel command and Wait waits
// until it logs that it accepts connections; Start is the common case of a
// standalone server without persistence in a directory of its own.
package redisserver

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ReadyLine is what redis-server logs once it accepts connections.
const ReadyLine = "Ready to accept connections"

// ReadyTimeout is how long Wait waits for the ready line by default.
const ReadyTimeout = 20 * time.Second

// Binary returns the path of redis-server on PATH.
func Binary() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found on PATH (`make test` and `make bench` install it): %w", err)
	}
	return bin, nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
// Another process may take it before the server binds it: callers that
// start a server on it try again on a new port when the start fails.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// BaseArgs are the arguments of a server on the loopback interface
// without persistence, working in dir and logging to its standard output
// (where Launch reads the ready line). Later arguments override them.
func BaseArgs(dir string) []string {
	return []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "", "--daemonize", "no"}
}

// Command describes a process to launch.
type Command struct {
	// Bin is the binary; empty: redis-server from PATH.
	Bin string
	// Args are its arguments.
	Args []string
	// Dir is its working directory; empty: the caller's.
	Dir string
	// Ready is the log line that says it is ready; empty: ReadyLine.
	Ready string
	// Log, if set, receives every line the process writes, in order, from
	// one goroutine, across the ready line and until the process exits.
	Log func(line string)
	// Started, if set, is called with the process id once the process
	// runs, before Exited can be called; Exited, if set, once it has
	// exited, before Done is closed. Together they let a caller keep
	// track of the processes that still run.
	Started, Exited func(pid int)
}

// Process is a launched process. It dies with the launching process on
// Linux, even when that one is killed before it can stop its children.
type Process struct {
	cmd   *exec.Cmd
	ready chan struct{}
	done  chan struct{}
	head  strings.Builder // the log until ready, for Wait's error
}

// Launch starts c and returns at once; Wait waits until it is ready, so
// that servers that must find each other can start together.
func Launch(c Command) (*Process, error) {
	if c.Bin == "" {
		bin, err := Binary()
		if err != nil {
			return nil, err
		}
		c.Bin = bin
	}
	if c.Ready == "" {
		c.Ready = ReadyLine
	}
	cmd := exec.Command(c.Bin, c.Args...)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = dieWithParent()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	if c.Started != nil {
		c.Started(pid)
	}
	p := &Process{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if c.Log != nil {
				c.Log(line)
			}
			if !signalled {
				p.head.WriteString(line + "\n")
				if strings.Contains(line, c.Ready) {
					signalled = true
					close(p.ready)
				}
			}
		}
		_ = cmd.Wait()
		if c.Exited != nil {
			c.Exited(pid)
		}
		close(p.done)
	}()
	return p, nil
}

// Wait waits until the process logged its ready line. When it exits
// first, the error holds its log (a port in use says "in use" there);
// when it is not ready within timeout (0: ReadyTimeout), it is killed.
func (p *Process) Wait(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = ReadyTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return errors.New("exited before it was ready:\n" + p.head.String())
	case <-t.C:
		p.Kill()
		return fmt.Errorf("not ready after %v", timeout)
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the process (SIGKILL, which also ends a stopped one) and
// waits until it has exited.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
