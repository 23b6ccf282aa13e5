package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
)

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
	// Deadline is when each scheduled slot must have started and
	// succeeded; nil: none.
	Deadline *JobDeadline `yaml:"deadline,omitempty" json:",omitempty"`
	// Relay hands the ticks to a queue you run instead of the stream
	// (relay.go); nil: none. Exclusive with Run.
	Relay *JobRelay `yaml:"relay,omitempty" json:",omitempty"`
	// Line is the line of the job in the file (0 when unknown).
	Line int `yaml:"-"`
}

// validName is onetick's job-name rule.
var validName = onetick.ValidJobName

// loadZone loads an IANA zone ("" is UTC). "Local" is refused: every
// replica must compute the same slots, whatever its host's zone.
func loadZone(name string) (*time.Location, string) {
	switch name {
	case "", "UTC":
		return time.UTC, ""
	case "Local":
		return nil, `"Local" is not allowed: replicas must agree on the zone; name an IANA zone such as Europe/Berlin, or UTC`
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("unknown time zone %q (use an IANA name such as Europe/Berlin, or UTC)", short(name))
	}
	return loc, ""
}

// line returns the line of the key at path, or def.
func (f *File) line(path string, def int) int {
	if l, ok := f.lines[path]; ok {
		return l
	}
	return def
}

// jobKeys are the fields of a job, in the order of File.jobKeyLines.
var jobKeys = [...]string{"name", "schedule", "timezone", "prefer", "grace", "max_catchup", "stream", "max_len", "payload", "run", "deadline", "relay"}

func jobKeyIndex(key string) int {
	for k, n := range jobKeys {
		if n == key {
			return k
		}
	}
	return -1
}

// setJobLine records the line of job i's key: in jobKeyLines, a byte per
// key, when it is near the job's line (as it nearly always is: a map of
// paths costs about 70 bytes per key, a million jobs hold three million
// keys), else in lines.
func (f *File) setJobLine(i, jobLine int, key string, line int) {
	k := jobKeyIndex(key)
	if d := line - jobLine; k >= 0 && d >= 0 && d < 255 {
		for len(f.jobKeyLines) < (i+1)*len(jobKeys) {
			f.jobKeyLines = append(f.jobKeyLines, 0)
		}
		f.jobKeyLines[i*len(jobKeys)+k] = uint8(d + 1)
		return
	}
	f.lines["jobs["+strconv.Itoa(i)+"]."+key] = line
}

// jobLine returns the line of job i's key, or the job's line.
func (f *File) jobLine(i int, key string) int {
	j := f.Jobs[i]
	if k, at := jobKeyIndex(key), i*len(jobKeys); k >= 0 && at+k < len(f.jobKeyLines) {
		if d := f.jobKeyLines[at+k]; d > 0 {
			return j.Line + int(d) - 1
		}
	}
	return f.line("jobs["+strconv.Itoa(i)+"]."+key, j.Line)
}

