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
	Role    string  `yaml:"role"`
	Worker  Worker  `yaml:"worker"`
	Metrics Metrics `yaml:"metrics"`
	Jobs    []Job   `yaml:"jobs"`

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

// Backend selects the store. With Redis nil the embedded in-process backend
// is used.
type Backend struct {
	Redis *Redis `yaml:"redis"`
	// File is the durable embedded store (the default when no backend is
	// configured): one SQLite file on this host.
	File *FileStore `yaml:"file"`
	// Memory selects the in-process store: state lost on exit (tests,
	// demos).
	Memory bool `yaml:"memory"`
	// Postgres is a PostgreSQL database.
	Postgres *Postgres `yaml:"postgres"`
}

// Postgres configures the PostgreSQL backend.
type Postgres struct {
	// URL is postgres://user:password@host:port/db?sslmode=... (any form
	// pgx accepts). It may carry credentials: never log it unmasked.
	URL string `yaml:"url"`
	// Schema holds onetick's tables; default "onetick". Several fleets can
	// share a database with one schema each.
	Schema string `yaml:"schema"`
	// ClockTolerance: claims for slots further ahead of the database's
	// clock are refused. Default 100ms.
	ClockTolerance Duration `yaml:"clock_tolerance"`
	// EntryRetention deletes stream entries older than this; default 0:
	// kept (trim per job with max_len).
	EntryRetention Duration `yaml:"entry_retention"`
}

// FileStore configures the durable embedded store.
type FileStore struct {
	// Path of the file; default $STATE_DIRECTORY/onetick.db, else
	// $XDG_STATE_HOME/onetick/onetick.db, else
	// ~/.local/state/onetick/onetick.db.
	Path string `yaml:"path"`
}

// Redis configures the Redis backend.
type Redis struct {
	// URL is redis://[user[:password]@]host[:port][/db][?options] or
	// rediss://... for TLS. It may carry credentials: never log it
	// unmasked.
	URL string `yaml:"url"`
	// Prefix of every key. Default "onetick".
	Prefix string `yaml:"prefix"`
	// Username and Password, when not empty, override the URL's.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// ClockTolerance: claims for slots further than this in the future by
	// Redis TIME are refused. Default 100ms.
	ClockTolerance Duration `yaml:"clock_tolerance"`
	TLS            TLS      `yaml:"tls"`
	// Sentinel and Cluster name the other topologies; exactly one of URL,
	// Sentinel and Cluster is set.
	Sentinel *Sentinel `yaml:"sentinel"`
	Cluster  *Cluster  `yaml:"cluster"`
	// Durability is async (default) or replicated: acquire, renew and
	// claim then wait for Replicas replicas within ReplicationTimeout.
	Durability         string   `yaml:"durability"`
	Replicas           int      `yaml:"replicas"`
	ReplicationTimeout Duration `yaml:"replication_timeout"`
}

// Sentinel is a Sentinel-managed primary with replicas.
type Sentinel struct {
	// Primary is the name the sentinels monitor (their "master name").
	Primary string   `yaml:"primary"`
	Addrs   []string `yaml:"addrs"`
	// Username and Password authenticate to the sentinels (the data
	// nodes use backend.redis.username and password).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// Cluster is a Redis Cluster, reached through seed addresses.
type Cluster struct {
	Addrs []string `yaml:"addrs"`
}

// Topology names the configured topology: standalone, sentinel or cluster.
func (r *Redis) Topology() string {
	switch {
	case r.Sentinel != nil:
		return "sentinel"
	case r.Cluster != nil:
		return "cluster"
	}
	return "standalone"
}

// TLS configures TLS to Redis.
type TLS struct {
	// Enabled turns TLS on; a rediss:// URL implies it.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs to trust instead of the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name the server certificate is checked
	// against (default the URL's host).
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Lease is the election timing. After Parse every field holds its effective
// value.
type Lease struct {
	TTL          Duration `yaml:"ttl"`
	Renew        Duration `yaml:"renew"`
	SafetyMargin Duration `yaml:"safety_margin"`
}

// Job is one job as configured. After Parse every default is applied.
type Job struct {
	Name       string   `yaml:"name"`
	Schedule   string   `yaml:"schedule"`
	Timezone   string   `yaml:"timezone"`
	Prefer     string   `yaml:"prefer"`
	Grace      Duration `yaml:"grace"`
	MaxCatchup int      `yaml:"max_catchup"`
	Stream     string   `yaml:"stream"`
	MaxLen     int64    `yaml:"max_len"`
	// Payload is the job's payload as compact JSON.
	Payload string `yaml:"payload"`
	// Run is what the daemon's worker runs once per tick; nil: the ticks
	// are left in the stream for consumers of your own.
	Run *Run `yaml:"run,omitempty"`
	// Line is the line of the job in the file (0 when unknown).
	Line int `yaml:"-"`
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
