package config

import (
	"bytes"

	"go.yaml.in/yaml/v3"
)

// A file of a million jobs is a million small mappings. Decoded whole,
// YAML's node tree holds about seven nodes per job (over a kilobyte per job
// at once) and takes most of the start-up. So the block list under the
// top-level key jobs is read here, one item at a time, into the same nodes
// the YAML decoder would give, and each item is walked and dropped before
// the next is read:
//
//   - an item whose lines are all "key: value" with a one-line value (a
//     plain scalar without indicators or comments, or a quoted one without
//     escapes), in ASCII, is built directly;
//   - any other item (nested payloads, run blocks, block scalars, comments
//     after values, non-ASCII text) is decoded by the YAML decoder alone,
//     from its own lines;
//   - anything this reader is not sure of (anchors or aliases anywhere in
//     the list, an item that does not decode on its own, a jobs key that
//     is not a plain block list) makes the whole file go through the
//     decoder as before, so the result and every message stay the same.

// jobsBlock is the block list of the top-level key jobs.
type jobsBlock struct {
	data      []byte // the block's lines
	firstLine int    // line number of data's first line
	keyLine   int    // line of "jobs:"
	indent    int    // indentation of the items' "- "
	// values holds one copy of each value other than a name (schedules,
	// streams, zones): a million jobs on one stream share its string.
	values map[string]string
}

// maxInterned bounds values.
const maxInterned = 1 << 12

// intern returns the held copy of v, or v.
func (b *jobsBlock) intern(v string) string {
	if s, ok := b.values[v]; ok {
		return s
	}
	if b.values == nil {
		b.values = map[string]string{}
	}
	if len(b.values) < maxInterned {
		b.values[v] = v
	}
	return v
}

// cutJobs finds the top-level "jobs:" key followed by a block list and
// returns data with the list's lines blanked (line numbers kept) and the
// list. ok is false when the file does not have that shape.
func cutJobs(data []byte) (rest []byte, b *jobsBlock, ok bool) {
	start := -1 // offset of "jobs:" at the start of a line
	line := 1
	for off := 0; off < len(data); {
		if bytes.HasPrefix(data[off:], []byte("jobs:")) {
			if start >= 0 {
				return nil, nil, false // twice: let the decoder report it
			}
			start = off
			b = &jobsBlock{keyLine: line}
		}
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break
		}
		off += nl + 1
		line++
	}
	if start < 0 {
		return nil, nil, false
	}
	// The key's line: "jobs:" and nothing else.
	eol := bytes.IndexByte(data[start:], '\n')
	if eol < 0 || len(bytes.TrimRight(data[start+5:start+eol], " ")) != 0 {
		return nil, nil, false
	}
	bstart := start + eol + 1
	// The block ends at the first line at column 0 that is not an item,
	// a comment or blank.
	bend := len(data)
	for off := bstart; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		end := len(data)
		if nl >= 0 {
			end = off + nl
		}
		l := data[off:end]
		if len(l) > 0 && l[0] != ' ' && l[0] != '#' && l[0] != '\r' && !(l[0] == '-' && (len(l) == 1 || l[1] == ' ')) {
			bend = off
			break
		}
		if nl < 0 {
			break
		}
		off = end + 1
	}
	b.data = data[bstart:bend]
	b.firstLine = b.keyLine + 1
	// The items' indentation, from the first line that is not blank or a
	// comment.
	b.indent = -1
	for l := range bytes.Lines(b.data) {
		t := bytes.TrimLeft(l, " ")
		if len(bytes.TrimSpace(t)) == 0 || t[0] == '#' {
			continue
		}
		if t[0] != '-' || (len(t) > 1 && t[1] != ' ' && t[1] != '\n') {
			return nil, nil, false
		}
		b.indent = len(l) - len(t)
		break
	}
	if b.indent < 0 {
		return nil, nil, false // no items: nothing to gain
	}
	rest = make([]byte, 0, len(data)-len(b.data)+bytes.Count(b.data, []byte("\n")))
	rest = append(rest, data[:bstart]...)
	for range bytes.Count(b.data, []byte("\n")) {
		rest = append(rest, '\n')
	}
	rest = append(rest, data[bend:]...)
	return rest, b, true
}

// items calls yield with each item of the list, as the decoder would
// give it, in order. It returns false (having possibly yielded some
// items) when an item cannot be read on its own: the caller then starts
// again with the whole file through the decoder.
func (b *jobsBlock) items(yield func(*yaml.Node) bool) (ok bool) {
	data := b.data
	line := b.firstLine
	// The current item: its first line's offset and number.
	var itemLines [][]byte
	itemStart := 0
	flush := func() bool {
		if itemLines == nil {
			return true
		}
		n, ok := b.simple(itemLines, itemStart)
		if !ok {
			if n, ok = b.decode(itemLines, itemStart); !ok {
				return false
			}
		}
		itemLines = nil
		return yield(n)
	}
	prefix := make([]byte, b.indent+2)
	for i := range b.indent {
		prefix[i] = ' '
	}
	prefix[b.indent] = '-'
	prefix[b.indent+1] = ' '
	for l := range bytes.Lines(data) {
		body := bytes.TrimSuffix(l, []byte("\n"))
		if bytes.HasPrefix(body, prefix) || (len(body) == b.indent+1 && body[b.indent] == '-' && isSpaces(body[:b.indent])) {
			if !flush() {
				return false
			}
			itemLines, itemStart = [][]byte{}, line
		}
		if itemLines == nil {
			// Before the first item: only blank lines and comments.
			if t := bytes.TrimLeft(body, " "); len(t) > 0 && t[0] != '#' || !printable(body) {
				return false
			}
		} else {
			itemLines = append(itemLines, body)
		}
		line++
	}
	return flush()
}

