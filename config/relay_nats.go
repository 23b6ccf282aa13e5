package config

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/onetick/onetick/internal/redact"
)

// NATSRelay publishes each tick to NATS JetStream from the job's stream
// (the worker's relay consumer, package relay/natsrelay): not atomic with
// the claim; see docs/relays.md "NATS JetStream".
//
// A job names a connection of the configuration file (relays.nats) and a
// subject; a job of the configuration file may instead give the address
// and credentials inline (url, token or creds, stream, per_subject). A job
// applied at run time (`jobs apply`, the HTTP API) must name a
// connection: its definition, kept in the store, never holds an address
// or a credential, and each worker looks the connection up in its own
// configuration file.
type NATSRelay struct {
	// Connection names a connection of relays.nats; exclusive with URL,
	// Token, Creds, Stream and PerSubject, which the connection gives.
	Connection string `yaml:"connection" json:",omitempty"`
	// URL is the NATS server URL, or several separated by commas
	// (nats://, tls://, ws://, wss://).
	URL string `yaml:"url" json:",omitempty"`
	// Subject is the subject the ticks are published to; with PerSubject
	// the prefix of <subject>.<job>.<slot ms>.
	Subject string `yaml:"subject" json:",omitempty"`
	// Stream, when set, is the JetStream stream each publish must land in.
	Stream string `yaml:"stream" json:",omitempty"`
	// PerSubject publishes each tick to its own subject, on a stream with
	// MaxMsgsPerSubject 1 and DiscardNewPerSubject.
	PerSubject bool `yaml:"per_subject" json:",omitempty"`
	// Token (secret; give it as ${ENV}) or Creds (a credentials file's
	// path) authenticate; at most one. The token is never stored.
	Token string `yaml:"token" json:"-"`
	Creds string `yaml:"creds" json:",omitempty"`
}

// Relays are the connections to other systems that the configuration
// file defines once, by name, for jobs to use (the relays section). Only
// the operator's file says where a relay connects and with which
// credentials: a job applied at run time names a connection.
type Relays struct {
	// NATS are the NATS JetStream connections (relays.nats.<name>).
	NATS map[string]*NATSConnection `yaml:"nats,omitempty"`
}

// NATSConnection is one named NATS JetStream connection (relays.nats.<name>).
type NATSConnection struct {
	// URL is the NATS server URL, or several separated by commas
	// (nats://, tls://, ws://, wss://); required.
	URL string `yaml:"url"`
	// Stream, when set, is the JetStream stream every publish through the
	// connection must land in: JetStream refuses a subject another stream
	// holds. A subject no stream holds still reaches its core NATS
	// subscribers (the publish then fails for want of an ack): what a job
	// applied at run time can publish to is bounded by the credentials'
	// NATS permissions, not by the stream.
	Stream string `yaml:"stream"`
	// PerSubject publishes each tick to its own subject (see NATSRelay).
	PerSubject bool `yaml:"per_subject"`
	// Token (secret; give it as ${ENV}) or Creds (a credentials file's
	// path) authenticate; at most one.
	Token string `yaml:"token" json:"-"`
	Creds string `yaml:"creds"`
	// Subjects are the NATS subject patterns (`*` one token, `>` the
	// rest) a job may publish to through the connection. A job applied at
	// run time is refused on a connection without them (an API user never
	// chooses where the operator's credentials publish); when set, every
	// job naming the connection must match one, in the file and at run
	// time, and each worker checks it again.
	Subjects []string `yaml:"subjects"`
}

// Allows reports whether the connection lets a job publish to subject
// (with per_subject, to the subjects <subject>.<job>.<slot>).
func (c *NATSConnection) Allows(subject string) bool {
	if c.PerSubject {
		subject += ".job.0"
	}
	for _, pat := range c.Subjects {
		if subjectMatches(pat, subject) {
			return true
		}
	}
	return false
}

