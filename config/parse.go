package config

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Reading a document: parseWith decodes the YAML (the job list apart when
// it can, see fastjobs.go), walks it from the top (File's walker, top, in
// config.go) and returns every problem sorted by line, with the file's
// secrets removed from the messages.

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