// count is about the number of items (exact for a list this reader takes):
// the lines that start with the items' "- ".
func (b *jobsBlock) count() int {
	prefix := append([]byte{'\n'}, bytes.Repeat([]byte(" "), b.indent)...)
	prefix = append(prefix, '-', ' ')
	return bytes.Count(b.data, prefix) + 1
}

// printable reports whether b is printable ASCII only.
func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

func isSpaces(b []byte) bool {
	for _, c := range b {
		if c != ' ' {
			return false
		}
	}
	return true
}

// simple builds the node of an item whose lines are all "key: value" with
// a one-line value this reader can type exactly; ok is false otherwise.
func (b *jobsBlock) simple(lines [][]byte, first int) (*yaml.Node, bool) {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: first, Column: b.indent + 3}
	m.Content = make([]*yaml.Node, 0, 2*len(lines))
	for i, l := range lines {
		if t := bytes.TrimLeft(l, " "); i > 0 && (len(t) == 0 || t[0] == '#') {
			if !printable(t) {
				return nil, false // the decoder checks the text of comments too
			}
			continue // blank lines and comments between keys
		}
		// Every line is at the item's key column: the first after "- ".
		if len(l) < b.indent+2 || !isSpaces(l[:b.indent]) {
			return nil, false
		}
		if i == 0 {
			l = l[b.indent+2:]
		} else {
			if l[b.indent] != ' ' || l[b.indent+1] != ' ' {
				return nil, false
			}
			l = l[b.indent+2:]
		}
		k, v, ok := keyValue(l)
		if !ok {
			return nil, false
		}
		line := first + i
		col := b.indent + 3
		kn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: line, Column: col}
		vcol := col + len(k) + 2
		for j := len(k) + 1; j < len(l) && l[j] == ' '; j++ {
			vcol = col + j + 1
		}
		v.Line, v.Column = line, vcol
		if k != "name" {
			v.Value = b.intern(v.Value)
		}
		m.Content = append(m.Content, kn, v)
	}
	if len(m.Content) == 0 {
		return nil, false
	}
	return m, true
}

// keyValue reads "key: value" where key is letters, digits and _, and the
// value a scalar on this line: plain (no indicator first, no " #", no
// ": ", not ending in ":"), or single or double quoted without escapes
// and followed by nothing but spaces. Only printable ASCII is accepted.
func keyValue(l []byte) (key string, val *yaml.Node, ok bool) {
	if !printable(l) {
		return "", nil, false
	}
	colon := bytes.IndexByte(l, ':')
	if colon <= 0 || colon+1 >= len(l) || l[colon+1] != ' ' {
		return "", nil, false
	}
	for _, c := range l[:colon] {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return "", nil, false
		}
	}
	v := bytes.Trim(l[colon+1:], " ")
	if len(v) == 0 {
		return "", nil, false
	}
	n := &yaml.Node{Kind: yaml.ScalarNode}
	switch v[0] {
	case '"', '\'':
		q := v[0]
		end := bytes.IndexByte(v[1:], q)
		if end < 0 || end+2 != len(v) || (q == '"' && bytes.IndexByte(v, '\\') >= 0) {
			return "", nil, false
		}
		n.Tag, n.Value = "!!str", string(v[1:end+1])
		if q == '"' {
			n.Style = yaml.DoubleQuotedStyle
		} else {
			n.Style = yaml.SingleQuotedStyle
		}
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '%', '@', '`':
		return "", nil, false
	default:
		if bytes.Contains(v, []byte(" #")) || bytes.Contains(v, []byte(": ")) || v[len(v)-1] == ':' {
			return "", nil, false
		}
		// Left untagged: ShortTag resolves it (int, bool, null, ...) as
		// the decoder does.
		n.Value = string(v)
	}
	return string(l[:colon]), n, true
}

// decode decodes one item on its own (its lines as written, so columns
// stay) and moves its lines to the file's. ok is false when the item does
// not decode alone or uses anchors or aliases, which may reach across
// items.
func (b *jobsBlock) decode(lines [][]byte, first int) (*yaml.Node, bool) {
	text := bytes.Join(lines, []byte("\n"))
	root, err := decodeYAML(text)
	if err != nil || root == nil || root.Kind != yaml.SequenceNode || len(root.Content) != 1 {
		return nil, false
	}
	item := root.Content[0]
	ok := true
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Anchor != "" || n.Kind == yaml.AliasNode {
			ok = false
			return
		}
		n.Line += first - 1
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(item)
	return item, ok
}