// subjectMatches reports whether NATS subject pattern pat (`*` one token,
// `>` one or more trailing tokens) matches subject.
func subjectMatches(pat, subject string) bool {
	pt, st := strings.Split(pat, "."), strings.Split(subject, ".")
	for i, t := range pt {
		switch {
		case t == ">":
			return i == len(pt)-1 && len(st) > i
		case i >= len(st):
			return false
		case t != "*" && t != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

// validPattern reports whether pat is a subject pattern: tokens separated
// by dots, each a plain token, `*`, or `>` as the last.
func validPattern(pat string) bool {
	if strings.HasPrefix(pat, "$") {
		return false
	}
	ts := strings.Split(pat, ".")
	for i, t := range ts {
		if t == "*" || (t == ">" && i == len(ts)-1) {
			continue
		}
		if !natsToken.MatchString(t) {
			return false
		}
	}
	return true
}

var (
	natsRelayKeys = []string{"connection", "subject", "url", "stream", "per_subject", "token", "creds"}
	natsConnKeys  = []string{"url", "stream", "per_subject", "token", "creds", "subjects"}
	relaysKeys    = []string{"nats"}
	// natsByConnection are a job's relay.nats keys that a connection gives.
	natsByConnection = []string{"url", "stream", "per_subject", "token", "creds"}
	// natsToken is one subject token: no dots, wildcards or white space.
	natsToken = regexp.MustCompile(`^[^.*>\s]+$`)
	// natsStream is a JetStream stream name.
	natsStream = regexp.MustCompile(`^[^.*>\s/\\]+$`)
	// connName is a connection's name.
	connName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
)

// relays walks the relays section.
func (p *parser) relays(e entry) {
	if !e.ok() {
		return
	}
	m, ok := p.mapping(e.val, e.line, "relays")
	if m == nil || !ok {
		return
	}
	sec := p.fields(p.entries(m, "relays"), "relays", "relays", relaysKeys...)
	x, ok := sec["nats"]
	if !ok {
		return
	}
	nm, ok := p.mapping(x.val, x.line, "relays.nats")
	if nm == nil || !ok {
		return
	}
	for _, c := range p.entries(nm, "relays.nats") {
		path := "relays.nats." + keyText(c.name)
		if !connName.MatchString(c.name) {
			p.errorf(c.line, path, "is not a connection name (letters, digits, _ and -, starting with a letter or digit; at most 64)")
			continue
		}
		cm, ok := p.mapping(c.val, c.line, path)
		if !ok {
			continue
		}
		n := &NATSConnection{}
		cs := map[string]entry{}
		if cm != nil {
			cs = p.fields(p.entries(cm, path), path, path, natsConnKeys...)
		}
		for k, dst := range map[string]*string{"url": &n.URL, "stream": &n.Stream, "token": &n.Token, "creds": &n.Creds} {
			if y, ok := cs[k]; ok {
				*dst, _ = p.str(y, path+"."+k)
			}
		}
		if y, ok := cs["per_subject"]; ok {
			n.PerSubject, _ = p.boolean(y, path+".per_subject")
		}
		if y, ok := cs["subjects"]; ok {
			n.Subjects, _ = p.strList(y, path+".subjects")
			for i, pat := range n.Subjects {
				if !validPattern(pat) {
					p.errorf(y.line, fmt.Sprintf("%s.subjects[%d]", path, i), "%q is not a subject pattern (tokens separated by dots, * for one token, > for the rest at the end; not starting with $)", short(pat))
				}
			}
		}
		p.natsSecrets(n.URL, n.Token)
		at := func(key string) int {
			if y, ok := cs[key]; ok {
				return y.line
			}
			return c.line
		}
		if strings.TrimSpace(n.URL) == "" {
			p.errorf(c.line, path+".url", "is required (for example nats://127.0.0.1:4222)")
		}
		for _, msg := range natsURLProblems(n.URL) {
			p.errorf(at("url"), path+".url", "%s", msg)
		}
		if n.Stream != "" && !natsStream.MatchString(n.Stream) {
			p.errorf(at("stream"), path+".stream", "%q is not a JetStream stream name (no dots, wildcards, slashes or white space)", short(n.Stream))
		}
		if n.Token != "" && n.Creds != "" {
			p.errorf(at("creds"), path+".creds", "and token both authenticate: give one")
		}
		if p.f.Relays.NATS == nil {
			p.f.Relays.NATS = map[string]*NATSConnection{}
		}
		p.f.Relays.NATS[c.name] = n
	}
}

// natsSecrets records the secrets of a NATS address and token, so that no
// message near them quotes them.
func (p *parser) natsSecrets(urls, token string) {
	if token != "" {
		p.secrets = append(p.secrets, token)
	}
	for _, raw := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				p.secrets = append(p.secrets, pw)
			} else if u.User.Username() != "" {
				p.secrets = append(p.secrets, u.User.Username()) // a token
			}
		}
	}
}

