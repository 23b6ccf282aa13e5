package config

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// payload converts a job's payload to compact JSON, keeping the order of
// mapping keys. Null (or an empty value) gives the default {}.
func (p *parser) payload(e entry, path string) (string, bool) {
	if isNull(e.val) {
		return "", true
	}
	w := &jsonWriter{p: p}
	if !w.value(e.val, e.line, path, 0) {
		return "", false
	}
	out := w.buf.String()
	if !json.Valid(w.buf.Bytes()) { // cannot happen; never hand on bad JSON
		p.errorf(e.line, path, "cannot be converted to JSON")
		return "", false
	}
	return out, true
}

type jsonWriter struct {
	p   *parser
	buf bytes.Buffer
}

// value writes n; line is where n is written (for an alias, the alias).
func (w *jsonWriter) value(n *yaml.Node, line int, path string, depth int) bool {
	p := w.p
	if !p.spend(1, line) {
		return false
	}
	if depth > maxDepth {
		p.errorf(line, path, "is nested more than %d levels deep", maxDepth)
		return false
	}
	if w.buf.Len() > MaxPayload {
		p.errorf(line, path, "is larger than %d bytes as JSON", MaxPayload)
		return false
	}
	if n.Kind == yaml.AliasNode {
		d := deref(n)
		if d == nil {
			p.errorf(line, path, "refers to an unknown anchor")
			return false
		}
		n = d
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return w.scalar(p.scalar(n, path), line, path)
	case yaml.SequenceNode, yaml.MappingNode:
		if p.active[n] > 0 {
			p.errorf(line, path, "contains itself (an alias refers to an enclosing node)")
			return false
		}
		p.active[n]++
		defer func() {
			if p.active[n]--; p.active[n] <= 0 {
				delete(p.active, n)
			}
		}()
	default:
		p.errorf(line, path, "cannot be converted to JSON")
		return false
	}
	if n.Kind == yaml.SequenceNode {
		w.buf.WriteByte('[')
		for i, it := range n.Content {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			if !w.value(it, it.Line, path+"["+strconv.Itoa(i)+"]", depth+1) {
				return false
			}
		}
		w.buf.WriteByte(']')
		return true
	}
	w.buf.WriteByte('{')
	for i, e := range p.entries(n, path) {
		// entries has rejected non-scalar keys; JSON keys must be strings.
		if k := e.key; k.ShortTag() != "!!str" {
			p.errorf(e.line, path, "key %q is a %s, not a string: JSON object keys must be strings (quote it)", short(e.name), tagName(k.ShortTag()))
			return false
		}
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.str(e.name)
		w.buf.WriteByte(':')
		if !w.value(e.val, valLine(e), join(path, keyText(e.name)), depth+1) {
			return false
		}
	}
	w.buf.WriteByte('}')
	return true
}

func valLine(e entry) int {
	if e.val.Line > 0 {
		return e.val.Line
	}
	return e.line
}

func tagName(t string) string {
	switch t {
	case "!!int":
		return "number"
	case "!!float":
		return "number"
	case "!!bool":
		return "boolean"
	case "!!null":
		return "null"
	}
	return t
}

func (w *jsonWriter) str(s string) {
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)               // strings always encode
	w.buf.Truncate(w.buf.Len() - 1) // the newline Encode adds
}

func (w *jsonWriter) scalar(n *yaml.Node, line int, path string) bool {
	p := w.p
	switch n.ShortTag() {
	case "!!null":
		w.buf.WriteString("null")
	case "!!bool":
		var b bool
		if decodeScalar(n, &b) != nil {
			p.errorf(line, path, "invalid boolean %q", short(n.Value))
			return false
		}
		w.buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		var v any
		if decodeScalar(n, &v) != nil {
			p.errorf(line, path, "invalid integer %q", short(n.Value))
			return false
		}
		b, err := json.Marshal(v)
		if err != nil {
			p.errorf(line, path, "integer %q cannot be represented in JSON", short(n.Value))
			return false
		}
		w.buf.Write(b)
	case "!!float":
		var f float64
		if decodeScalar(n, &f) != nil {
			p.errorf(line, path, "invalid number %q", short(n.Value))
			return false
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			p.errorf(line, path, "%s cannot be represented in JSON", short(n.Value))
			return false
		}
		b, _ := json.Marshal(f)
		w.buf.Write(b)
	default: // strings, timestamps, binary and custom tags: the text
		w.str(n.Value)
	}
	return true
}