// checkJobs applies the semantic job checks. bad holds plain field paths
// ("jobs[2].name", or "jobs[2]" for the whole job) already reported.
func (f *File) checkJobs(bad map[string]bool, keep []*cron.Schedule) Errors {
	var errs Errors
	seen := make(map[string]int, len(f.Jobs)) // name -> line of its name
	for i, j := range f.Jobs {
		plain := "jobs[" + strconv.Itoa(i) + "]"
		if len(bad) > 0 && bad[plain] {
			continue
		}
		// The display path, for messages only.
		disp := func() string {
			if validName(j.Name) == nil {
				return label(i, j.Name)
			}
			return plain
		}
		add := func(key, format string, args ...any) {
			errs = append(errs, &Error{File: f.Path, Line: f.jobLine(i, key), Field: disp() + "." + key,
				Msg: fmt.Sprintf(format, args...)})
		}
		ok := func(key string) bool { return len(bad) == 0 || !bad[plain+"."+key] }
		if ok("name") {
			if err := validName(j.Name); err != nil {
				add("name", "%v", err)
			} else if first, dup := seen[j.Name]; dup {
				add("name", "duplicate job name %q (first defined on line %d)", j.Name, first)
			} else {
				seen[j.Name] = f.jobLine(i, "name")
			}
		}
		loc := time.UTC
		if ok("timezone") {
			l, msg := loadZone(j.Timezone)
			if msg != "" {
				add("timezone", "%s", msg)
			} else {
				loc = l
			}
		}
		if ok("schedule") {
			if strings.TrimSpace(j.Schedule) == "" {
				add("schedule", "is required (for example \"0 2 * * *\" or \"@every 5m\")")
			} else if sch, err := f.parseSchedule(j.Schedule, loc, j.Timezone, j.Name); err != nil {
				// H without a name: the missing name is reported already.
				if !errors.Is(err, cron.ErrNoJobName) {
					add("schedule", "%v", err)
				}
			} else if keep != nil {
				keep[i] = sch
			}
		}
		if ok("prefer") {
			switch onetick.Prefer(j.Prefer) {
			case "", onetick.PreferMissed, onetick.PreferDuplicate:
			default:
				add("prefer", "must be %q or %q, got %q", onetick.PreferMissed, onetick.PreferDuplicate, short(j.Prefer))
			}
		}
		if ok("grace") {
			switch {
			case j.Grace < 0:
				add("grace", "must not be negative, got %s", j.Grace)
			case j.Grace != 0 && onetick.Prefer(j.Prefer) == onetick.PreferDuplicate:
				add("grace", "only applies to prefer: missed (with prefer: duplicate every late slot is fired)")
			}
		}
		if ok("max_catchup") && j.MaxCatchup < 0 {
			add("max_catchup", "must not be negative, got %d", j.MaxCatchup)
		}
		if ok("max_len") && j.MaxLen < 0 {
			add("max_len", "must not be negative, got %d", j.MaxLen)
		}
		if ok("payload") && j.Payload != "" && !json.Valid([]byte(j.Payload)) {
			add("payload", "is not valid JSON")
		}
		if ok("deadline") && j.Deadline != nil {
			f.checkDeadline(i, j.Deadline, func(line int, key, format string, args ...any) {
				errs = append(errs, &Error{File: f.Path, Line: line, Field: disp() + "." + key, Msg: fmt.Sprintf(format, args...)})
			})
		}
		if ok("relay") && j.Relay != nil {
			f.checkRelay(i, j, func(line int, key, format string, args ...any) {
				errs = append(errs, &Error{File: f.Path, Line: line, Field: disp() + "." + key, Msg: fmt.Sprintf(format, args...)})
			})
		}
	}
	return errs
}

// OneTickJobs converts the jobs to engine jobs, parsing each schedule with
// cron.ParseFor in its zone and for its name (from which H is hashed). On a
// File from Parse or Load it does not fail.
func (f *File) OneTickJobs() ([]onetick.Job, error) {
	schedules := make([]*cron.Schedule, len(f.Jobs))
	if errs := f.checkJobs(nil, schedules); len(errs) > 0 {
		return nil, errs
	}
	out := make([]onetick.Job, 0, len(f.Jobs))
	for i, j := range f.Jobs {
		s := schedules[i]
		var err error
		if s == nil { // checked above; kept for safety
			loc, _ := loadZone(j.Timezone)
			s, err = f.parseSchedule(j.Schedule, loc, j.Timezone, j.Name)
		}
		if err != nil {
			return nil, Errors{{File: f.Path, Line: f.jobLine(i, "schedule"),
				Field: label(i, j.Name) + ".schedule", Msg: err.Error(), err: err}}
		}
		out = append(out, onetick.Job{
			Name: j.Name, Schedule: s, Prefer: onetick.Prefer(j.Prefer), Grace: j.Grace.D(),
			MaxCatchup: j.MaxCatchup, Stream: j.Stream, MaxLen: j.MaxLen, Payload: j.Payload,
			Deadline: j.Deadline.Deadline(), Relay: j.Relay.Relay(),
		})
	}
	return out, nil
}

// schedKey identifies a parsed schedule: the expression in its zone.
type schedKey struct{ expr, zone string }

