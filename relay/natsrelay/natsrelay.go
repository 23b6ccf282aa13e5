// Package natsrelay publishes a job's ticks to NATS JetStream (issue 21,
// docs/relays.md "NATS JetStream").
//
// JetStream is another system, so the hand-off cannot be atomic with the
// claim. Instead the tick is claimed into the job's onetick stream as any
// tick (atomic, fenced, deduplicated), and a relay consumer, a worker
// handler built by Handler, publishes it with Nats-Msg-Id = the tick id.
// A duplicate ack counts as published. Only then does the handler return,
// and the worker finishes the entry in its store (the ledger's succeeded
// event says "published to jetstream …"). A consumer that dies between
// the publish and the finish leaves the entry to the store's takeover:
// for a job that prefers duplicate the new owner publishes again with the
// same Msg-Id, which JetStream deduplicates inside its duplicate window;
// for a job that prefers missed a taken-over entry is dropped and counted,
// not published again.
//
// With PerSubject the subject is <Subject>.<job>.<slot ms> on a stream
// with MaxMsgsPerSubject 1 and DiscardNewPerSubject, so JetStream refuses
// a second message for a tick at any age; the refusal counts as
// published.
package natsrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Config is one relayed job's publishing.
type Config struct {
	// URL is the NATS server URL(s), comma separated.
	URL string
	// Token or Creds (a credentials file's path) authenticate; at most one.
	Token, Creds string
	// Subject is the subject the ticks are published to; with PerSubject
	// the prefix of <Subject>.<job>.<slot ms>.
	Subject string
	// Stream, when set, is the JetStream stream the publish must land in
	// (Nats-Expected-Stream).
	Stream string
	// PerSubject publishes each tick to its own subject (see the package
	// documentation); the stream must have MaxMsgsPerSubject 1 and
	// DiscardNewPerSubject.
	PerSubject bool
	// Prefer is the job's preference: PreferDuplicate publishes a
	// taken-over entry again; anything else drops it.
	Prefer onetick.Prefer
	// Metrics counts publishes; nil counts nothing.
	Metrics *Metrics
	// JetStream, when set, is used instead of connecting to URL (tests).
	JetStream jetstream.JetStream
	// Conn, when set, is a connection shared with other publishers (a
	// named connection of the configuration file), used instead of URL,
	// Token and Creds; the publisher does not close it.
	Conn *Conn
}

// ConnConfig says where and how a Conn connects.
type ConnConfig struct {
	// URL is the NATS server URL(s), comma separated.
	URL string
	// Token or Creds (a credentials file's path) authenticate; at most one.
	Token, Creds string
}

// Conn is a connection to NATS JetStream that connects on first use and
// may be shared by the publishers of many jobs.
type Conn struct {
	cfg ConnConfig

	mu sync.Mutex
	nc *nats.Conn
	js jetstream.JetStream
}

// NewConn returns a connection to cfg; it connects on first use.
func NewConn(cfg ConnConfig) (*Conn, error) {
	if cfg.URL == "" {
		return nil, errors.New("natsrelay: url is required")
	}
	if cfg.Token != "" && cfg.Creds != "" {
		return nil, errors.New("natsrelay: token and creds are exclusive")
	}
	return &Conn{cfg: cfg}, nil
}

// JetStream returns the connection's JetStream context, connecting first
// if need be. The error never holds the URL (it may carry a password).
func (c *Conn) JetStream() (jetstream.JetStream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.js != nil {
		return c.js, nil
	}
	opts := []nats.Option{nats.Name("onetick relay"), nats.MaxReconnects(-1)}
	if c.cfg.Token != "" {
		opts = append(opts, nats.Token(c.cfg.Token))
	}
	if c.cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.cfg.Creds))
	}
	nc, err := nats.Connect(c.cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	return js, nil
}

// Close closes the connection, if it was opened; a later use connects
// again.
func (c *Conn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nil {
		c.nc.Close()
		c.nc, c.js = nil, nil
	}
}

