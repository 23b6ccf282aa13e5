package config

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/notify"
)

// Deadlines configures the leader's watch of the jobs' deadlines
// (docs/ledger.md, "Deadlines"). After Parse every field holds its
// effective value.
type Deadlines struct {
	// CheckEvery is the time between two checks. Default 10s; 1s to 1h.
	CheckEvery Duration `yaml:"check_every"`
	// Lookback: each check reads in one query the records of the slots
	// since the longest deadline plus Lookback ago. Default 1m; at most
	// 24h.
	Lookback Duration `yaml:"lookback"`
	// Notify, if set, posts each change of a job's state to a webhook.
	Notify *DeadlineNotify `yaml:"notify,omitempty"`
}

// DeadlineNotify is the webhook the changes go to, signed as the HTTP
// executor's calls are (package notify).
type DeadlineNotify struct {
	URL     string   `yaml:"url"`
	Secrets []string `yaml:"secrets"`
	// Timeout bounds one notice. Default 10s; at most 5m.
	Timeout Duration `yaml:"timeout"`
	// Line is the line of the notify key (0 when unknown).
	Line int `yaml:"-"`
}

// JobDeadline is a job's deadline: each scheduled slot must have started
// within Start and succeeded within Finish of its time (0: none).
type JobDeadline struct {
	Start  Duration `yaml:"start"`
	Finish Duration `yaml:"finish"`
}

// Deadline returns d for the engine (nil: none).
func (d *JobDeadline) Deadline() onetick.Deadline {
	if d == nil {
		return onetick.Deadline{}
	}
	return onetick.Deadline{Start: d.Start.D(), Finish: d.Finish.D()}
}

// Key lists and bounds.
var (
	deadlinesKeys   = []string{"check_every", "lookback", "notify"}
	notifyKeys      = []string{"url", "secrets", "timeout"}
	jobDeadlineKeys = []string{"start", "finish"}
)

const (
	minDeadline   = time.Second
	minCheckEvery = time.Second
	maxCheckEvery = time.Hour
	maxLookback   = 24 * time.Hour
)

// Watcher returns the watcher's timing and its notifier (nil when none is
// configured) for onetick.DeadlineConfig. On a File from Parse or Load it
// does not fail.
func (d Deadlines) Watcher() (onetick.DeadlineConfig, error) {
	cfg := onetick.DeadlineConfig{CheckEvery: d.CheckEvery.D(), Lookback: d.Lookback.D()}
	if n := d.Notify; n != nil {
		wh, err := notify.New(n.config())
		if err != nil {
			return cfg, err
		}
		cfg.Notifier = wh
	}
	return cfg, nil
}

func (n *DeadlineNotify) config() notify.Config {
	return notify.Config{URL: n.URL, Secrets: n.Secrets, Timeout: n.Timeout.D()}
}

// deadlines walks the deadlines section.
func (p *parser) deadlines(e entry) {
	const path = "deadlines"
	d := &p.f.Deadlines
	defer func() {
		if d.CheckEvery == 0 {
			d.CheckEvery = Duration(onetick.DefaultDeadlineCheckEvery)
		}
		if d.Lookback == 0 {
			d.Lookback = Duration(onetick.DefaultDeadlineLookback)
		}
		if d.Notify != nil && d.Notify.Timeout == 0 {
			d.Notify.Timeout = Duration(notify.DefaultTimeout)
		}
	}()
	if !e.ok() {
		return
	}
	m, ok := p.mapping(e.val, e.line, path)
	if m == nil || !ok {
		return
	}
	sec := p.fields(p.entries(m, path), path, path, deadlinesKeys...)
	if x, ok := sec["check_every"]; ok {
		if v, ok := p.dur(x, path+".check_every"); ok {
			if v != 0 && (v.D() < minCheckEvery || v.D() > maxCheckEvery) {
				p.errorf(x.line, path+".check_every", "must be between %s and %s, got %s", minCheckEvery, maxCheckEvery, v)
			} else {
				d.CheckEvery = v
			}
		}
	}
	if x, ok := sec["lookback"]; ok {
		if v, ok := p.dur(x, path+".lookback"); ok {
			if v < 0 || v.D() > maxLookback {
				p.errorf(x.line, path+".lookback", "must be between 0s and %s, got %s", maxLookback, v)
			} else {
				d.Lookback = v
			}
		}
	}
	if x, ok := sec["notify"]; ok && !isNull(x.val) {
		d.Notify = p.deadlineNotify(x, path+".notify")
	}
}

