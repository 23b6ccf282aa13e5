package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The machinery every section's walker uses (each walker sits beside its
// section's type: backend.go, backend_redis.go, topology.go, postgres.go,
// lease.go, http.go, worker.go, metrics.go, jobs.go, run.go, payload.go):
// entries lists a mapping's keys with merge keys applied; fields checks
// them against the section's key list, suggesting a near one for an
// unknown key; str, dur, integer, boolean, strList and strMap read values.
// Each reports a problem as FILE:LINE: FIELD and goes on, so that every
// problem of a file is reported at once.

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

func (p *parser) errorf(line int, field, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: field, Msg: msg})
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

// strList reads a list of strings.
func (p *parser) strList(e entry, path string) ([]string, bool) {
	d := deref(e.val)
	if d == nil || isNull(e.val) {
		return nil, true
	}
	if d.Kind != yaml.SequenceNode {
		p.errorf(e.line, path, "must be a list of strings, got %s", p.kindText(d))
		return nil, false
	}
	if !p.spend(len(d.Content), e.line) {
		return nil, false
	}
	out := make([]string, 0, len(d.Content))
	for i, it := range d.Content {
		v, ok := p.str(entry{line: it.Line, val: it}, fmt.Sprintf("%s[%d]", path, i))
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// strMap reads a mapping of strings to strings.
func (p *parser) strMap(e entry, path string) (map[string]string, bool) {
	m, ok := p.mapping(e.val, e.line, path)
	if !ok || m == nil {
		return nil, ok
	}
	out := map[string]string{}
	for _, x := range p.entries(m, path) {
		v, ok := p.str(x, path+"."+x.name)
		if !ok {
			return nil, false
		}
		out[x.name] = v
	}
	return out, true
}

// redact removes the secrets the file holds (passwords, the token) from
// the messages of the errors of the fields near them: the backend and the
// listener, the deadlines' webhook, the relays' connections. (The jobs' messages never quote a
// secret's value.)
func (p *parser) redact() {
	for _, e := range p.errs {
		if !strings.HasPrefix(e.Field, "backend.") && !strings.HasPrefix(e.Field, "http") && !strings.HasPrefix(e.Field, "deadlines.") &&
			!strings.HasPrefix(e.Field, "relays.") {
			continue
		}
		for _, s := range p.secrets {
			if s != "" {
				e.Msg = strings.ReplaceAll(e.Msg, s, "xxxxx")
			}
		}
	}
}
