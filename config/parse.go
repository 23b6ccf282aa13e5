package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/onetick/onetick/internal/redact"
	otredis "github.com/onetick/onetick/redis"

	"github.com/onetick/onetick"
)

// maxVisits bounds the work of following aliases and merge keys, so that
// "billion laughs" documents fail instead of exhausting memory: walking a
// document costs about one unit per node, and a document of n bytes may
// spend maxVisits + 2n units (it has fewer than n nodes).
const maxVisits = 1 << 20

// maxDepth bounds the nesting of a payload (counting aliases followed).
const maxDepth = 1000

type parser struct {
	file   string
	f      *File
	errs   Errors
	lookup func(string) (string, bool)
	// expanded caches the environment-expanded copy of each scalar, so a
	// scalar reached through several aliases is expanded (and its problems
	// reported) once.
	expanded map[*yaml.Node]*yaml.Node
	refs     *envRefs // the environment references in the text
	// active counts the mappings and sequences being walked, to detect
	// alias cycles.
	active   map[*yaml.Node]int
	budget   int
	overflow bool
	// secrets are removed from the messages of the errors near them
	// (redact).
	secrets []string
	// itemLines, while a run block is read, records the line of every
	// string in it by path (checkExecutor names them).
	itemLines map[string]int
	// base, for a jobs file, is the configuration its jobs join.
	base *File
	// fast is the job list read apart, standing in the document as
	// fastSeq; fastFailed is set when it cannot be.
	fast       *jobsBlock
	fastSeq    *yaml.Node
	fastFailed bool
}

// entry is one key of a mapping.
type entry struct {
	name string     // the key
	line int        // line of the key (where it is written, for aliases too)
	key  *yaml.Node // the key node, dereferenced
	val  *yaml.Node // the value as written (maybe an alias)
}

func (e entry) ok() bool { return e.val != nil }

func parse(name string, data []byte, lookup func(string) (string, bool)) (*File, error) {
	return parseWith(name, data, lookup, nil)
}

// parseWith parses a file; with base set it is a jobs file: only jobs,
// their defaults taken from base (the key prefix of default streams, the
// lease ttl of the default grace).
func parseWith(name string, data []byte, lookup func(string) (string, bool), base *File) (*File, error) {
	p := newParser(name, data, lookup, base)
	data, p.refs = markRefs(data)
	if root, ok := p.decodeFast(data); ok && !noFastJobs {
		p.top(root)
		if p.fastFailed {
			// An item the list reader cannot take alone: the whole file
			// through the decoder.
			refs := p.refs
			p = newParser(name, data, lookup, base)
			p.refs = refs
			if root, ok := p.decode(data); ok {
				p.top(root)
			}
		}
	} else if root, ok := p.decode(data); ok {
		p.top(root)
	}
	if len(p.errs) > 0 {
		p.redact()
		sort.SliceStable(p.errs, func(i, k int) bool {
			a, b := p.errs[i].Line, p.errs[k].Line
			if a == 0 || b == 0 {
				return a != 0 && b == 0
			}
			return a < b
		})
		return nil, p.errs
	}
	return p.f, nil
}

// noFastJobs turns the list reader of fastjobs.go off (for the tests that
// compare it with the decoder).
var noFastJobs = false

func newParser(name string, data []byte, lookup func(string) (string, bool), base *File) *parser {
	p := &parser{
		file: name, lookup: lookup, budget: maxVisits + 2*len(data),
		expanded: map[*yaml.Node]*yaml.Node{}, active: map[*yaml.Node]int{}, base: base,
	}
	p.f = &File{Path: name, lines: map[string]int{}}
	return p
}

// decodeFast decodes data with the list under the top-level key jobs read
// apart (see fastjobs.go). ok is false when the file does not have that
// shape or the rest does not decode: the caller then decodes it whole,
// which reports any problem as before.
func (p *parser) decodeFast(data []byte) (*yaml.Node, bool) {
	rest, b, ok := cutJobs(data)
	if !ok {
		return nil, false
	}
	root, err := decodeYAML(rest)
	if err != nil || root == nil || root.Kind != yaml.MappingNode {
		return nil, false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "jobs" && k.Line == b.keyLine && k.Style == 0 && isNull(v) && v.Kind == yaml.ScalarNode {
			p.fast = b
			p.fastSeq = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: b.firstLine, Column: b.indent + 1}
			root.Content[i+1] = p.fastSeq
			return root, true
		}
	}
	return nil, false
}