// deadlineNotify walks the notify block and checks it as notify.New does.
func (p *parser) deadlineNotify(e entry, path string) *DeadlineNotify {
	m, ok := p.mapping(e.val, e.line, path)
	if m == nil || !ok {
		return nil
	}
	n := &DeadlineNotify{Line: e.line}
	p.itemLines = map[string]int{}
	defer func() { p.itemLines = nil }()
	sec := p.fields(p.entries(m, path), path, path, notifyKeys...)
	good := true
	if x, ok := sec["url"]; ok {
		n.URL, ok = p.str(x, path+".url")
		good = good && ok
	}
	if x, ok := sec["secrets"]; ok {
		n.Secrets, ok = p.strList(x, path+".secrets")
		good = good && ok
		p.secrets = append(p.secrets, n.Secrets...)
	}
	if x, ok := sec["timeout"]; ok {
		n.Timeout, ok = p.dur(x, path+".timeout")
		good = good && ok
	}
	if !good {
		return nil
	}
	err := n.config().Validate()
	var ce *onetick.ConfigError
	if errors.As(err, &ce) {
		field := path + "." + ce.Field
		line := e.line
		if l, ok := p.itemLines[field]; ok {
			line = l
		} else if l, ok := p.f.lines[path+"."+strings.SplitN(ce.Field, "[", 2)[0]]; ok {
			line = l
		}
		p.errorf(line, field, "%s", ce.Msg)
		return nil
	}
	return n
}

// jobDeadline reads a job's deadline block; checkJobs checks the values.
func (p *parser) jobDeadline(e entry, plain, disp string) (*JobDeadline, bool) {
	path := disp + ".deadline"
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return nil, false
	}
	d := &JobDeadline{}
	if m == nil {
		return d, true
	}
	sec := p.fields(p.entries(m, path), plain+".deadline", path, jobDeadlineKeys...)
	good := true
	if x, ok := sec["start"]; ok {
		d.Start, ok = p.dur(x, path+".start")
		good = good && ok
	}
	if x, ok := sec["finish"]; ok {
		d.Finish, ok = p.dur(x, path+".finish")
		good = good && ok
	}
	return d, good
}

// checkDeadline checks job i's deadline; add reports at a key of it.
func (f *File) checkDeadline(i int, d *JobDeadline, add func(line int, key, format string, args ...any)) {
	line := func(key string) int {
		return f.line("jobs["+strconv.Itoa(i)+"].deadline."+key, f.jobLine(i, "deadline"))
	}
	if d.Start == 0 && d.Finish == 0 {
		add(f.jobLine(i, "deadline"), "deadline", "names no deadline: give start, finish or both (each at least %s)", minDeadline)
		return
	}
	bad := false
	for _, k := range []struct {
		key string
		v   Duration
	}{{"start", d.Start}, {"finish", d.Finish}} {
		if k.v != 0 && k.v.D() < minDeadline {
			add(line(k.key), "deadline."+k.key, "must be at least %s, got %s", minDeadline, k.v)
			bad = true
		}
	}
	if !bad && d.Start != 0 && d.Finish != 0 && d.Finish < d.Start {
		add(line("finish"), "deadline.finish", "must not be shorter than start (%s): a run cannot succeed before it starts", d.Start)
	}
}
