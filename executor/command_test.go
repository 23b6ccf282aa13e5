//go:build linux

package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor"
)

func newCommand(t *testing.T, cfg executor.CommandConfig) (*executor.Command, *recorder) {
	t.Helper()
	rec := newRecorder()
	if cfg.Logger == nil {
		cfg.Logger = rec.Logger()
	}
	// The supervisor is this test binary; built with -race it would sleep
	// a second at exit waiting for late race reports.
	cfg.Env = append(cfg.Env, raceNoSleep)
	c, err := executor.NewCommand(cfg)
	if err != nil {
		t.Fatalf("NewCommand: %v", err)
	}
	return c, rec
}

const raceNoSleep = "GORACE=atexit_sleep_ms=0"

func sh(script string) []string { return []string{"sh", "-c", script} }

func testRun() executor.Run {
	return executor.Run{Job: "j", Slot: testSlot, Tick: onetick.TickID("j", testSlot), Epoch: 7, Attempt: 2,
		Payload: json.RawMessage(`{"a":1}`)}
}

// commandPID is the command's pid, which is also its process group id, as
// the executor logs it when the supervisor reports the start.
func commandPID(t *testing.T, rec *recorder) int {
	t.Helper()
	pid, _ := startedPIDs(t, rec)
	return pid
}

// startedPIDs reads the command's and its supervisor's pids from the
// executor's "command started" debug line.
func startedPIDs(t *testing.T, rec *recorder) (command, supervisor int) {
	t.Helper()
	e := rec.WaitFor(t, "command started", func(e entry) bool { return e.Msg == "command started" })
	command, err1 := strconv.Atoi(e.Attrs["pid"])
	supervisor, err2 := strconv.Atoi(e.Attrs["supervisor"])
	if err1 != nil || err2 != nil || command <= 1 || supervisor <= 1 {
		t.Fatalf("command started with %v", e.Attrs)
	}
	return command, supervisor
}

// running is a run started in the background whose command has
// backgrounded its grandchild.
type running struct {
	done                 chan error
	cancel               context.CancelFunc
	pgid, bg, supervisor int
}

// startRun starts c on a cancellable context and waits until the script
// reported its grandchild ("bg <pid>").
func startRun(t *testing.T, c *executor.Command, rec *recorder) running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := running{done: make(chan error, 1), cancel: cancel}
	go func() { r.done <- c.Execute(ctx, testRun()) }()
	r.bg = bgPID(t, rec)
	r.pgid, r.supervisor = startedPIDs(t, rec)
	if !alive(r.bg) || !groupAlive(r.pgid) {
		t.Fatal("grandchild or group not running")
	}
	return r
}

// bgPID waits for the "bg <pid>" line the test scripts print after
// backgrounding a grandchild, and returns that pid.
func bgPID(t *testing.T, rec *recorder) int {
	t.Helper()
	line := rec.Output(t, "stdout", func(l string) bool { return strings.HasPrefix(l, "bg ") })
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "bg "))
	if err != nil {
		t.Fatalf("bad line %q", line)
	}
	return pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// groupAlive reports whether any process (zombies included) is in group.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// assertAllGone checks, right when Execute has returned, that the command's