func (p *parser) errorf(line int, field, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: field, Msg: msg})
}

// decode parses the YAML document. It returns the root node (nil for an
// empty document) and whether parsing succeeded.
func (p *parser) decode(data []byte) (*yaml.Node, bool) {
	root, err := decodeYAML(data)
	if err != nil {
		msg, line := yamlMessage(err)
		if _, multi := err.(multiDocError); !multi {
			line = syntaxErrorLine(data, msg)
		}
		p.errorf(line, "", "%s", msg)
		return nil, false
	}
	return root, true
}

// multiDocError reports a second YAML document.
type multiDocError struct{ line int }

func (e multiDocError) Error() string {
	return "yaml: line " + strconv.Itoa(e.line) + ": only one YAML document is allowed"
}

// decodeYAML parses data, which must hold at most one document, and returns
// its root node (nil for an empty document).
func decodeYAML(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, errors.New("yaml: the parser failed")
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	default:
		return nil, multiDocError{extra.Line}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlMessage splits a yaml error into its message and the line it names.
func yamlMessage(err error) (string, int) {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if _, multi := err.(multiDocError); multi {
		return msg, line
	}
	return "invalid YAML: " + msg, line
}

// syntaxErrorLine finds the line of a syntax error. The line yaml names is
// that of the construct being parsed, often lines before the problem (and
// none at all on the first line), so instead this finds the first line
// after which the cut text fails with the same message. A cut after an
// unfinished construct may fail differently ("unexpected end of stream"),
// hence the comparison of messages. The search is binary: exact when
// failing is monotonic in the cut, as it nearly always is.
func syntaxErrorLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	if len(lines) == 0 {
		return 0
	}
	offsets := make([]int, len(lines)+1) // offsets[k]: length of the first k lines
	for i, l := range lines {
		offsets[i+1] = offsets[i] + len(l)
	}
	fails := func(k int) bool {
		_, err := decodeYAML(data[:offsets[k]])
		if err == nil {
			return false
		}
		m, _ := yamlMessage(err)
		return m == msg
	}
	lo, hi := 1, len(lines) // the answer is in [lo, hi]; all of data fails
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// deref follows aliases; nil for a dangling alias.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func keyText(k string) string {
	if plainKey.MatchString(k) {
		return k
	}
	return strconv.Quote(short(k))
}

// spend charges n units of work, reporting once when the budget is gone.
func (p *parser) spend(n int, line int) bool {
	p.budget -= n
	if p.budget >= 0 {
		return true
	}
	if !p.overflow {
		p.overflow = true
		p.errorf(line, "", "the document is too complex (its aliases and merge keys expand to more than %d nodes)", maxVisits)
	}
	return false
}

// entries returns the keys of mapping m in order, with merge keys (<<)
// applied: explicit keys win over merged ones, earlier merged mappings over
// later ones. Duplicate explicit keys are reported.
func (p *parser) entries(m *yaml.Node, path string) []entry {
	if !p.spend(len(m.Content)/2+1, m.Line) {
		return nil
	}
	p.active[m]++
	defer func() {
		if p.active[m]--; p.active[m] <= 0 {
			delete(p.active, m)
		}
	}()
	var out, merged []entry
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		kd := deref(k)
		if kd == nil || kd.Kind != yaml.ScalarNode {
			p.errorf(k.Line, path, "mapping keys must be strings")
			continue
		}
		if kd.ShortTag() == "!!merge" {
			merged = append(merged, p.merge(v, path)...)
			continue
		}
		kd = p.scalar(kd, path)
		if first, dup := seen[kd.Value]; dup {
			p.errorf(k.Line, join(path, keyText(kd.Value)), "duplicate key (first on line %d)", first)
			continue
		}
		seen[kd.Value] = k.Line
		out = append(out, entry{name: kd.Value, line: k.Line, key: kd, val: v})
	}
	for _, e := range merged {
		if _, dup := seen[e.name]; !dup {
			seen[e.name] = e.line
			out = append(out, e)
		}
	}
	return out
}

