package config

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/onetick/onetick/internal/redact"
)

// NATSRelay publishes each tick to NATS JetStream from the job's stream
// (the worker's relay consumer, package relay/natsrelay): not atomic with
// the claim; see docs/relays.md "NATS JetStream".
type NATSRelay struct {
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
	// path) authenticate; at most one. The token is never stored (a NATS
	// relay is for jobs of the configuration file only).
	Token string `yaml:"token" json:"-"`
	Creds string `yaml:"creds" json:",omitempty"`
}

var (
	natsRelayKeys = []string{"url", "subject", "stream", "per_subject", "token", "creds"}
	// natsToken is one subject token: no dots, wildcards or white space.
	natsToken = regexp.MustCompile(`^[^.*>\s]+$`)
	// natsStream is a JetStream stream name.
	natsStream = regexp.MustCompile(`^[^.*>\s/\\]+$`)
)

// natsRelay reads a job's relay.nats block.
func (p *parser) natsRelay(x entry, plain, path string) (*NATSRelay, bool) {
	if p.base != nil {
		// A job applied at run time: no worker would publish its ticks.
		p.errorf(x.line, path, "is for jobs of the configuration file only: a job applied at run time gets no relay consumer")
		return nil, false
	}
	m, ok := p.mapping(x.val, x.line, path)
	if !ok {
		return nil, false
	}
	n := &NATSRelay{}
	if m == nil {
		return n, true
	}
	sec := p.fields(p.entries(m, path), plain, path, natsRelayKeys...)
	good := true
	for k, dst := range map[string]*string{"url": &n.URL, "subject": &n.Subject, "stream": &n.Stream, "token": &n.Token, "creds": &n.Creds} {
		if y, ok := sec[k]; ok {
			*dst, ok = p.str(y, path+"."+k)
			good = good && ok
		}
	}
	if y, ok := sec["per_subject"]; ok {
		n.PerSubject, ok = p.boolean(y, path+".per_subject")
		good = good && ok
	}
	if n.Token != "" {
		p.secrets = append(p.secrets, n.Token)
	}
	for _, raw := range strings.Split(n.URL, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				p.secrets = append(p.secrets, pw)
			} else if u.User.Username() != "" {
				p.secrets = append(p.secrets, u.User.Username()) // a token
			}
		}
	}
	return n, good
}

// checkNATSRelay checks a job's relay.nats; add reports at a key of it.
// No message contains the token or a URL's user information.
func checkNATSRelay(n *NATSRelay, line func(key string) int, add func(line int, key, format string, args ...any)) {
	if strings.TrimSpace(n.URL) == "" {
		add(line("nats"), "relay.nats.url", "is required (for example nats://127.0.0.1:4222)")
	}
	for _, raw := range strings.Split(n.URL, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		masked := strconv.Quote(short(redact.URL(raw)))
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			add(line("nats.url"), "relay.nats.url", "%s is not a URL", masked)
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			add(line("nats.url"), "relay.nats.url", "%s: must start with nats://, tls://, ws:// or wss://", masked)
		case u.Host == "":
			add(line("nats.url"), "relay.nats.url", "%s: no host (expected nats://host:port)", masked)
		}
	}
	switch {
	case n.Subject == "":
		add(line("nats"), "relay.nats.subject", "is required (the subject, or with per_subject its prefix)")
	case !validSubject(n.Subject):
		add(line("nats.subject"), "relay.nats.subject", "%q is not a subject to publish to (tokens separated by dots; no wildcards * or >, no white space)", short(n.Subject))
	}
	if n.Stream != "" && !natsStream.MatchString(n.Stream) {
		add(line("nats.stream"), "relay.nats.stream", "%q is not a JetStream stream name (no dots, wildcards, slashes or white space)", short(n.Stream))
	}
	if n.Token != "" && n.Creds != "" {
		add(line("nats.creds"), "relay.nats.creds", "and token both authenticate: give one")
	}
}

func validSubject(s string) bool {
	for _, t := range strings.Split(s, ".") {
		if !natsToken.MatchString(t) {
			return false
		}
	}
	return true
}