// whole process group and its backgrounded grandchild are gone. The
// supervisor reaps every descendant before it exits, so there is nothing
// to wait for.
func assertAllGone(t *testing.T, pgid, bg int) {
	t.Helper()
	if groupAlive(pgid) {
		t.Errorf("process group %d still has members after Execute returned", pgid)
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if bg > 0 && alive(bg) {
		t.Errorf("grandchild %d still alive after Execute returned", bg)
		syscall.Kill(bg, syscall.SIGKILL)
	}
}

func TestCommandEnvironmentAndStdin(t *testing.T) {
	t.Setenv("ONETICK_TEST_SECRET", "hunter2") // onetick's environment is not passed on
	t.Setenv("LC_TIME", "C")
	dir := t.TempDir()
	c, rec := newCommand(t, executor.CommandConfig{
		Argv: sh(`env; echo "stdin=$(cat)"; echo "pwd=$(pwd)"`),
		Env:  []string{"EXTRA=1", "HOME=/custom"},
		Dir:  dir,
	})
	if err := c.Execute(context.Background(), testRun()); err != nil {
		t.Fatalf("Execute: %v\n%s", err, rec)
	}
	got := map[string]bool{}
	for _, l := range rec.Lines("stdout") {
		got[l] = true
	}
	for _, want := range []string{
		"ONETICK_JOB=j",
		"ONETICK_SLOT=2024-05-01T06:00:00.123Z",
		"ONETICK_SLOT_MS=1714543200123",
		"ONETICK_TICK=j:1714543200123",
		"ONETICK_EPOCH=7",
		"ONETICK_ATTEMPT=2",
		"EXTRA=1",
		"HOME=/custom", // Env overrides what is inherited
		"LC_TIME=C",
		`stdin={"a":1}`,
		"pwd=" + dir,
	} {
		if !got[want] {
			t.Errorf("output lacks %q", want)
		}
	}
	for l := range got {
		if strings.HasPrefix(l, "ONETICK_TEST_SECRET=") || strings.HasPrefix(l, "ONETICK_SUPERVISE=") {
			t.Errorf("command sees %q", l)
		}
	}
	if !slicesContainPrefix(rec.Lines("stdout"), "PATH=") {
		t.Error("command has no PATH")
	}
	for _, e := range rec.Entries() {
		if e.Msg == "output" && (e.Attrs["job"] != "j" || e.Attrs["tick"] != "j:1714543200123" || e.Level != 0) {
			t.Errorf("output entry %v lacks the run's job and tick at Info", e)
		}
	}
}

func slicesContainPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func TestCommandOutputLinesAreLogged(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(
		`echo out1; echo err1 >&2; printf 'crlf\r\n'; printf partial; head -c 20000 /dev/zero | tr '\0' x; echo; printf last >&2`)})
	if err := c.Execute(context.Background(), testRun()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	out, errs := rec.Lines("stdout"), rec.Lines("stderr")
	if len(out) != 3 || out[0] != "out1" || out[1] != "crlf" || len(out[2]) != executor.MaxLineBytes || !strings.HasPrefix(out[2], "partialxxx") {
		t.Errorf("stdout lines %q (lengths), want out1, crlf and one line cut to %d bytes", summarize(out), executor.MaxLineBytes)
	}
	if len(errs) != 2 || errs[0] != "err1" || errs[1] != "last" {
		t.Errorf("stderr lines %q, want err1 and the unterminated last", errs)
	}
	truncated := 0
	for _, e := range rec.Entries() {
		if e.Attrs["truncated"] == "true" {
			truncated++
		}
	}
	if truncated != 1 {
		t.Errorf("%d entries marked truncated, want 1", truncated)
	}
}

func summarize(lines []string) []string {
	s := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 20 {
			l = l[:20] + "…(" + strconv.Itoa(len(l)) + ")"
		}
		s[i] = l
	}
	return s
}

func TestCommandExitCodes(t *testing.T) {
	c, _ := newCommand(t, executor.CommandConfig{Argv: sh(`for i in 1 2 3 4 5 6 7; do echo "line $i" >&2; done; exit 3`)})
	err := c.Execute(context.Background(), testRun())
	var ee *executor.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.Signal != 0 {
		t.Fatalf("Execute = %v, want exit code 3", err)
	}
	if errors.Is(err, executor.ErrPermanent) {
		t.Error("a non-zero exit is an ordinary, retryable failure")
	}
	if got := strings.Join(ee.Stderr, ","); got != "line 3,line 4,line 5,line 6,line 7" {
		t.Errorf("stderr tail %q, want the last five lines", got)
	}
	if msg := err.Error(); !strings.Contains(msg, "exited with code 3") || !strings.Contains(msg, `"line 7"`) || strings.Contains(msg, "for i in") {
		t.Errorf("error %q should give the code and the last stderr lines, not the arguments", msg)
	}

	c, _ = newCommand(t, executor.CommandConfig{Argv: sh(`kill -USR1 $$`)})
	err = c.Execute(context.Background(), testRun())
	if !errors.As(err, &ee) || ee.Signal != syscall.SIGUSR1 || ee.Code != -1 {
		t.Fatalf("Execute = %v, want killed by SIGUSR1", err)
	}
}

