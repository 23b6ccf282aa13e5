//go:build linux

package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/onetick/onetick"
)

const (
	// outputGrace bounds how long Execute keeps reading output after the
	// supervisor exited. Only a process that left the command's group
	// (setsid) can still hold the pipes then; its later output is lost.
	outputGrace = 2 * time.Second
	// backstopMargin is added to the supervisor's own bounds (grace plus
	// reapBound) before Execute stops trusting it and kills the group
	// itself. It never fires unless the supervisor is broken or frozen.
	backstopMargin = 5 * time.Second
)

var errTimedOut = errors.New("timed out")

// runState is what the supervisor reported, filled by the goroutine that
// reads the status pipe.
type runState struct {
	mu                 sync.Mutex
	pid                int // the command's pid and process group; 0 before "started"
	exited             *statusMsg
	startFailed        *statusMsg
	leftovers, escaped bool
}

func (s *runState) record(m statusMsg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Event {
	case "started":
		s.pid = m.PID
	case "exited":
		s.exited = &m
	case "start_failed":
		s.startFailed = &m
	case "leftovers":
		s.leftovers = true
	case "escaped":
		s.escaped = true
	}
}

func (s *runState) commandPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Execute runs the command once and returns when it and every process of
// its group are gone.
func (c *Command) Execute(ctx context.Context, r Run) error {
	tick := r.tickID()
	name := c.argv[0]
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("command %s: not started: %w", name, ctxErr(ctx))
	}
	log := c.log.With("job", r.Job, "tick", tick)

	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("command %s: %w", name, err)
	}
	defer lifeW.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		return fmt.Errorf("command %s: %w", name, err)
	}
	defer statR.Close()

	out := newTailBuffer(onetick.MaxEventOutput)
	stdout := &lineLogger{log: log, stream: "stdout", out: out}
	stderr := &lineLogger{log: log, stream: "stderr", keep: true, out: out}
	cmd := &exec.Cmd{
		// The running binary itself, even if a deploy replaced the file.
		Path:   "/proc/self/exe",
		Args:   append([]string{"onetick-supervisor"}, c.argv...),
		Env:    append(append(c.environ(r, tick), traceEnv(ctx)...), supervisorEnv+"="+c.grace.String()),
		Dir:    c.dir,
		Stdin:  bytes.NewReader(r.Payload),
		Stdout: stdout,
		Stderr: stderr,
		// fd 3 and 4 in the supervisor.
		ExtraFiles: []*os.File{lifeR, statW},
		// Its own group: a Ctrl-C to onetick's group must not reach it;
		// onetick decides when runs stop.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   outputGrace,
	}
	started := time.Now()
	err = cmd.Start()
	// Only the supervisor may hold these ends, or EOF would never come.
	lifeR.Close()
	statW.Close()
	if err != nil {
		err = fmt.Errorf("command %s: starting its supervisor in %q: %w", name, c.dir, err)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) {
			return permanent(err) // the working directory is wrong
		}
		return err
	}

	var st runState
	var wg sync.WaitGroup
	wg.Go(func() {
		dec := json.NewDecoder(statR)
		for {
			var m statusMsg
			if dec.Decode(&m) != nil {
				return // EOF: the supervisor exited
			}
			st.record(m)
			if m.Event == "started" {
				log.Debug("command started", "pid", m.PID, "supervisor", cmd.Process.Pid)
			}
		}
	})
	waitc := make(chan error, 1)
	wg.Go(func() { waitc <- cmd.Wait() })

	runCtx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var (
		waitErr  error
		stopped  error // why Execute asked the supervisor to stop
		done     = runCtx.Done()
		backstop <-chan time.Time
	)
wait:
	for {
		select {
		case waitErr = <-waitc:
			break wait
		case <-done:
			done = nil
			stopped = errTimedOut
			if ctx.Err() != nil {
				stopped = ctxErr(ctx)
			}
			lifeW.Close() // the supervisor terminates the group
			backstop = time.After(c.grace + reapBound + backstopMargin)
		case <-backstop:
			backstop = nil
			log.Warn("command supervisor did not stop in time; killing the process group", "supervisor", cmd.Process.Pid)
			c.killGroup(&st)
			cmd.Process.Kill()
		}
	}
	wg.Wait()
	stdout.flush()
	stderr.flush()
	err = c.outcome(log, &st, stopped, waitErr, stderr.lastLines(), time.Since(started))
	r.report(onetick.Result{Exit: st.exitCode(), Output: out.String()})
	return err
}

// exitCode is the command's exit code when it exited on its own, nil
// when it was killed by a signal or stopped by onetick.
func (s *runState) exitCode() *int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.exited; m != nil && !m.Terminating && m.Signal == 0 {
		code := m.Code
		return &code
	}
	return nil
}

func (c *Command) killGroup(st *runState) {
	if pid := st.commandPID(); pid > 0 {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// outcome turns what the supervisor reported into the attempt's result.
func (c *Command) outcome(log *slog.Logger, st *runState, stopped, waitErr error, tail []string, took time.Duration) error {
	name := c.argv[0]
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		log.Warn("processes that left the command's process group still hold its output; their output is dropped")
	}
	if st.escaped {
		log.Warn("processes that left the command's process group (setsid) outlived it; onetick does not supervise them")
	}
	if st.leftovers {
		log.Warn("the command exited leaving processes in its group; they were terminated")
	}
	if m := st.startFailed; m != nil {
		err := fmt.Errorf("command %s: cannot start: %s", name, m.Error)
		if m.Permanent {
			return permanent(err)
		}
		return err
	}
	if m := st.exited; m != nil && !m.Terminating {
		// It ended on its own, even if a deadline passed meanwhile: its
		// own result stands.
		log.Debug("command finished", "code", m.Code, "signal", m.Signal, "took", took)
		if m.Code == 0 && m.Signal == 0 {
			return nil
		}
		return &ExitError{Command: name, Code: m.Code, Signal: syscall.Signal(m.Signal), Stderr: tail}
	}
	if stopped != nil {
		log.Debug("command stopped", "reason", stopped, "took", took)
		if stopped == errTimedOut {
			return fmt.Errorf("command %s timed out after %s; its process group was terminated%s", name, c.timeout, stderrSuffix(tail))
		}
		return fmt.Errorf("command %s stopped, its process group terminated: %w", name, stopped)
	}
	if m := st.exited; m != nil {
		e := &ExitError{Command: name, Code: m.Code, Signal: syscall.Signal(m.Signal), Stderr: tail}
		return fmt.Errorf("command %s: its supervisor was signalled: %w", name, e)
	}
	// The supervisor died without reporting the command's end (killed on
	// its own, or crashed): make sure the group dies with it.
	c.killGroup(st)
	return fmt.Errorf("command %s: its supervisor died (%v); the process group was killed%s", name, waitErr, stderrSuffix(tail))
}
