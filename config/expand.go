package config

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// Environment references are expanded in two steps, so that a variable's
// content can never change the structure of the file (a password may
// contain "#", ": " or start with "*") while ${VAR} may still be written
// anywhere a plain value can, even inside {...} and [...]:
//
//  1. Before parsing, markRefs replaces every ${...} (and $${) in the text
//     with a token that YAML reads as plain text and that appears nowhere
//     else in the file, recording the reference and its line.
//  2. While walking the parsed document, each value is expanded by
//     replacing the tokens in it; an unquoted value is then typed anew, so
//     max_len: ${N} reads a number.

// envRef is one reference found in the text.
type envRef struct {
	line    int
	text    string // as written
	name    string
	def     string
	hasDef  bool
	literal bool   // $${, which stands for a literal ${
	problem string // a malformed reference
}

type envRefs struct {
	refs []envRef
	re   *regexp.Regexp // matches a token; group 1 is the index
}

// markRefs replaces the references in data with tokens. It returns data
// itself (and nil) when there are none.
func markRefs(data []byte) ([]byte, *envRefs) {
	if !bytes.Contains(data, []byte("${")) {
		return data, nil
	}
	prefix := "zONETICKENV"
	for bytes.Contains(data, []byte(prefix)) {
		prefix += "Q"
	}
	r := &envRefs{re: regexp.MustCompile(regexp.QuoteMeta(prefix) + `(\d+)z`)}
	var out bytes.Buffer
	out.Grow(len(data))
	line := 1
	add := func(ref envRef) {
		out.WriteString(prefix)
		out.WriteString(strconv.Itoa(len(r.refs)))
		out.WriteByte('z')
		r.refs = append(r.refs, ref)
	}
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n':
			line++
		case c == '$' && bytes.HasPrefix(data[i:], []byte("$${")):
			add(envRef{line: line, text: "$${", literal: true})
			i += 3
			continue
		case c == '$' && bytes.HasPrefix(data[i:], []byte("${")):
			rest := data[i+2:]
			if nl := bytes.IndexByte(rest, '\n'); nl >= 0 {
				rest = rest[:nl]
			}
			end := bytes.IndexByte(rest, '}')
			if end < 0 {
				add(envRef{line: line, text: "${", problem: "unterminated ${ (write $${ for a literal ${)"})
				i += 2
				continue
			}
			body := string(rest[:end])
			ref := envRef{line: line, text: "${" + body + "}"}
			ref.name, ref.def, ref.hasDef = strings.Cut(body, ":-")
			if !validVarName(ref.name) {
				ref.problem = "invalid variable reference ${" + short(body) + "}: write ${NAME} or ${NAME:-default} (and $${ for a literal ${)"
			}
			add(ref)
			i += 3 + end
			continue
		}
		out.WriteByte(c)
		i++
	}
	return out.Bytes(), r
}

// expand replaces the tokens in s, calling report for each problem (with
// the line of the reference). It returns s unchanged when it holds none.
// A nil lookup reads no environment: every reference is a problem.
func (r *envRefs) expand(s string, lookup func(string) (string, bool), report func(line int, msg string)) string {
	if r == nil {
		return s
	}
	locs := r.re.FindAllStringSubmatchIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		b.WriteString(s[last:loc[0]])
		last = loc[1]
		i, err := strconv.Atoi(s[loc[2]:loc[3]])
		if err != nil || i < 0 || i >= len(r.refs) { // cannot happen: the prefix is unique
			b.WriteString(s[loc[0]:loc[1]])
			continue
		}
		ref := r.refs[i]
		switch {
		case ref.literal:
			b.WriteString("${")
		case ref.problem != "":
			report(ref.line, ref.problem)
			b.WriteString(ref.text)
		case lookup == nil:
			report(ref.line, "${"+ref.name+"}: no environment variable is read here (write the value itself, or $${ for a literal ${)")
			b.WriteString(ref.text)
		default:
			v, set := lookup(ref.name)
			switch {
			case ref.hasDef && v == "":
				v = ref.def
			case !set:
				report(ref.line, "environment variable "+ref.name+" is not set (use ${"+ref.name+":-default} to give a default)")
			}
			b.WriteString(v)
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

// restore puts the references back as written, for messages.
func (r *envRefs) restore(s string) string {
	if r == nil {
		return s
	}
	return r.re.ReplaceAllStringFunc(s, func(tok string) string {
		m := r.re.FindStringSubmatch(tok)
		i, err := strconv.Atoi(m[1])
		if err != nil || i < 0 || i >= len(r.refs) {
			return tok
		}
		return r.refs[i].text
	})
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