func TestCommandThatCannotStartIsPermanent(t *testing.T) {
	for name, cfg := range map[string]executor.CommandConfig{
		"missing path":    {Argv: []string{"/nonexistent/program"}},
		"not in PATH":     {Argv: []string{"no-such-program-onetick"}},
		"not executable":  {Argv: []string{"/etc/hostname"}},
		"missing workdir": {Argv: []string{"true"}, Dir: "/nonexistent/dir"},
	} {
		c, _ := newCommand(t, cfg)
		if err := c.Execute(context.Background(), testRun()); !errors.Is(err, executor.ErrPermanent) {
			t.Errorf("%s: Execute = %v, want a permanent failure", name, err)
		}
	}
}

const grandchildScript = `sleep 300 & echo "bg $!"; sleep 300`

func TestCommandTimeoutKillsProcessGroup(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(grandchildScript), Timeout: 3 * time.Second, KillGrace: time.Minute})
	start := time.Now()
	err := c.Execute(context.Background(), testRun())
	if err == nil || !strings.Contains(err.Error(), "timed out after 3s") || errors.Is(err, executor.ErrPermanent) {
		t.Fatalf("Execute = %v, want an ordinary timeout failure", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the command's own timeout must not look like the caller's deadline: %v", err)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("returned after %s, before the timeout", took)
	}
	assertAllGone(t, commandPID(t, rec), bgPID(t, rec))
}

func TestCommandCancelKillsProcessGroup(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(grandchildScript), KillGrace: time.Minute})
	r := startRun(t, c, rec)
	r.cancel()
	if err := <-r.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	assertAllGone(t, r.pgid, r.bg)
}

func TestCommandKillGraceForGroupIgnoringSIGTERM(t *testing.T) {
	// trap "" makes the shell and the sleep it starts ignore SIGTERM: only
	// the SIGKILL after the grace ends them.
	const grace = 1500 * time.Millisecond
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(`trap "" TERM; sleep 300 & echo "bg $!"; wait`), KillGrace: grace})
	r := startRun(t, c, rec)
	cancelled := time.Now()
	r.cancel()
	if err := <-r.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	if took := time.Since(cancelled); took < grace {
		t.Errorf("returned %s after the cancellation, before the %s grace", took, grace)
	}
	assertAllGone(t, r.pgid, r.bg)
}

func TestCommandGetsSIGTERMFirst(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{
		// A loop of short sleeps, not one long one: a SIGTERM that reaches
		// a forked child before it has exec'd sleep runs the shell's trap
		// machinery there and is lost, and that sleep then runs its course.
		// ("bg" is the shell itself here.)
		Argv:      sh(`trap 'echo got-term; exit 0' TERM; echo "bg $$"; while :; do sleep 1; done`),
		KillGrace: time.Hour, // a SIGKILL would come far too late to matter
	})
	r := startRun(t, c, rec)
	r.cancel()
	if err := <-r.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	if lines := rec.Lines("stdout"); lines[len(lines)-1] != "got-term" {
		t.Errorf("stdout %q: the trap did not run", lines)
	}
	assertAllGone(t, r.pgid, r.bg)
}