// Message is the body of a published tick (JSON).
type Message struct {
	Job string `json:"job"`
	// Slot is the scheduled time, Unix ms (absent for a trigger).
	Slot int64 `json:"slot,omitempty"`
	// Tick is the tick id, also the Nats-Msg-Id header.
	Tick    string          `json:"tick"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Version string          `json:"version,omitempty"`
}

// Publisher is the relay consumer of one job: a worker.Handler.
type Publisher struct {
	cfg  Config
	conn *Conn // nil with cfg.JetStream
	own  bool  // conn is the publisher's own, closed by Close
}

// New returns the relay consumer of cfg; it connects on first use.
func New(cfg Config) (*Publisher, error) {
	if cfg.Subject == "" {
		return nil, errors.New("natsrelay: subject is required")
	}
	if strings.HasPrefix(cfg.Subject, "$") {
		// $JS.API, $SYS, $KV ...: a publish there drives NATS's own APIs.
		return nil, errors.New("natsrelay: a subject starting with $ is NATS's own (its APIs), not a tick's")
	}
	p := &Publisher{cfg: cfg, conn: cfg.Conn}
	if cfg.JetStream == nil && cfg.Conn == nil {
		c, err := NewConn(ConnConfig{URL: cfg.URL, Token: cfg.Token, Creds: cfg.Creds})
		if err != nil {
			return nil, err
		}
		p.conn, p.own = c, true
	}
	return p, nil
}

// Close closes the connection New's publisher opened, if any (not a
// shared Conn).
func (p *Publisher) Close() {
	if p.own {
		p.conn.Close()
	}
}

func (p *Publisher) jetStream() (jetstream.JetStream, error) {
	if p.cfg.JetStream != nil {
		return p.cfg.JetStream, nil
	}
	return p.conn.JetStream()
}

// SubjectOf is the subject tick t is published to.
func (p *Publisher) SubjectOf(t *worker.Task) string {
	if !p.cfg.PerSubject {
		return p.cfg.Subject
	}
	last := strconv.FormatInt(int64(t.Slot), 10)
	if rest, ok := strings.CutPrefix(t.Tick, t.Job+":"); ok && rest != last {
		last = rest // a trigger: "trigger:<key>"
	}
	return p.cfg.Subject + "." + token(t.Job) + "." + token(last)
}

// token makes s one subject token: no dots, wildcards or white space.
func token(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '.' || r == '*' || r == '>' || r <= ' ' || r == 0x7f:
			return '_'
		}
		return r
	}, s)
}

// Work publishes t (worker.Handler).
func (p *Publisher) Work(ctx context.Context, t *worker.Task) error {
	m := p.cfg.Metrics
	if t.Deliveries > 1 && p.cfg.Prefer != onetick.PreferDuplicate {
		// Taken over from a consumer that may have published it already:
		// a job that prefers missed drops it rather than risk a second
		// message beyond the duplicate window.
		m.inc(dropped)
		worker.Missed(ctx, worker.ReasonTakeover)
		worker.Report(ctx, onetick.Result{Output: fmt.Sprintf("not published again: taken over (delivery %d) and the job prefers missed", t.Deliveries)})
		return nil
	}
	js, err := p.jetStream()
	if err != nil {
		m.inc(failed)
		return err
	}
	body, err := json.Marshal(Message{Job: t.Job, Slot: slotOf(t), Tick: t.Tick, Payload: t.Payload, Version: t.Version})
	if err != nil {
		return fmt.Errorf("%w (%w)", err, worker.ErrSkipRetry)
	}
	msg := nats.NewMsg(p.SubjectOf(t))
	msg.Data = body
	msg.Header.Set("Onetick-Job", t.Job)
	msg.Header.Set("Onetick-Tick", t.Tick)
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(t.Tick)}
	if p.cfg.Stream != "" {
		opts = append(opts, jetstream.WithExpectStream(p.cfg.Stream))
	}
	ack, err := js.PublishMsg(ctx, msg, opts...)
	switch {
	case err != nil && p.cfg.PerSubject && PerSubjectRefusal(err):
		m.inc(duplicate)
		worker.Report(ctx, onetick.Result{Output: "already in jetstream: its subject " + msg.Subject + " holds a message (per subject)"})
		return nil
	case err != nil:
		m.inc(failed)
		return fmt.Errorf("publishing %s to jetstream: %w", t.Tick, err)
	case ack.Duplicate:
		m.inc(duplicate)
		worker.Report(ctx, onetick.Result{Output: fmt.Sprintf("already in jetstream: stream %s, seq %d (duplicate ack)", ack.Stream, ack.Sequence)})
	default:
		m.inc(published)
		worker.Report(ctx, onetick.Result{Output: fmt.Sprintf("published to jetstream: stream %s, seq %d", ack.Stream, ack.Sequence)})
	}
	return nil
}

// slotOf is t's slot in Unix ms, 0 for a trigger.
func slotOf(t *worker.Task) int64 {
	s := int64(t.Slot)
	if t.Tick != t.Job+":"+strconv.FormatInt(s, 10) {
		return 0
	}
	return s
}

// PerSubjectRefusal reports whether err is JetStream refusing a message
// because its subject already holds MaxMsgsPerSubject messages on a stream
// that discards new per subject.
func PerSubjectRefusal(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && strings.Contains(api.Description, "maximum messages per subject exceeded")
}
