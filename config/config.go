package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick/cron"
)

// Defaults applied by Parse and Load.
const (
	DefaultPrefix         = "onetick"
	DefaultClockTolerance = 100 * time.Millisecond
	DefaultListen         = "127.0.0.1:9464"
	DefaultTimezone       = "UTC"
	DefaultMaxCatchup     = 100
	DefaultPayload        = "{}"
	// ListenOff is the http.listen value that disables the HTTP server.
	ListenOff = "off"
	// MaxPayload is the largest accepted payload, in bytes of compact JSON.
	MaxPayload = 1 << 20
)

// File is a parsed, defaulted and validated configuration file.
type File struct {
	// Path is the file the configuration came from (the name given to
	// Parse).
	Path    string  `yaml:"-"`
	Backend Backend `yaml:"backend"`
	Lease   Lease   `yaml:"lease"`
	HTTP    HTTP    `yaml:"http"`
	// Role is what each replica does: both (default), scheduler or worker.
	Role string `yaml:"role"`
	// Shards is how many shards the jobs are spread over (1 to 256,
	// default 1; docs/shards.md): `onetick run` gives it to the engine.
	Shards  int     `yaml:"shards"`
	Worker  Worker  `yaml:"worker"`
	Metrics Metrics `yaml:"metrics"`
	// Ledger bounds the run ledger.
	Ledger Ledger `yaml:"ledger"`
	// Deadlines configures the watch of the jobs' deadlines.
	Deadlines Deadlines `yaml:"deadlines"`
	// Tracing sends a trace per tick to an OTLP collector (off without).
	Tracing Tracing `yaml:"tracing"`
	// Relays are the named connections jobs relay to (relays.nats): the
	// only place an address or credential of a relay of a job applied at
	// run time comes from.
	Relays Relays `yaml:"relays"`
	Jobs   []Job  `yaml:"jobs"`

	// dir is the directory relative TLS file names are resolved against
	// (set by Load; empty: the working directory).
	dir string
	// lines maps field paths (jobs by index: "jobs[2].schedule") to the
	// line of their key.
	lines map[string]int
	// jobKeyLines holds the lines of the jobs' keys (see setJobLine).
	jobKeyLines []uint8
	// schedules are the parsed schedules, shared (see parseSchedule).
	schedules map[schedKey]*cron.Schedule
}

// jobsFileKeys are the top-level keys of a jobs file.
var jobsFileKeys = []string{"jobs"}

// topKeys are the top-level keys of a configuration file, the sections.
var topKeys = []string{"backend", "lease", "http", "role", "shards", "worker", "metrics", "ledger", "deadlines", "tracing", "relays", "jobs"}

// top walks the root mapping.
func (p *parser) top(root *yaml.Node) {
	m, ok := p.mapping(root, rootLine(root), "")
	if !ok {
		p.errs[len(p.errs)-1].Msg = "the top level must be a mapping with the keys " + strings.Join(topKeys[:len(topKeys)-1], ", ") + " and " + topKeys[len(topKeys)-1]
		return
	}
	var es []entry
	if m != nil {
		es = p.entries(m, "")
	}
	if p.base != nil {
		// A jobs file: its jobs join base's configuration. It says what
		// the set becomes, so it must say it: a file or body with no list
		// (empty, cut short, null) would otherwise remove every job.
		sec := p.fields(es, "", "", jobsFileKeys...)
		switch je, ok := sec["jobs"]; {
		case !ok && len(p.errs) == 0:
			p.errorf(rootLine(root), "jobs", "is missing: a jobs file holds a jobs: list (an empty file is refused; write jobs: [] to remove every job of the set)")
		case ok && isNull(je.val):
			p.errorf(je.line, "jobs", "is empty: list the jobs, or write jobs: [] to remove every job of the set")
		}
		prefix := DefaultPrefix
		if r := p.base.Backend.Redis; r != nil {
			prefix = r.Prefix
		}
		p.jobs(sec["jobs"], prefix, p.base.Lease.TTL.D())
		return
	}
	sec := p.fields(es, "", "", topKeys...)
	prefix := p.backend(sec["backend"])
	ttl := p.lease(sec["lease"])
	p.http(sec["http"])
	p.role(sec["role"])
	p.shards(sec["shards"], sec["backend"])
	p.worker(sec["worker"])
	p.relays(sec["relays"]) // before the jobs, which name its connections
	p.jobs(sec["jobs"], prefix, ttl)
	p.metrics(sec["metrics"])
	p.ledger(sec["ledger"])
	p.deadlines(sec["deadlines"])
	p.tracing(sec["tracing"])
}