func TestCommandLeftoversAreTerminatedWhenItExits(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(`sleep 300 & echo "bg $!"`)})
	if err := c.Execute(context.Background(), testRun()); err != nil {
		t.Fatalf("Execute = %v: the command itself succeeded", err)
	}
	assertAllGone(t, commandPID(t, rec), bgPID(t, rec))
	rec.WaitFor(t, "warning about leftovers", func(e entry) bool { return strings.Contains(e.Msg, "leaving processes in its group") })
}

func TestCommandEscapedProcessDoesNotHangExecute(t *testing.T) {
	// setsid takes the grandchild out of the command's group, beyond the
	// group kill, and it keeps stdout open. Execute must still return.
	// The fifo makes the shell exit only after setsid has happened: before
	// that, the grandchild is still in the group and dies with it.
	c, rec := newCommand(t, executor.CommandConfig{
		Argv: sh(`mkfifo ready; setsid sh -c 'echo > ready; exec sleep 300' & echo "bg $!"; read x < ready`),
		Dir:  t.TempDir(),
	})
	err := c.Execute(context.Background(), testRun())
	bg := bgPID(t, rec)
	t.Cleanup(func() { syscall.Kill(bg, syscall.SIGKILL) })
	if err != nil {
		t.Fatalf("Execute = %v", err)
	}
	rec.WaitFor(t, "warning about escaped processes", func(e entry) bool { return strings.Contains(e.Msg, "outlived it") })
	rec.WaitFor(t, "warning about held output", func(e entry) bool { return strings.Contains(e.Msg, "still hold its output") })
}

func TestCommandConcurrentRuns(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(`echo "$ONETICK_TICK"`)})
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			r := testRun()
			r.Slot += onetick.Slot(i)
			r.Tick = onetick.TickID(r.Job, r.Slot)
			errs <- c.Execute(context.Background(), r)
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range rec.Entries() {
		if e.Msg == "output" && e.Attrs["line"] != e.Attrs["tick"] {
			t.Errorf("line %q logged with tick %q", e.Attrs["line"], e.Attrs["tick"])
		}
	}
}

func TestNewCommandValidation(t *testing.T) {
	cases := []struct {
		field string
		cfg   executor.CommandConfig
	}{
		{"Argv", executor.CommandConfig{}},
		{"Argv[0]", executor.CommandConfig{Argv: []string{""}}},
		{"Argv[1]", executor.CommandConfig{Argv: []string{"echo", "a\x00b"}}},
		{"Env[0]", executor.CommandConfig{Argv: []string{"true"}, Env: []string{"NOEQUALS"}}},
		{"Env[1]", executor.CommandConfig{Argv: []string{"true"}, Env: []string{"A=1", "=x"}}},
		{"Env[0]", executor.CommandConfig{Argv: []string{"true"}, Env: []string{"ONETICK_JOB=x"}}},
		{"Timeout", executor.CommandConfig{Argv: []string{"true"}, Timeout: -1}},
		{"KillGrace", executor.CommandConfig{Argv: []string{"true"}, KillGrace: -1}},
		{"Dir", executor.CommandConfig{Argv: []string{"true"}, Dir: "a\x00"}},
	}
	for _, c := range cases {
		_, err := executor.NewCommand(c.cfg)
		var ce *onetick.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, onetick.ErrInvalidConfig) {
			t.Errorf("%+v: NewCommand = %v, want a ConfigError for field %s", c.cfg, err, c.field)
		}
	}
}

func TestCommandIgnoringLargePayload(t *testing.T) {
	// More than a pipe buffer, to a program that never reads it: the
	// payload writer must not keep Execute waiting.
	c, _ := newCommand(t, executor.CommandConfig{Argv: []string{"true"}})
	r := testRun()
	r.Payload = json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	if err := c.Execute(context.Background(), r); err != nil {
		t.Fatalf("Execute = %v", err)
	}
}

func TestCommandNotStartedWhenContextDone(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: []string{"true"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Execute(ctx, testRun()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	if len(rec.Entries()) != 0 {
		t.Fatalf("something ran:\n%s", rec)
	}
}