// parseSchedule parses expr for the job name in loc (named zone), sharing
// one *cron.Schedule (immutable) among the jobs with the same expression
// and zone: a million jobs written "0 * * * *" hold one schedule, and are
// parsed once. An expression that may use H (whose values hash the job's
// name) is parsed for each job: it is that job's alone.
func (f *File) parseSchedule(expr string, loc *time.Location, zone, name string) (*cron.Schedule, error) {
	if strings.ContainsAny(expr, "Hh") { // H, or a word such as @hourly
		return cron.ParseFor(expr, loc, name)
	}
	k := schedKey{expr: expr, zone: zone}
	if s, ok := f.schedules[k]; ok {
		return s, nil
	}
	s, err := cron.ParseFor(expr, loc, name)
	if err != nil {
		return nil, err
	}
	if f.schedules == nil {
		f.schedules = map[schedKey]*cron.Schedule{}
	}
	f.schedules[k] = s
	return s, nil
}

// LeaseConfig returns the lease timing for onetick (zero fields mean
// onetick's defaults).
func (f *File) LeaseConfig() onetick.LeaseConfig {
	return onetick.LeaseConfig{TTL: f.Lease.TTL.D(), Renew: f.Lease.Renew.D(), SafetyMargin: f.Lease.SafetyMargin.D()}
}

// JobDef is a job's definition as kept in the store by `onetick jobs
// apply`: the parsed job, defaults applied, as JSON.
func (j Job) JobDef() ([]byte, error) {
	j.Line = 0
	return json.Marshal(j)
}

// JobFromDef turns a stored definition back into a job of the engine,
// checked as the file's jobs are.
func JobFromDef(def []byte) (onetick.Job, Job, error) {
	var d Defs
	return d.Job(def)
}

// Defs turns many stored definitions into jobs of the engine, sharing
// one parsed schedule among the jobs with the same expression and zone
// (as Load does for a file). The zero value is ready to use; it is not
// safe for concurrent use.
type Defs struct {
	schedules map[schedKey]*cron.Schedule
}

// Job is JobFromDef, with the schedules of d.
func (d *Defs) Job(def []byte) (onetick.Job, Job, error) {
	var j Job
	if !decodeDef(def, &j) {
		j = Job{}
		if err := json.Unmarshal(def, &j); err != nil {
			return onetick.Job{}, j, fmt.Errorf("job definition: %v", err)
		}
	}
	f := &File{Path: "(stored job " + j.Name + ")", Jobs: []Job{j}, schedules: d.schedules}
	jobs, err := f.OneTickJobs()
	d.schedules = f.schedules
	if err != nil {
		return onetick.Job{}, j, err
	}
	if j.Run != nil || (j.Relay != nil && j.Relay.NATS != nil) {
		// Worked by this fleet's workers: each tick says which definition
		// it was claimed under.
		jobs[0].Version = DefVersion(def)
	}
	return jobs[0], j, nil
}

// DefVersion names a stored definition: the first 16 hexadecimal digits
// of its SHA-256. Jobs with a run block or a NATS relay carry it in every
// tick, so that a worker runs (publishes) each tick with the definition it
// was claimed under.
func DefVersion(def []byte) string {
	sum := sha256.Sum256(def)
	return hex.EncodeToString(sum[:8])
}