// merge returns the entries a merge key's value contributes.
func (p *parser) merge(v *yaml.Node, path string) []entry {
	vd := deref(v)
	if vd == nil {
		p.errorf(v.Line, path, "<< must merge a mapping or a list of mappings")
		return nil
	}
	var list []*yaml.Node
	switch vd.Kind {
	case yaml.MappingNode:
		list = []*yaml.Node{vd}
	case yaml.SequenceNode:
		for _, it := range vd.Content {
			list = append(list, deref(it))
		}
	}
	if len(list) == 0 && vd.Kind != yaml.SequenceNode {
		p.errorf(v.Line, path, "<< must merge a mapping or a list of mappings")
		return nil
	}
	var out []entry
	seen := map[string]bool{}
	for _, m := range list {
		if m == nil || m.Kind != yaml.MappingNode {
			p.errorf(v.Line, path, "<< must merge a mapping or a list of mappings")
			continue
		}
		if p.active[m] > 0 {
			p.errorf(v.Line, path, "<< merges a mapping into itself")
			continue
		}
		for _, e := range p.entries(m, path) {
			if !seen[e.name] {
				seen[e.name] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// mapping returns the mapping at n: (m, true) for a mapping, (nil, true) for
// null, (nil, false) after reporting anything else.
func (p *parser) mapping(n *yaml.Node, line int, path string) (*yaml.Node, bool) {
	if isNull(n) {
		return nil, true
	}
	d := deref(n)
	if d.Kind != yaml.MappingNode {
		p.errorf(line, path, "must be a mapping (key: value lines), got %s", p.kindText(d))
		return nil, false
	}
	return d, true
}

func (p *parser) kindText(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar (" + strconv.Quote(short(p.refs.restore(n.Value))) + ")"
	}
	return "something else"
}

// fields checks the keys of a section against known, reporting unknown
// ones, records the line of every known key under plain and returns them by
// name.
func (p *parser) fields(es []entry, plain, disp string, known ...string) map[string]entry {
	return p.fieldsRec(es, disp, known, func(name string, line int) { p.f.lines[join(plain, name)] = line })
}

// fieldsRec is fields with the recording of lines left to record.
func (p *parser) fieldsRec(es []entry, disp string, known []string, record func(name string, line int)) map[string]entry {
	out := make(map[string]entry, len(es))
	for _, e := range es {
		found := false
		for _, k := range known {
			if e.name == k {
				found = true
				break
			}
		}
		if !found {
			p.errorf(e.line, join(disp, keyText(e.name)), "%s", unknownMsg(e.name, known))
			continue
		}
		out[e.name] = e
		record(e.name, e.line)
	}
	return out
}

func unknownMsg(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		d := distance(strings.ToLower(strings.ReplaceAll(k, "-", "_")), c)
		if d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field (did you mean %q?)", best)
	}
	return "unknown field (expected one of: " + strings.Join(known, ", ") + ")"
}

// distance is the Levenshtein distance, capped for long inputs.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// scalar returns the environment-expanded copy of the scalar n (already
// dereferenced), reporting reference problems under path.
func (p *parser) scalar(n *yaml.Node, path string) *yaml.Node {
	if p.refs == nil {
		return n // no references in the file: nothing to expand or cache
	}
	if c, ok := p.expanded[n]; ok {
		return c
	}
	v := p.refs.expand(n.Value, p.lookup, func(line int, msg string) { p.errorf(line, path, "%s", msg) })
	c := n
	if v != n.Value {
		cp := *n
		cp.Value = v
		if n.Style == 0 { // plain and untagged: resolve the type anew
			cp.Tag = ""
		}
		c = &cp
	}
	p.expanded[n] = c
	return c
}

// str reads a string. Null gives "". ok is false after an error.
func (p *parser) str(e entry, path string) (string, bool) {
	if isNull(e.val) {
		return "", true
	}
	d := deref(e.val)
	if d.Kind != yaml.ScalarNode {
		p.errorf(e.line, path, "must be a string, got %s", p.kindText(d))
		return "", false
	}
	if p.itemLines != nil {
		p.itemLines[path] = e.line
	}
	return p.scalar(d, path).Value, true
}

// dur reads a duration. Null gives 0.
func (p *parser) dur(e entry, path string) (Duration, bool) {
	if isNull(e.val) {
		return 0, true
	}
	d := deref(e.val)
	if d.Kind != yaml.ScalarNode {
		p.errorf(e.line, path, "must be a duration such as 15s, got %s", p.kindText(d))
		return 0, false
	}
	s := p.scalar(d, path)
	if s.ShortTag() == "!!null" { // such as ${GRACE:-}
		return 0, true
	}
	v, msg := parseDuration(s.Value)
	if msg != "" {
		p.errorf(e.line, path, "%s", msg)
		return 0, false
	}
	return Duration(v), true
}

// integer reads an integer in [lo, hi]. Null gives 0.
func (p *parser) integer(e entry, path string, lo, hi int64) (int64, bool) {
	if isNull(e.val) {
		return 0, true
	}
	d := deref(e.val)
	if d.Kind != yaml.ScalarNode {
		p.errorf(e.line, path, "must be an integer, got %s", p.kindText(d))
		return 0, false
	}
	s := p.scalar(d, path)
	if s.ShortTag() == "!!null" {
		return 0, true
	}
	var v int64
	if s.ShortTag() != "!!int" || decodeScalar(s, &v) != nil {
		p.errorf(e.line, path, "must be an integer, got %q", short(s.Value))
		return 0, false
	}
	if v < lo || v > hi {
		if v < 0 && lo == 0 {
			p.errorf(e.line, path, "must not be negative, got %d", v)
		} else {
			p.errorf(e.line, path, "must be between %d and %d, got %d", lo, hi, v)
		}
		return 0, false
	}
	return v, true
}

// boolean reads true or false. Null gives false.
func (p *parser) boolean(e entry, path string) (bool, bool) {
	if isNull(e.val) {
		return false, true
	}
	d := deref(e.val)
	if d.Kind != yaml.ScalarNode {
		p.errorf(e.line, path, "must be true or false, got %s", p.kindText(d))
		return false, false
	}
	s := p.scalar(d, path)
	if s.ShortTag() == "!!null" {
		return false, true
	}
	var v bool
	if s.ShortTag() != "!!bool" || decodeScalar(s, &v) != nil {
		p.errorf(e.line, path, "must be true or false, got %q", short(s.Value))
		return false, false
	}
	return v, true
}

// decodeScalar decodes a scalar node, never panicking.
func decodeScalar(n *yaml.Node, out any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("cannot decode")
		}
	}()
	return n.Decode(out)
}