func rootLine(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// Duration is a time.Duration written in Go syntax (15s, 1m30s, 250ms).
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d in Go syntax.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes d in Go syntax.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a Go duration string. A bare number other than 0 is
// an error: the unit must be explicit.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return errors.New("must be a duration such as 15s")
	}
	if n.ShortTag() == "!!null" {
		*d = 0
		return nil
	}
	v, msg := parseDuration(n.Value)
	if msg != "" {
		return errors.New(msg)
	}
	*d = Duration(v)
	return nil
}

var bareNumber = regexp.MustCompile(`^[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?$`)

// parseDuration parses s, returning a message on error.
func parseDuration(s string) (time.Duration, string) {
	s = strings.TrimSpace(s)
	if s != "0" && bareNumber.MatchString(s) {
		return 0, "is a bare number (" + short(s) + "): use a unit, e.g. 15s"
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, "invalid duration " + strconv.Quote(short(s)) + ": use Go syntax with a unit, e.g. 15s, 1m30s, 250ms"
	}
	return d, ""
}

// Error is one problem in a configuration file.
type Error struct {
	File  string // the file's name
	Line  int    // 1-based; 0 when unknown
	Field string // the field path, such as "jobs[2] (nightly).schedule"; may be empty
	Msg   string
	err   error // cause, if any
}

// Error formats "FILE:LINE: FIELD: MSG", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		if e.File != "" {
			b.WriteByte(':')
		} else {
			b.WriteString("line ")
		}
		b.WriteString(strconv.Itoa(e.Line))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the cause (such as a *fs.PathError), if any.
func (e *Error) Unwrap() error { return e.err }

// Errors is every problem found, in file order.
type Errors []*Error

// Error joins the problems, one per line.
func (es Errors) Error() string {
	if len(es) == 0 {
		return "config: no errors"
	}
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the problems, for errors.As and errors.Is.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Load reads the file at path and parses it like Parse. Relative TLS file
// names in it are resolved against the file's directory.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, Errors{{File: path, Msg: "cannot read the file: " + msg, err: err}}
	}
	f, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	f.dir = filepath.Dir(path)
	return f, nil
}

// Parse parses, defaults and validates a configuration file's contents,
// expanding ${VAR} and ${VAR:-default} from the environment. name is used
// in error messages. On any problem it returns nil and Errors.
func Parse(name string, data []byte) (*File, error) {
	return parse(name, data, os.LookupEnv)
}

// short truncates s for use in a message.
func short(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// ParseJobs parses a jobs file (the top level holds only jobs, checked as
// the configuration file's are) whose jobs join base: default streams use
// base's key prefix, default graces its lease ttl.
func ParseJobs(name string, data []byte, base *File) (*File, error) {
	return parseWith(name, data, os.LookupEnv, base)
}

// ParseRequestJobs is ParseJobs for a jobs file that came from a client
// (the HTTP API): no environment variable is read, and a ${VAR} is an
// error, so that a client cannot copy the daemon's environment (its
// secrets) into a job's payload and read it back.
func ParseRequestJobs(name string, data []byte, base *File) (*File, error) {
	return parseWith(name, data, nil, base)
}

// LoadJobs reads and parses a jobs file (see ParseJobs).
func LoadJobs(path string, base *File) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, Errors{{File: path, Msg: "cannot read the file: " + msg, err: err}}
	}
	return ParseJobs(path, data, base)
}