// natsRelay reads a job's relay.nats block. A job applied at run time
// (p.base set) names a connection of the configuration file and nothing
// that says where or how to connect; a job of either kind that names a
// connection names one the configuration file defines.
func (p *parser) natsRelay(x entry, plain, path string) (*NATSRelay, bool) {
	m, ok := p.mapping(x.val, x.line, path)
	if !ok {
		return nil, false
	}
	n := &NATSRelay{}
	sec := map[string]entry{}
	if m != nil {
		sec = p.fields(p.entries(m, path), plain, path, natsRelayKeys...)
	}
	good := true
	if p.base != nil {
		for _, k := range natsByConnection {
			if y, ok := sec[k]; ok {
				p.errorf(y.line, path+"."+k, "is for jobs of the configuration file only: a job applied at run time names a connection the configuration file defines (relays.nats), which says where and how to connect")
				good = false
			}
		}
	}
	for k, dst := range map[string]*string{"connection": &n.Connection, "url": &n.URL, "subject": &n.Subject, "stream": &n.Stream, "token": &n.Token, "creds": &n.Creds} {
		if y, ok := sec[k]; ok {
			*dst, ok = p.str(y, path+"."+k)
			good = good && ok
		}
	}
	if y, ok := sec["per_subject"]; ok {
		n.PerSubject, ok = p.boolean(y, path+".per_subject")
		good = good && ok
	}
	p.natsSecrets(n.URL, n.Token)
	conns, where := p.f.Relays.NATS, "this file"
	if p.base != nil {
		conns, where = p.base.Relays.NATS, "the configuration file "+p.base.Path
	}
	switch y, named := sec["connection"]; {
	case named && n.Connection != "" && conns[n.Connection] == nil:
		p.errorf(y.line, path+".connection", "unknown connection %q: %s defines %s", short(n.Connection), where, connList(conns))
		good = false
	case p.base != nil && n.Connection == "":
		p.errorf(x.line, path+".connection", "is required: a job applied at run time names a connection the configuration file defines (%s defines %s)", where, connList(conns))
		good = false
	case named && n.Connection != "" && validSubject(n.Subject):
		c := conns[n.Connection]
		at := x.line
		if y, ok := sec["subject"]; ok {
			at = y.line
		}
		switch {
		case len(c.Subjects) == 0 && p.base != nil:
			p.errorf(at, path+".subject", "connection %q lists no subjects that jobs applied at run time may publish to (relays.nats.%s.subjects in %s)", short(n.Connection), keyText(n.Connection), where)
			good = false
		case len(c.Subjects) > 0 && !c.Allows(n.Subject):
			p.errorf(at, path+".subject", "%q is not among the subjects connection %q allows (%s)", short(n.Subject), short(n.Connection), strings.Join(c.Subjects, ", "))
			good = false
		}
	}
	return n, good
}