// top walks the root mapping.
func (p *parser) top(root *yaml.Node) {
	m, ok := p.mapping(root, rootLine(root), "")
	if !ok {
		p.errs[len(p.errs)-1].Msg = "the top level must be a mapping with the keys backend, lease, http, role, worker, metrics and jobs"
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
		sec := p.fields(es, "", "", "jobs")
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
	sec := p.fields(es, "", "", "backend", "lease", "http", "role", "worker", "metrics", "jobs")
	prefix := p.backend(sec["backend"])
	ttl := p.lease(sec["lease"])
	p.http(sec["http"])
	p.role(sec["role"])
	p.worker(sec["worker"])
	p.jobs(sec["jobs"], prefix, ttl)
	p.metrics(sec["metrics"])
}

func rootLine(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// backend walks the backend section and returns the key prefix in effect.
func (p *parser) backend(e entry) string {
	if !e.ok() {
		return DefaultPrefix
	}
	m, ok := p.mapping(e.val, e.line, "backend")
	if m == nil || !ok {
		return DefaultPrefix
	}
	sec := p.fields(p.entries(m, "backend"), "backend", "backend", "redis", "file", "memory", "postgres")
	if x, ok := sec["postgres"]; ok && !isNull(x.val) {
		p.postgres(x)
	}
	if x, ok := sec["file"]; ok && !isNull(x.val) {
		fm, ok := p.mapping(x.val, x.line, "backend.file")
		if ok {
			p.f.Backend.File = &FileStore{}
			if fm != nil {
				f := p.fields(p.entries(fm, "backend.file"), "backend.file", "backend.file", "path")
				if pe, ok := f["path"]; ok {
					p.f.Backend.File.Path, _ = p.str(pe, "backend.file.path")
				}
			}
		}
	}
	if x, ok := sec["memory"]; ok && !isNull(x.val) {
		if fm, ok := p.mapping(x.val, x.line, "backend.memory"); ok {
			if fm != nil {
				p.fields(p.entries(fm, "backend.memory"), "backend.memory", "backend.memory")
			}
			p.f.Backend.Memory = true
		}
	}
	n := 0
	for _, k := range []string{"redis", "file", "memory", "postgres"} {
		if _, ok := sec[k]; ok {
			n++
		}
	}
	if n > 1 {
		p.errorf(e.line, "backend", "give one of redis, postgres, file and memory")
	}
	if r, ok := sec["redis"]; ok {
		return p.redis(r)
	}
	return DefaultPrefix
}

func (p *parser) redis(e entry) string {
	const path = "backend.redis"
	m, ok := p.mapping(e.val, e.line, path)
	if !ok {
		return DefaultPrefix
	}
	r := &Redis{}
	p.f.Backend.Redis = r
	var es []entry
	if m != nil {
		es = p.entries(m, path)
	}
	sec := p.fields(es, path, path, "url", "prefix", "username", "password", "clock_tolerance", "tls",
		"sentinel", "cluster", "durability", "replicas", "replication_timeout")
	strField := func(key string, dst *string) {
		if e, ok := sec[key]; ok {
			*dst, _ = p.str(e, path+"."+key)
		}
	}
	strField("url", &r.URL)
	strField("prefix", &r.Prefix)
	strField("username", &r.Username)
	strField("password", &r.Password)
	if r.Password != "" {
		p.secrets = append(p.secrets, r.Password)
	}
	if e, ok := sec["clock_tolerance"]; ok {
		if d, ok := p.dur(e, path+".clock_tolerance"); ok {
			if d < 0 {
				p.errorf(e.line, path+".clock_tolerance", "must not be negative, got %s", d)
			}
			r.ClockTolerance = d
		}
	}
	if r.Prefix == "" {
		r.Prefix = DefaultPrefix
	}
	if r.ClockTolerance == 0 {
		r.ClockTolerance = Duration(DefaultClockTolerance)
	}

	p.topology(sec, r)
	scheme := ""
	if ue, ok := sec["url"]; r.Sentinel != nil || r.Cluster != nil {
		if ok && r.URL != "" {
			p.errorf(ue.line, path+".url", "give one of url, sentinel and cluster")
		}
	} else if !ok || r.URL == "" {
		line := e.line
		if ok {
			line = ue.line
		}
		if !ok || isNull(ue.val) || deref(ue.val).Kind == yaml.ScalarNode {
			p.errorf(line, path+".url", "is required (for example redis://127.0.0.1:6379/0), or give sentinel or cluster")
		}
	} else {
		scheme = p.checkURL(r.URL, ue.line)
	}
	p.tls(sec["tls"], r, scheme)
	if r.Cluster != nil {
		// Every key onetick touches shares the prefix's hash tag.
		r.Prefix = otredis.HashTagged(r.Prefix)
	}
	return r.Prefix
}

// checkURL validates a Redis URL and returns its scheme ("" if invalid).
// No message it reports contains the URL's password.
func (p *parser) checkURL(raw string, line int) string {
	const field = "backend.redis.url"
	hasCreds := strings.Contains(raw, "@")
	if hasCreds {
		// Everything between :// and the last @ may be secret.
		rest := raw
		if _, r, ok := strings.Cut(raw, "://"); ok {
			rest = r
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			ui := rest[:at]
			if _, pw, ok := strings.Cut(ui, ":"); ok {
				p.secrets = append(p.secrets, pw)
				if dec, err := url.PathUnescape(pw); err == nil {
					p.secrets = append(p.secrets, dec)
				}
			} else {
				p.secrets = append(p.secrets, ui)
			}
		}
	}
	masked := strconv.Quote(short(redact.URL(raw)))
	// Parser messages quote parts of the URL, which may be parts of a
	// password (whose special characters were not escaped) or of a query
	// value: with either present, only the kind of problem is shown.
	sanitize := strings.ContainsAny(raw, "@?#")
	reason := func(err error) string {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "redis: "), "net/url: ")
		if sanitize && !strings.HasPrefix(msg, "unexpected option: ") { // that one lists only names
			if i := strings.IndexAny(msg, "\":"); i > 0 {
				msg = strings.TrimSpace(msg[:i])
			}
		}
		if hasCreds {
			msg += " (percent-encode special characters in the user name and password, or use the username and password fields)"
		}
		return msg
	}
	u, err := url.Parse(raw)
	if err != nil {
		p.errorf(line, field, "invalid URL %s: %s", masked, reason(err))
		return ""
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			p.secrets = append(p.secrets, pw)
		}
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		p.errorf(line, field, "invalid URL %s: must start with redis:// or rediss:// (TLS)", masked)
		return ""
	}
	if u.Opaque != "" || u.Host == "" {
		p.errorf(line, field, "invalid URL %s: no host (expected %s://host:port/db)", masked, u.Scheme)
		return ""
	}
	if _, err := goredis.ParseURL(raw); err != nil {
		p.errorf(line, field, "invalid URL %s: %s", masked, reason(err))
		return ""
	}
	return u.Scheme
}

