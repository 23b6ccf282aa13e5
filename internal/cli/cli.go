// Package cli is the onetick command line: cmd/onetick only calls Main.
// Every command returns an exit code: 0 ok, 2 bad input (config, flags,
// expressions), 1 runtime failure.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3".
var Version = ""

// Env is what a command sees of its process.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Signals delivers SIGTERM and SIGINT to `run` and `demo`; nil means
	// the process's own (os/signal).
	Signals <-chan os.Signal
}

// Main runs the command in args (without the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if len(args) == 0 {
		usage(env.Stderr)
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "run":
		err = cmdRun(ctx, rest, env)
	case "status":
		err = cmdStatus(ctx, rest, env)
	case "migrate":
		err = cmdMigrate(ctx, rest, env)
	case "repair":
		err = cmdRepair(ctx, rest, env)
	case "shards":
		err = cmdShards(ctx, rest, env)
	case "pause":
		err = cmdPause(ctx, rest, env)
	case "resume":
		err = cmdResume(ctx, rest, env)
	case "trigger":
		err = cmdTrigger(ctx, rest, env)
	case "backfill":
		err = cmdBackfill(ctx, rest, env)
	case "jobs":
		if len(rest) > 0 && (rest[0] == "apply" || rest[0] == "rm") {
			err = cmdJobSets(ctx, rest[0], rest[1:], env)
		} else {
			err = cmdJobs(ctx, rest, env)
		}
	case "runs":
		err = cmdRuns(ctx, rest, env)
	case "why":
		err = cmdWhy(ctx, rest, env)
	case "dead":
		err = cmdDead(ctx, rest, env)
	case "validate":
		err = cmdValidate(rest, env)
	case "next":
		err = cmdNext(rest, env)
	case "demo":
		err = cmdDemo(ctx, rest, env)
	case "version", "--version", "-version":
		fmt.Fprintln(env.Stdout, "onetick", version())
		return ExitOK
	case "help", "-h", "--help", "-help":
		usage(env.Stdout)
		return ExitOK
	default:
		fmt.Fprintf(env.Stderr, "onetick: unknown command %q\n", cmd)
		usage(env.Stderr)
		return ExitUsage
	}
	return report(err, env.Stderr)
}

// usageError marks bad input: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func badInput(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func report(err error, w io.Writer) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var ue usageError
	code := ExitFailure
	if errors.As(err, &ue) {
		code = ExitUsage
	}
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		// Errors of the root package carry the prefix already ("onetick:
		// unknown job"): one is enough.
		fmt.Fprintln(w, "onetick:", printable(strings.TrimPrefix(line, "onetick: ")))
	}
	return code
}

func usage(w io.Writer) {
	fmt.Fprint(w, `onetick: a highly available periodic-job scheduler

Usage:
  onetick run --config FILE [--listen ADDR] [--replica ID] [--redis URL] [--role both|scheduler|worker] [--log-format text|json] [--log-level debug|info|warn|error]
  onetick status --config FILE [--json] [--redis URL]
  onetick repair --config FILE [--apply] [--wait DURATION] [--redis URL]
  onetick jobs --config FILE [--json]
  onetick jobs apply -f JOBS.yaml --set NAME --config FILE [--dry-run]
  onetick jobs rm JOB... --set NAME --config FILE
  onetick pause JOB --reason WHY --config FILE [--who NAME]
  onetick resume JOB --config FILE [--reason WHY] [--who NAME]
  onetick trigger JOB --config FILE [--key KEY] [--payload JSON] [--reason WHY]
  onetick backfill JOB --from RFC3339 --to RFC3339 --config FILE [--dry-run] [--max N]
  onetick runs JOB --config FILE [--from T] [--to T] [--fate F] [--limit N] [--after CURSOR] [--json]
  onetick why JOB SLOT|KEY --config FILE [--json]
  onetick dead list --config FILE [--after ID] [-n N] [--json]
  onetick dead replay ID --config FILE
  onetick validate --config FILE
  onetick migrate --config FILE
  onetick shards migrate --config FILE --to N [--apply]
  onetick next EXPR [--tz ZONE] [--from RFC3339] [-n N] [--job NAME]
  onetick demo [--seconds N]
  onetick version

Exit codes: 0 ok, 2 bad input, 1 runtime failure.
`)
}

// newFlags returns a FlagSet whose errors are bad input.
func newFlags(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet("onetick "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

// parseFlags parses args, allowing flags after positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, badInput("--log-level: must be debug, info, warn or error, got %q", level)
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, badInput("--log-format: must be text or json, got %q", format)
}

// logger is the operator commands' logger: warnings and errors to stderr.
func (e Env) logger() *slog.Logger {
	w := e.Stderr
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
