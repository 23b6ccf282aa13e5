package config

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// Run is what a job runs once per tick, in the daemon's worker: a command
// or an HTTP call, with the worker's per-job options.
type Run struct {
	Command *CommandRun `yaml:"command"`
	HTTP    *HTTPRun    `yaml:"http"`
	// Timeout bounds one attempt (default: none for a command, 30s for HTTP).
	Timeout Duration `yaml:"timeout"`
	// MaxAttempts: a failed attempt is retried with backoff until this
	// many attempts, then the tick goes to the dead letters. Default 3.
	MaxAttempts int `yaml:"max_attempts"`
	// Backoff is the first retry's delay, doubling per attempt with jitter
	// up to MaxBackoff. Defaults 1s and 10m.
	Backoff    Duration `yaml:"backoff"`
	MaxBackoff Duration `yaml:"max_backoff"`
	// Overlap is skip (default), queue or allow.
	Overlap string `yaml:"overlap"`
	Line    int    `yaml:"-"`
}

// CommandRun runs a program: argv, no shell unless argv names one.
type CommandRun struct {
	Argv      []string          `yaml:"argv"`
	Env       map[string]string `yaml:"env"`
	Dir       string            `yaml:"dir"`
	KillGrace Duration          `yaml:"kill_grace"`
}

