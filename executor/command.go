package executor

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultKillGrace is how long a command's process group has between
// SIGTERM and SIGKILL when CommandConfig.KillGrace is zero.
const DefaultKillGrace = 10 * time.Second

// CommandConfig configures a command executor.
type CommandConfig struct {
	// Argv is the program and its arguments. No shell is involved unless
	// Argv names one: ["sh", "-c", "pg_dump main | gzip > /backup/main.gz"].
	// A program without a slash is looked up in the command's PATH.
	Argv []string
	// Env adds KEY=VALUE entries to the command's environment, overriding
	// inherited ones (see the package documentation for what is
	// inherited). Names starting with ONETICK_ are reserved.
	Env []string
	// Dir is the working directory; onetick's own when empty.
	Dir string
	// Timeout bounds one attempt; none when zero (the worker's context may
	// still end it). On timeout the process group is terminated like on
	// cancellation and the attempt fails (an ordinary, retryable failure).
	Timeout time.Duration
	// KillGrace is the delay between SIGTERM and SIGKILL to the command's
	// process group; DefaultKillGrace when zero.
	KillGrace time.Duration
	// Logger receives every output line (Info, message "output", keys job,
	// tick, stream, line) and the start and end of each run (Debug).
	// Discarded when nil.
	Logger *slog.Logger
}

// Command runs a program once per attempt under a supervisor process; see
// the package documentation.
type Command struct {
	argv    []string
	env     []string
	dir     string
	timeout time.Duration
	grace   time.Duration
	log     *slog.Logger
}

var _ Executor = (*Command)(nil)

// NewCommand validates cfg (Validate) and returns the executor.
// Configuration errors are *onetick.ConfigError naming the field. It fails
// when the program did not call MaybeSupervise first, because every run
// re-executes the program as its supervisor.
func NewCommand(cfg CommandConfig) (*Command, error) {
	if err := supervisorAvailable(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Command{
		argv:    append([]string(nil), cfg.Argv...),
		env:     append([]string(nil), cfg.Env...),
		dir:     cfg.Dir,
		timeout: cfg.Timeout,
		grace:   cfg.KillGrace,
		log:     cfg.Logger,
	}
	if c.grace == 0 {
		c.grace = DefaultKillGrace
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Validate checks cfg as NewCommand does, without needing the supervisor:
// the configuration's own checks (onetick validate) call it, so that a
// file it accepts never fails here when a replica starts. Errors are
// *onetick.ConfigError naming the field.
func (cfg CommandConfig) Validate() error {
	switch {
	case len(cfg.Argv) == 0:
		return configErr("Argv", "is required: the program and its arguments")
	case cfg.Argv[0] == "":
		return configErr("Argv[0]", "must name a program")
	}
	for i, a := range cfg.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return configErr(fmt.Sprintf("Argv[%d]", i), "contains a NUL byte")
		}
	}
	for i, kv := range cfg.Env {
		field := fmt.Sprintf("Env[%d]", i)
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return configErr(field, "must be KEY=VALUE")
		case strings.IndexByte(kv, 0) >= 0:
			return configErr(field, "contains a NUL byte")
		case strings.HasPrefix(k, "ONETICK_"):
			return configErr(field, "%s: names starting with ONETICK_ are set by onetick", truncate(k, 64))
		}
	}
	switch {
	case strings.IndexByte(cfg.Dir, 0) >= 0:
		return configErr("Dir", "contains a NUL byte")
	case cfg.Timeout < 0:
		return configErr("Timeout", "must not be negative")
	case cfg.KillGrace < 0:
		return configErr("KillGrace", "must not be negative")
	}
	return nil
}

// inheritedEnv names the variables a command inherits from onetick. The
// rest of onetick's environment is withheld on purpose: it is where
// operators put the Redis password and the webhook secrets that the
// configuration expands, and a command should see only what its job gives
// it in Env.
var inheritedEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"LANG": true, "LANGUAGE": true, "TZ": true, "TMPDIR": true,
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// environ is the command's environment: the inherited variables, then
// Env, then the run's ONETICK_ variables (exec keeps the last of
// duplicates, so Env overrides what was inherited).
func (c *Command) environ(r Run, tick string) []string {
	env := make([]string, 0, 16+len(c.env))
	hasPath := false
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if inheritedEnv[k] || strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
			hasPath = hasPath || k == "PATH"
		}
	}
	if !hasPath {
		env = append(env, "PATH="+defaultPath)
	}
	env = append(env, c.env...)
	return append(env,
		"ONETICK_JOB="+r.Job,
		"ONETICK_SLOT="+r.Slot.String(),
		"ONETICK_SLOT_MS="+strconv.FormatInt(int64(r.Slot), 10),
		"ONETICK_TICK="+tick,
		"ONETICK_EPOCH="+strconv.FormatInt(int64(r.Epoch), 10),
		"ONETICK_ATTEMPT="+strconv.Itoa(r.Attempt),
	)
}

// ExitError is a command that ended unsuccessfully on its own: a non-zero
// exit code or a signal it did not get from onetick.
type ExitError struct {
	Command string         // Argv[0]; the arguments may hold secrets
	Code    int            // exit code; -1 when killed by a signal
	Signal  syscall.Signal // the signal that killed it, or 0
	// Stderr holds the last lines of standard error, each cut to a few
	// hundred bytes.
	Stderr []string
}

func (e *ExitError) Error() string {
	var b strings.Builder
	if e.Signal != 0 {
		fmt.Fprintf(&b, "command %s killed by signal %d (%v)", e.Command, int(e.Signal), e.Signal)
	} else {
		fmt.Fprintf(&b, "command %s exited with code %d", e.Command, e.Code)
	}
	b.WriteString(stderrSuffix(e.Stderr))
	return b.String()
}

func stderrSuffix(tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	q := make([]string, len(tail))
	for i, l := range tail {
		q[i] = strconv.Quote(l)
	}
	return "; last stderr: " + strings.Join(q, " ")
}
