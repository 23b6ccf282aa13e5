package config

import (
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/onetick/onetick"
)

// JobRelay hands a job's ticks to a queue the team already runs, instead
// of its stream (docs/relays.md): exactly one of River, Asynq and NATS. A
// relayed job has no run block: the other system's workers run it.
type JobRelay struct {
	River *RiverRelay `yaml:"river,omitempty" json:",omitempty"`
	Asynq *AsynqRelay `yaml:"asynq,omitempty" json:",omitempty"`
	NATS  *NATSRelay  `yaml:"nats,omitempty" json:",omitempty"`
}

// RiverRelay inserts each tick as a River job, in the claim's own
// transaction (backend postgres only).
type RiverRelay struct {
	// Queue is River's queue; default onetick.DefaultRelayQueue.
	Queue string `yaml:"queue" json:",omitempty"`
	// Kind is the River job's kind; default the job's name.
	Kind string `yaml:"kind" json:",omitempty"`
	// MaxAttempts is River's max_attempts; 0: River's default.
	MaxAttempts int `yaml:"max_attempts" json:",omitempty"`
}

// AsynqRelay writes each tick as an asynq task, in the claim's own
// script (backend redis only).
type AsynqRelay struct {
	// Queue is asynq's queue; default onetick.DefaultRelayQueue.
	Queue string `yaml:"queue" json:",omitempty"`
	// Type is the task's type; default the job's name.
	Type string `yaml:"type" json:",omitempty"`
	// MaxRetry is asynq's MaxRetry; MaxAttempts (MaxRetry + 1) says the
	// same. At most one of the two; neither: asynq's default.
	MaxRetry    *int `yaml:"max_retry" json:",omitempty"`
	MaxAttempts int  `yaml:"max_attempts" json:",omitempty"`
	// Retention is how long asynq keeps a finished task's id; 0: the tick
	// record's retention.
	Retention Duration `yaml:"retention" json:",omitempty"`
}

var (
	relayKeys      = []string{"river", "asynq", "nats"}
	riverRelayKeys = []string{"queue", "kind", "max_attempts"}
	asynqRelayKeys = []string{"queue", "type", "max_retry", "max_attempts", "retention"}
)

const maxRelayAttempts = 10000

// riverQueue is River's rule for a queue name.
var riverQueue = regexp.MustCompile(`^[a-z0-9]+(?:[_|\-][a-z0-9]+)*[a-z0-9]?$`)

// Relay returns r for the engine (nil: none).
func (r *JobRelay) Relay() *onetick.Relay {
	switch {
	case r == nil:
		return nil
	case r.River != nil:
		return &onetick.Relay{Kind: onetick.RelayRiver, Queue: r.River.Queue, Type: r.River.Kind, MaxAttempts: r.River.MaxAttempts}
	case r.Asynq != nil:
		a := r.Asynq
		n := a.MaxAttempts
		if a.MaxRetry != nil {
			n = *a.MaxRetry + 1
		}
		return &onetick.Relay{Kind: onetick.RelayAsynq, Queue: a.Queue, Type: a.Type, MaxAttempts: n, Retention: a.Retention.D()}
	case r.NATS != nil:
		// The queue, as `onetick status` and the relay metrics' labels
		// show it: the connection, a set the operator bounds (jobs applied
		// at run time may each have their own subject); an inline relay's
		// subject.
		q := r.NATS.Connection
		if q == "" {
			q = r.NATS.Subject
		}
		return &onetick.Relay{Kind: onetick.RelayNATS, Queue: q}
	}
	return nil
}

// jobRelay reads a job's relay block; checkRelay checks the values.
func (p *parser) jobRelay(e entry, plain, disp string) (*JobRelay, bool) {
	path := disp + ".relay"
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return nil, false
	}
	r := &JobRelay{}
	if m == nil {
		return r, true
	}
	sec := p.fields(p.entries(m, path), plain+".relay", path, relayKeys...)
	good := true
	if x, ok := sec["river"]; ok && !isNull(x.val) {
		r.River = &RiverRelay{}
		_, ok := p.relayFields(x, plain+".relay.river", path+".river", riverRelayKeys, map[string]*string{"queue": &r.River.Queue, "kind": &r.River.Kind},
			map[string]*int{"max_attempts": &r.River.MaxAttempts}, nil)
		good = good && ok
	}
	if x, ok := sec["asynq"]; ok && !isNull(x.val) {
		a := &AsynqRelay{}
		r.Asynq = a
		var retry int
		asec, ok := p.relayFields(x, plain+".relay.asynq", path+".asynq", asynqRelayKeys, map[string]*string{"queue": &a.Queue, "type": &a.Type},
			map[string]*int{"max_retry": &retry, "max_attempts": &a.MaxAttempts}, &a.Retention)
		good = good && ok
		if y, set := asec["max_retry"]; set && !isNull(y.val) {
			a.MaxRetry = &retry
		}
	}
	if x, ok := sec["nats"]; ok && !isNull(x.val) {
		n, ok := p.natsRelay(x, plain+".relay.nats", path+".nats")
		r.NATS = n
		good = good && ok
	}
	return r, good
}