// HTTPRun calls a URL, signed per the Standard Webhooks spec.
type HTTPRun struct {
	Method  string            `yaml:"method"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Secrets sign each request ("whsec_" + base64); several while
	// receivers rotate. Write them as ${VAR}.
	Secrets []string `yaml:"secrets"`
}

// Run block defaults (applied by Parse).
const (
	DefaultMaxAttempts = 3
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = 10 * time.Minute
	DefaultOverlap     = "skip"
	DefaultHTTPTimeout = 30 * time.Second
)

// runKeys are the keys of a job's run block.
var runKeys = []string{"command", "http", "timeout", "max_attempts", "backoff", "max_backoff", "overlap"}

// run reads a job's run block.
func (p *parser) run(e entry, disp string) (*Run, bool) {
	path := disp + ".run"
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return nil, false
	}
	if m == nil {
		p.errorf(e.line, path, "is empty: give a command or an http call")
		return nil, false
	}
	r := &Run{Line: e.line}
	p.itemLines = map[string]int{}
	defer func() { p.itemLines = nil }()
	sec := p.fields(p.entries(m, path), path, path, runKeys...)
	good := true
	if x, ok := sec["timeout"]; ok {
		r.Timeout, ok = p.dur(x, path+".timeout")
		good = good && ok
	}
	if x, ok := sec["backoff"]; ok {
		r.Backoff, ok = p.dur(x, path+".backoff")
		good = good && ok
	}
	if x, ok := sec["max_backoff"]; ok {
		r.MaxBackoff, ok = p.dur(x, path+".max_backoff")
		good = good && ok
	}
	if x, ok := sec["max_attempts"]; ok {
		v, ok := p.integer(x, path+".max_attempts", 1, 1000)
		r.MaxAttempts = int(v)
		good = good && ok
	}
	if x, ok := sec["overlap"]; ok {
		v, ok := p.str(x, path+".overlap")
		switch {
		case !ok:
			good = false
		case v == "skip" || v == "queue" || v == "allow" || v == "":
			r.Overlap = v
		default:
			p.errorf(x.line, path+".overlap", "must be skip, queue or allow, got %q", short(v))
			good = false
		}
	}
	c, hasC := sec["command"]
	h, hasH := sec["http"]
	switch {
	case hasC && hasH:
		p.errorf(h.line, path, "has both command and http: give one")
		return nil, false
	case !hasC && !hasH:
		p.errorf(e.line, path, "needs a command or an http call")
		return nil, false
	case hasC:
		r.Command, ok = p.command(c, path+".command")
	default:
		r.HTTP, ok = p.httpRun(h, path+".http")
	}
	good = good && ok
	if r.Backoff == 0 {
		r.Backoff = Duration(DefaultBackoff)
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = Duration(DefaultMaxBackoff)
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.Overlap == "" {
		r.Overlap = DefaultOverlap
	}
	if r.HTTP != nil && r.Timeout == 0 {
		r.Timeout = Duration(DefaultHTTPTimeout)
	}
	if good && r.MaxBackoff < r.Backoff {
		p.errorf(p.f.line(path+".max_backoff", e.line), path+".max_backoff", "%s is below backoff (%s)", r.MaxBackoff, r.Backoff)
		good = false
	}
	for _, k := range []string{"timeout", "backoff", "max_backoff"} {
		var d Duration
		switch k {
		case "timeout":
			d = r.Timeout
		case "backoff":
			d = r.Backoff
		default:
			d = r.MaxBackoff
		}
		if d < 0 {
			p.errorf(p.f.line(path+"."+k, e.line), path+"."+k, "must not be negative, got %s", d)
			good = false
		}
	}
	if good {
		// What the executor refuses when a replica starts, refused here.
		n := len(p.errs)
		p.checkExecutor(r, path, e.line)
		good = len(p.errs) == n
	}
	return r, good
}

// commandKeys are the keys of a run block's command written as a mapping.
var commandKeys = []string{"argv", "env", "dir", "kill_grace"}

// command reads a command run: either a list (the argv) or a mapping with
// argv, env, dir and kill_grace.
func (p *parser) command(e entry, path string) (*CommandRun, bool) {
	c := &CommandRun{}
	d := deref(e.val)
	if d != nil && d.Kind == yaml.SequenceNode {
		var ok bool
		c.Argv, ok = p.strList(e, path)
		if ok && len(c.Argv) == 0 {
			p.errorf(e.line, path, "is an empty list: give the program and its arguments")
			ok = false
		}
		return c, ok
	}
	m, ok := p.mapping(e.val, e.line, path)
	if !ok || m == nil {
		if ok {
			p.errorf(e.line, path, "is empty: give the program and its arguments (argv)")
		}
		return nil, false
	}
	sec := p.fields(p.entries(m, path), path, path, commandKeys...)
	good := true
	if x, ok := sec["argv"]; ok {
		c.Argv, ok = p.strList(x, path+".argv")
		good = good && ok
	}
	if len(c.Argv) == 0 && good {
		p.errorf(e.line, path+".argv", "is required: the program and its arguments, as a list")
		good = false
	}
	if x, ok := sec["env"]; ok {
		c.Env, ok = p.strMap(x, path+".env")
		good = good && ok
	}
	if x, ok := sec["dir"]; ok {
		c.Dir, ok = p.str(x, path+".dir")
		good = good && ok
	}
	if x, ok := sec["kill_grace"]; ok {
		c.KillGrace, ok = p.dur(x, path+".kill_grace")
		good = good && ok
	}
	return c, good
}

// httpRunKeys are the keys of a run block's http call.
var httpRunKeys = []string{"method", "url", "headers", "secrets"}

func (p *parser) httpRun(e entry, path string) (*HTTPRun, bool) {
	m, ok := p.mapping(e.val, e.line, path)
	if !ok || m == nil {
		if ok {
			p.errorf(e.line, path, "is empty: give at least url and secrets")
		}
		return nil, false
	}
	h := &HTTPRun{}
	sec := p.fields(p.entries(m, path), path, path, httpRunKeys...)
	good := true
	if x, ok := sec["method"]; ok {
		h.Method, ok = p.str(x, path+".method")
		good = good && ok
	}
	if x, ok := sec["url"]; ok {
		h.URL, ok = p.str(x, path+".url")
		good = good && ok
	} else {
		p.errorf(e.line, path+".url", "is required")
		good = false
	}
	if x, ok := sec["headers"]; ok {
		h.Headers, ok = p.strMap(x, path+".headers")
		good = good && ok
	}
	if x, ok := sec["secrets"]; ok {
		h.Secrets, ok = p.strList(x, path+".secrets")
		good = good && ok
		for _, s := range h.Secrets {
			if s != "" {
				p.secrets = append(p.secrets, s)
			}
		}
	}
	if len(h.Secrets) == 0 && good {
		p.errorf(e.line, path+".secrets", "is required: at least one signing secret (whsec_...), written as ${VAR}")
		good = false
	}
	return h, good
}