// jobs walks the job list.
func (p *parser) jobs(e entry, prefix string, ttl time.Duration) {
	if !e.ok() || isNull(e.val) {
		return
	}
	seq := deref(e.val)
	if seq.Kind != yaml.SequenceNode {
		p.errorf(e.line, "jobs", "must be a list of jobs (lines starting with -), got %s", p.kindText(seq))
		return
	}
	bad := map[string]bool{} // plain field paths that already have an error
	n := len(seq.Content)
	if seq == p.fastSeq && p.fast != nil {
		n = p.fast.count()
	}
	// Sized once: a job is over a hundred bytes, and growing a slice of a
	// million of them copies it several times over.
	p.f.Jobs = make([]Job, 0, n)
	p.f.jobKeyLines = make([]uint8, 0, n*len(jobKeys))
	i := 0
	each := func(item *yaml.Node) bool {
		if !p.spend(1, item.Line) {
			return false
		}
		if j, ok := p.job(i, item, bad); ok {
			p.f.Jobs = append(p.f.Jobs, j)
		} else {
			// Keep indexes aligned with the file.
			p.f.Jobs = append(p.f.Jobs, Job{Line: item.Line})
			bad[fmt.Sprintf("jobs[%d]", i)] = true
		}
		i++
		return true
	}
	if seq == p.fastSeq && p.fast != nil {
		if !p.fast.items(each) {
			p.fastFailed = true
			return
		}
	} else {
		for _, item := range seq.Content {
			if !each(item) {
				return
			}
		}
	}
	for _, e := range p.f.checkJobs(bad, nil) {
		p.errs = append(p.errs, e)
	}
	shards := p.f.Shards
	if p.base != nil {
		shards = p.base.Shards
	}
	for i := range p.f.Jobs {
		j := &p.f.Jobs[i]
		if j.Timezone == "" {
			j.Timezone = DefaultTimezone
		}
		if j.Prefer == "" {
			j.Prefer = string(onetick.PreferMissed)
		}
		if j.Grace == 0 && j.Prefer == string(onetick.PreferMissed) {
			j.Grace = Duration(2 * ttl)
		}
		if j.MaxCatchup == 0 {
			j.MaxCatchup = DefaultMaxCatchup
		}
		if j.Stream == "" {
			j.Stream = DefaultStream(prefix, j.Name, shards)
		}
		if j.Payload == "" {
			j.Payload = DefaultPayload
		}
	}
	p.errs = append(p.errs, p.f.checkSlots(p.base)...)
}

// job reads one job's fields. Semantic checks are left to checkJobs.
func (p *parser) job(i int, item *yaml.Node, bad map[string]bool) (Job, bool) {
	plain := "jobs[" + strconv.Itoa(i) + "]"
	j := Job{Line: item.Line}
	if isNull(item) {
		p.errorf(item.Line, plain, "is empty: a job needs at least a name and a schedule")
		return j, false
	}
	m, ok := p.mapping(item, item.Line, plain)
	if !ok {
		return j, false
	}
	es := p.entries(m, plain)
	// The name first: it labels the job's other errors.
	disp := plain
	for _, e := range es {
		if e.name == "name" {
			if v, ok := p.str(e, plain+".name"); ok {
				j.Name = v
				if validName(v) == nil {
					disp = label(i, v)
				}
			} else {
				bad[plain+".name"] = true
			}
		}
	}
	sec := p.fieldsRec(es, disp, jobKeys[:], func(name string, line int) { p.f.setJobLine(i, j.Line, name, line) })
	fail := func(key string, ok bool) {
		if !ok {
			bad[plain+"."+key] = true
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"schedule", &j.Schedule}, {"timezone", &j.Timezone}, {"prefer", &j.Prefer}, {"stream", &j.Stream}} {
		if e, ok := sec[f.key]; ok {
			var ok bool
			*f.dst, ok = p.str(e, disp+"."+f.key)
			fail(f.key, ok)
		}
	}
	if e, ok := sec["grace"]; ok {
		var ok bool
		j.Grace, ok = p.dur(e, disp+".grace")
		fail("grace", ok)
	}
	if e, ok := sec["max_catchup"]; ok {
		v, ok := p.integer(e, disp+".max_catchup", 0, math.MaxInt)
		j.MaxCatchup = int(v)
		fail("max_catchup", ok)
	}
	if e, ok := sec["max_len"]; ok {
		var ok bool
		j.MaxLen, ok = p.integer(e, disp+".max_len", 0, math.MaxInt64)
		fail("max_len", ok)
	}
	if e, ok := sec["payload"]; ok {
		var ok bool
		j.Payload, ok = p.payload(e, disp+".payload")
		fail("payload", ok)
	}
	if e, ok := sec["run"]; ok && !isNull(e.val) {
		var ok bool
		j.Run, ok = p.run(e, disp)
		fail("run", ok)
	}
	if e, ok := sec["deadline"]; ok && !isNull(e.val) {
		var ok bool
		j.Deadline, ok = p.jobDeadline(e, plain, disp)
		fail("deadline", ok)
	}
	if e, ok := sec["relay"]; ok && !isNull(e.val) {
		var ok bool
		j.Relay, ok = p.jobRelay(e, plain, disp)
		fail("relay", ok)
	}
	return j, true
}

// label is a job's display path: jobs[i] (name).
func label(i int, name string) string {
	return "jobs[" + strconv.Itoa(i) + "] (" + name + ")"
}
