//go:build linux

package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// supervisorEnv marks a process started as a supervisor; its value is
	// the kill grace as a Go duration.
	supervisorEnv = "ONETICK_SUPERVISE"
	// The supervisor's inherited pipes: it reads the lifeline until EOF
	// and writes JSON status lines to the status pipe.
	lifelineFD = 3
	statusFD   = 4
	// reapBound is how long the supervisor waits, after SIGKILL to the
	// group, for its descendants to be reaped before it gives up on them
	// (they left the process group, so the kill did not reach them).
	reapBound = 5 * time.Second
	// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
	prSetChildSubreaper = 36
)

// statusMsg is one line of the supervisor-to-executor protocol.
type statusMsg struct {
	// Event is "started", "start_failed", "exited", "leftovers" (the
	// command exited and processes of its group were still running) or
	// "escaped" (descendants outlived the group: they left it).
	Event string `json:"event"`
	PID   int    `json:"pid,omitempty"`
	// For "exited": the exit code (-1 when signalled) and the signal, and
	// whether termination had already begun when the command ended.
	Code        int  `json:"code,omitempty"`
	Signal      int  `json:"signal,omitempty"`
	Terminating bool `json:"terminating,omitempty"`
	// For "start_failed".
	Error     string `json:"error,omitempty"`
	Permanent bool   `json:"permanent,omitempty"`
}

var hookCalled atomic.Bool

// MaybeSupervise must be the first call in the main function of every
// program that uses the command executor. In an ordinary start it returns
// at once. When the command executor re-executes the program as a
// supervisor (the environment says so), it runs the supervisor and exits,
// never returning. See the package documentation.
func MaybeSupervise() {
	grace, ok := os.LookupEnv(supervisorEnv)
	if !ok {
		hookCalled.Store(true)
		return
	}
	os.Exit(supervise(grace))
}

func supervisorAvailable() error {
	if !hookCalled.Load() {
		return errors.New("executor: the command executor needs executor.MaybeSupervise() to be called first thing in main: every run re-executes the program as its supervisor")
	}
	return nil
}

func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// supervise is the supervisor process: it starts the command in a new
// process group, reports its exit, and makes sure the group is gone before
// it exits itself, whether the command ended on its own, the executor
// asked it to stop, or onetick died.
func supervise(graceText string) int {
	grace, err := time.ParseDuration(graceText)
	if err != nil || len(os.Args) < 2 || !isPipe(lifelineFD) || !isPipe(statusFD) {
		fmt.Fprintf(os.Stderr, "onetick: %s is set, but this process was not started by the command executor; unset it\n", supervisorEnv)
		return 2
	}
	// The command must not inherit the protocol pipes: a descendant
	// holding the status pipe would keep the executor waiting.
	syscall.CloseOnExec(lifelineFD)
	syscall.CloseOnExec(statusFD)
	os.Unsetenv(supervisorEnv)
	lifeline, status := os.NewFile(lifelineFD, "lifeline"), os.NewFile(statusFD, "status")
	enc := json.NewEncoder(status)
	// Write errors are ignored: they mean onetick is gone, and the
	// lifeline tells that anyway.
	report := func(m statusMsg) { _ = enc.Encode(m) }

	// As a subreaper, the supervisor inherits the descendants whose parent
	// dies (the backgrounded grandchild of a shell), so it can reap them
	// and know when none is left. Without it, they would go to init and
	// the group kill below would still reach them.
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)

	// A signal to the supervisor itself (someone killing it by pid, or a
	// service manager signalling every process) stops the run gracefully.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		report(statusMsg{Event: "start_failed", Error: err.Error(), Permanent: startErrorPermanent(err)})
		return 0
	}
	pid := cmd.Process.Pid // also the process group id
	report(statusMsg{Event: "started", PID: pid})
	// The command holds its own copies; the supervisor keeps stderr only,
	// for a Go runtime crash report.
	os.Stdin.Close()
	os.Stdout.Close()

	// The executor never writes to the lifeline: EOF means it closed its
	// end to stop the run, or the kernel closed it because onetick died,
	// however it died. Unlike PR_SET_PDEATHSIG this is tied to the
	// process, not to the thread that forked (golang/go#27505).
	lifelineClosed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, lifeline)
		close(lifelineClosed)
	}()

	// One goroutine reaps every child (the command and adopted orphans).
	// The channel closes at ECHILD: no descendant is left.
	type reaped struct {
		pid int
		ws  syscall.WaitStatus
	}
	reapedc := make(chan reaped, 16)
	go func() {
		defer close(reapedc)
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return
			}
			reapedc <- reaped{p, ws}
		}
	}()

	terminating, exited := false, false
	var killc, giveUpc <-chan time.Time
	// terminate starts the SIGTERM, grace, SIGKILL sequence once; it
	// reports whether the group had members to signal.
	terminate := func() bool {
		if terminating {
			return false
		}
		terminating = true
		// ESRCH: the group is already empty, nothing to wait for. (A
		// group id is not reused while any member lives, so this cannot
		// reach another group; once the last member is reaped the id could
		// be reused, and that window is the one unavoidable race of
		// process-group signalling.)
		if syscall.Kill(-pid, syscall.SIGTERM) != nil {
			return false
		}
		killc = time.After(grace)
		return true
	}
	groupGone := func() bool { return syscall.Kill(-pid, 0) == syscall.ESRCH }
	finish := func() int {
		// The group is empty. A descendant still alive left it (setsid):
		// it is reported, and left to init.
		if n, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); err == nil && n == 0 {
			report(statusMsg{Event: "escaped"})
		}
		return 0
	}
	for {
		select {
		case r, ok := <-reapedc:
			if !ok {
				return 0
			}
			if r.pid == pid {
				m := statusMsg{Event: "exited", Code: r.ws.ExitStatus(), Terminating: terminating}
				if r.ws.Signaled() {
					m.Code, m.Signal = -1, int(r.ws.Signal())
				}
				report(m)
				exited = true
				// A run ends when its command does: whatever it left
				// running in its group is terminated too.
				if terminate() {
					report(statusMsg{Event: "leftovers"})
				}
			}
			// The reaper runs ahead of this loop: the command's own exit
			// may still be queued when the group is already empty.
			if exited && groupGone() {
				return finish()
			}
		case <-lifelineClosed:
			lifelineClosed = nil
			terminate()
		case <-sigs:
			terminate()
		case <-killc:
			killc = nil
			syscall.Kill(-pid, syscall.SIGKILL)
			giveUpc = time.After(reapBound)
		case <-giveUpc:
			report(statusMsg{Event: "escaped"})
			return 0
		}
	}
}

// startErrorPermanent: the program is missing or cannot be executed, which
// retrying will not fix.
func startErrorPermanent(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, exec.ErrDot) ||
		errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}