// connList names the connections of m, for a message.
func connList(m map[string]*NATSConnection) string {
	if len(m) == 0 {
		return "no relays.nats connection"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return "relays.nats " + strings.Join(names, ", ")
}

// checkNATSRelay checks a job's relay.nats; add reports at a key of it.
// No message contains the token or a URL's user information.
func checkNATSRelay(n *NATSRelay, line func(key string) int, add func(line int, key, format string, args ...any)) {
	if n.Connection != "" {
		for k, set := range map[string]bool{"url": n.URL != "", "stream": n.Stream != "", "per_subject": n.PerSubject, "token": n.Token != "", "creds": n.Creds != ""} {
			if set {
				add(line("nats."+k), "relay.nats."+k, "is the connection's (relays.nats.%s): give connection or %s, not both", keyText(n.Connection), k)
			}
		}
		if !connName.MatchString(n.Connection) {
			add(line("nats.connection"), "relay.nats.connection", "%q is not a connection name", short(n.Connection))
		}
	} else {
		if strings.TrimSpace(n.URL) == "" {
			add(line("nats"), "relay.nats.url", "is required, or connection (a connection of relays.nats; for example nats://127.0.0.1:4222)")
		}
		for _, msg := range natsURLProblems(n.URL) {
			add(line("nats.url"), "relay.nats.url", "%s", msg)
		}
		if n.Stream != "" && !natsStream.MatchString(n.Stream) {
			add(line("nats.stream"), "relay.nats.stream", "%q is not a JetStream stream name (no dots, wildcards, slashes or white space)", short(n.Stream))
		}
		if n.Token != "" && n.Creds != "" {
			add(line("nats.creds"), "relay.nats.creds", "and token both authenticate: give one")
		}
	}
	switch {
	case n.Subject == "":
		add(line("nats"), "relay.nats.subject", "is required (the subject, or with per_subject its prefix)")
	case !validSubject(n.Subject):
		add(line("nats.subject"), "relay.nats.subject", "%q is not a subject to publish to (tokens separated by dots; no wildcards * or >, no white space; not starting with $, NATS's own APIs)", short(n.Subject))
	}
}

// natsURLProblems checks a NATS address list; each message quotes an
// address masked.
func natsURLProblems(urls string) []string {
	var out []string
	for _, raw := range strings.Split(urls, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		masked := strconv.Quote(short(redact.URL(raw)))
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			out = append(out, masked+" is not a URL")
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			out = append(out, masked+": must start with nats://, tls://, ws:// or wss://")
		case u.Host == "":
			out = append(out, masked+": no host (expected nats://host:port)")
		}
	}
	return out
}

func validSubject(s string) bool {
	if strings.HasPrefix(s, "$") {
		return false // NATS's own APIs ($JS.API, $SYS, $KV, ...)
	}
	for _, t := range strings.Split(s, ".") {
		if !natsToken.MatchString(t) {
			return false
		}
	}
	return true
}

// NATSPublish returns where and how the relay consumer publishes the
// ticks of a job with relay n: n itself when it gives its address, else
// the address, credentials, stream and per_subject of the connection it
// names, which f must define, with n's subject. The error names the
// connection, never an address or a credential.
func (f *File) NATSPublish(n *NATSRelay) (NATSRelay, error) {
	if n.Connection == "" {
		return *n, nil
	}
	c := f.Relays.NATS[n.Connection]
	if c == nil {
		return NATSRelay{}, fmt.Errorf("unknown connection %q: %s defines %s", short(n.Connection), f.Path, connList(f.Relays.NATS))
	}
	if len(c.Subjects) > 0 && !c.Allows(n.Subject) {
		return NATSRelay{}, fmt.Errorf("subject %q is not among the subjects connection %q allows (%s)", short(n.Subject), short(n.Connection), strings.Join(c.Subjects, ", "))
	}
	return NATSRelay{Connection: n.Connection, URL: c.URL, Subject: n.Subject, Stream: c.Stream, PerSubject: c.PerSubject,
		Token: c.Token, Creds: c.Creds}, nil
}