// relayFields reads one relay's block: its strings, its integers (0 to
// maxRelayAttempts) and its retention (when ret is not nil); it returns
// the block's keys.
func (p *parser) relayFields(e entry, plain, path string, keys []string, strs map[string]*string, ints map[string]*int, ret *Duration) (map[string]entry, bool) {
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return nil, false
	}
	if m == nil {
		return nil, true
	}
	sec := p.fields(p.entries(m, path), plain, path, keys...)
	good := true
	for k, dst := range strs {
		if x, ok := sec[k]; ok {
			*dst, ok = p.str(x, path+"."+k)
			good = good && ok
		}
	}
	for k, dst := range ints {
		if x, ok := sec[k]; ok {
			v, ok := p.integer(x, path+"."+k, 0, maxRelayAttempts)
			*dst = int(v)
			good = good && ok
		}
	}
	if x, ok := sec["retention"]; ok && ret != nil {
		*ret, ok = p.dur(x, path+".retention")
		good = good && ok
	}
	return sec, good
}

// checkRelay checks job i's relay; add reports at a key of it.
func (f *File) checkRelay(i int, j Job, add func(line int, key, format string, args ...any)) {
	r := j.Relay
	at := "jobs[" + strconv.Itoa(i) + "].relay"
	line := func(key string) int { return f.line(at+"."+key, f.jobLine(i, "relay")) }
	var named []string
	for k, set := range map[string]bool{"river": r.River != nil, "asynq": r.Asynq != nil, "nats": r.NATS != nil} {
		if set {
			named = append(named, k)
		}
	}
	sort.Slice(named, func(a, b int) bool { return line(named[a]) < line(named[b]) })
	switch {
	case len(named) == 0:
		add(f.jobLine(i, "relay"), "relay", "names no relay: give river, asynq or nats (docs/relays.md)")
		return
	case len(named) > 1:
		add(line(named[1]), "relay", "names %s relays: give river, asynq or nats, one per job", [...]string{2: "two", 3: "three"}[len(named)])
		return
	case j.Run != nil:
		add(f.jobLine(i, "relay"), "relay", "is exclusive with run: a relayed job is run by the relay's own workers")
	case j.Deadline != nil:
		add(f.jobLine(i, "relay"), "relay", "is exclusive with deadline: the relay's workers do not report to onetick's ledger, so a deadline could only ever be missed")
	}
	if r.NATS != nil {
		checkNATSRelay(r.NATS, line, add)
	}
	if rv := r.River; rv != nil {
		if rv.Queue != "" && (len(rv.Queue) > 128 || !riverQueue.MatchString(rv.Queue)) {
			add(line("river.queue"), "relay.river.queue", "%q is not a River queue name (lower-case letters and digits, separated by _, - or |; at most 128)", short(rv.Queue))
		}
		if len(rv.Kind) > 200 {
			add(line("river.kind"), "relay.river.kind", "is longer than 200 bytes")
		}
		if rv.MaxAttempts < 0 || rv.MaxAttempts > maxRelayAttempts {
			add(line("river.max_attempts"), "relay.river.max_attempts", "must be between 0 and %d, got %d", maxRelayAttempts, rv.MaxAttempts)
		}
	}
	if a := r.Asynq; a != nil {
		if a.MaxRetry != nil && a.MaxAttempts != 0 {
			add(line("asynq.max_attempts"), "relay.asynq.max_attempts", "and max_retry say the same (max_attempts = max_retry + 1): give one")
		}
		if a.MaxRetry != nil && (*a.MaxRetry < 0 || *a.MaxRetry >= maxRelayAttempts) {
			add(line("asynq.max_retry"), "relay.asynq.max_retry", "must be between 0 and %d, got %d", maxRelayAttempts-1, *a.MaxRetry)
		}
		if a.Retention < 0 || (a.Retention != 0 && a.Retention.D() < time.Second) {
			add(line("asynq.retention"), "relay.asynq.retention", "must be at least 1s (or 0: the tick record's retention), got %s", a.Retention)
		}
	}
}
