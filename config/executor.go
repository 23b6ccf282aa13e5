package config

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/executor"
)

// CommandConfig is the executor configuration of a command run block.
func (r *Run) CommandConfig(log *slog.Logger) executor.CommandConfig {
	c := r.Command
	env := make([]string, 0, len(c.Env))
	for k, v := range c.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return executor.CommandConfig{Argv: c.Argv, Env: env, Dir: c.Dir, Timeout: r.Timeout.D(), KillGrace: c.KillGrace.D(), Logger: log}
}

// HTTPConfig is the executor configuration of an HTTP run block.
func (r *Run) HTTPConfig(log *slog.Logger) executor.HTTPConfig {
	h := r.HTTP
	return executor.HTTPConfig{Method: h.Method, URL: h.URL, Headers: h.Headers, Timeout: r.Timeout.D(), Secrets: h.Secrets, Logger: log}
}

// Executor builds the run block's executor: the one place that turns a
// run block into one. The file's checks (Parse) ran the executor's own
// (Validate), so only what the configuration cannot decide fails here (a
// command executor in a program that did not call
// executor.MaybeSupervise).
func (r *Run) Executor(log *slog.Logger) (executor.Executor, error) {
	if r.Command != nil {
		return executor.NewCommand(r.CommandConfig(log))
	}
	return executor.NewHTTP(r.HTTPConfig(log))
}

// checkExecutor runs the executor's checks on a run block read without
// error, and reports what they refuse at the field and line of the file
// (path is the run block's display path, line its line).
func (p *parser) checkExecutor(r *Run, path string, line int) {
	var err error
	var env []string
	if r.Command != nil {
		cfg := r.CommandConfig(nil)
		env = cfg.Env
		err = cfg.Validate()
	} else {
		err = r.HTTPConfig(nil).Validate()
	}
	if err == nil {
		return
	}
	var ce *onetick.ConfigError
	if !errors.As(err, &ce) {
		p.errorf(line, path, "%v", err)
		return
	}
	field := executorField(ce.Field, r.Command != nil, env)
	candidates := []string{path + "." + field}
	if r.Command != nil {
		// A command written as a list is the argv itself.
		candidates = append(candidates, path+"."+strings.Replace(field, "command.argv", "command", 1))
	}
	for _, c := range candidates {
		if l, ok := p.itemLines[c]; ok {
			p.errorf(l, c, "%s", ce.Msg)
			return
		}
		if l, ok := p.f.lines[c]; ok {
			p.errorf(l, c, "%s", ce.Msg)
			return
		}
	}
	// The field is not written in the file (a default, a missing key):
	// the line of the nearest section that is.
	at := path + "." + field
	for i := len(at); i > len(path); i = strings.LastIndexAny(at[:i], ".[") {
		if l, ok := p.f.lines[at[:i]]; ok {
			line = l
			break
		}
	}
	p.errorf(line, at, "%s", ce.Msg)
}

// executorField maps a field of an executor's configuration
// (executor.CommandConfig, executor.HTTPConfig) to the run block's field
// in the file. env is the command's Env, sorted as CommandConfig makes it.
func executorField(f string, command bool, env []string) string {
	name, idx, _ := strings.Cut(f, "[")
	idx = strings.TrimSuffix(idx, "]")
	switch name {
	case "Timeout":
		return "timeout"
	case "Argv":
		if idx != "" {
			return "command.argv[" + idx + "]"
		}
		return "command.argv"
	case "Env":
		if i, err := strconv.Atoi(idx); err == nil && i < len(env) {
			k, _, _ := strings.Cut(env[i], "=")
			return "command.env." + k
		}
		return "command.env"
	case "Dir":
		return "command.dir"
	case "KillGrace":
		return "command.kill_grace"
	case "Method":
		return "http.method"
	case "URL":
		return "http.url"
	case "Headers":
		if h, err := strconv.Unquote(idx); err == nil {
			return "http.headers." + h
		}
		return "http.headers"
	case "Secrets":
		if idx != "" {
			return "http.secrets[" + idx + "]"
		}
		return "http.secrets"
	}
	if command {
		return "command"
	}
	return fmt.Sprintf("http (%s)", strings.ToLower(f))
}