// redact removes the secrets the file holds (passwords, the token) from
// the messages of the errors of the fields near them: the backend and the
// listener. (The jobs' messages never quote a secret's value.)
func (p *parser) redact() {
	for _, e := range p.errs {
		if !strings.HasPrefix(e.Field, "backend.") && !strings.HasPrefix(e.Field, "http") {
			continue
		}
		for _, s := range p.secrets {
			if s != "" {
				e.Msg = strings.ReplaceAll(e.Msg, s, "xxxxx")
			}
		}
	}
}

func (p *parser) tls(e entry, r *Redis, scheme string) {
	const path = "backend.redis.tls"
	var sec map[string]entry
	if e.ok() {
		m, ok := p.mapping(e.val, e.line, path)
		if !ok {
			return
		}
		var es []entry
		if m != nil {
			es = p.entries(m, path)
		}
		sec = p.fields(es, path, path, "enabled", "ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify")
	}
	t := &r.TLS
	for _, f := range []struct {
		key string
		dst *string
	}{{"ca_file", &t.CAFile}, {"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}, {"server_name", &t.ServerName}} {
		if e, ok := sec[f.key]; ok {
			*f.dst, _ = p.str(e, path+"."+f.key)
		}
	}
	enabledSet := false
	if e, ok := sec["enabled"]; ok && !isNull(e.val) {
		t.Enabled, enabledSet = p.boolean(e, path+".enabled")
	}
	if e, ok := sec["insecure_skip_verify"]; ok {
		t.InsecureSkipVerify, _ = p.boolean(e, path+".insecure_skip_verify")
	}
	switch scheme {
	case "rediss":
		if enabledSet && !t.Enabled {
			p.errorf(sec["enabled"].line, path+".enabled", "is false, but a rediss:// URL always uses TLS (use redis:// for plain connections)")
		}
		t.Enabled = true
	case "redis":
		if !t.Enabled {
			for _, f := range []struct {
				key string
				on  bool
			}{{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
				{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
				if f.on {
					p.errorf(sec[f.key].line, path+"."+f.key, "has no effect: TLS is off (set tls.enabled: true or use a rediss:// URL)")
				}
			}
		}
	}
	if t.CertFile != "" && t.KeyFile == "" {
		p.errorf(sec["cert_file"].line, path+".key_file", "is required with cert_file")
	}
	if t.KeyFile != "" && t.CertFile == "" {
		p.errorf(sec["key_file"].line, path+".cert_file", "is required with key_file")
	}
}

// lease walks the lease section and returns the effective ttl.
func (p *parser) lease(e entry) time.Duration {
	var lc onetick.LeaseConfig
	bad := false
	if e.ok() {
		m, ok := p.mapping(e.val, e.line, "lease")
		bad = !ok
		if m != nil {
			sec := p.fields(p.entries(m, "lease"), "lease", "lease", "ttl", "renew", "safety_margin")
			for _, f := range []struct {
				key string
				dst *time.Duration
			}{{"ttl", &lc.TTL}, {"renew", &lc.Renew}, {"safety_margin", &lc.SafetyMargin}} {
				if e, ok := sec[f.key]; ok {
					d, ok := p.dur(e, "lease."+f.key)
					*f.dst = time.Duration(d)
					bad = bad || !ok
				}
			}
		}
	}
	if !bad {
		if err := lc.Validate(); err != nil {
			var ce *onetick.ConfigError
			field, msg := "lease", err.Error()
			if errors.As(err, &ce) {
				field, msg = ce.Field, ce.Msg
			}
			line, ok := p.f.lines[field]
			if !ok {
				line = p.f.lines["lease"]
			}
			p.errorf(line, field, "%s", msg)
		}
	}
	d := lc.WithDefaults()
	p.f.Lease = Lease{TTL: Duration(d.TTL), Renew: Duration(d.Renew), SafetyMargin: Duration(d.SafetyMargin)}
	return d.TTL
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
			j.Stream = prefix + ":stream:" + j.Name
		}
		if j.Payload == "" {
			j.Payload = DefaultPayload
		}
	}
	p.errs = append(p.errs, p.f.checkSlots()...)
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
	return j, true
}

// label is a job's display path: jobs[i] (name).
func label(i int, name string) string {
	return "jobs[" + strconv.Itoa(i) + "] (" + name + ")"
}
