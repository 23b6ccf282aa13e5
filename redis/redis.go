// Package redis is the onetick backend on Redis (go-redis v9, Lua scripts).
//
// Keys, all under a configurable prefix (default "onetick") so several
// independent scheduler groups can share one Redis:
//
//	<prefix>:leader      the lease, "holder|epoch", with a PX expiry
//	<prefix>:epoch       the epoch counter (INCR on every acquisition)
//	<prefix>:terms       leadership history, newest first (JSON, capped)
//	<prefix>:last        hash: job -> last-fired slot (Unix ms)
//	<prefix>:ticks:<min> per-tick records of the slots in one minute (Unix
//	                     minutes): a hash, tick id -> claiming term, first
//	                     writer wins, expiring after the ticks' retention
//	<prefix>:released    pub/sub channel: a lease was released
//	<prefix>:paused, :control, :controls, :controls:version   the controls
//	<prefix>:jobs, :jobset:<set>, :jobs:version               run-time jobs
//	<prefix>:members     sorted set: live replicas, holder -> expiry (Unix
//	                     ms), for the balancer of shards (members.go)
//	<prefix>:ledger, :ledger:*                                the run ledger (ledger.go)
//	<prefix>:worker:<group>:...                               the workers
//	asynq:{<queue>}:t:<id>, asynq:{<queue>}:pending, asynq:queues
//	                     asynq's task, pending list and queues, written for
//	                     a job relayed to asynq (asynq.go, docs/relays.md)
//
// Streams use the key each job names. Every multi-key operation is one Lua
// script that declares every key it touches, so it is atomic on one Redis
// server (with or without replicas and Sentinel) and, when every key
// shares the prefix's hash tag ("{onetick}"), on one node of a Redis
// Cluster.
//
// What Redis does not give: a failover to a replica that had not yet
// received the lease or a claim (replication is asynchronous) can hand the
// lease to a second replica or forget a claimed tick; a restart without
// persistence forgets everything. See the README's guarantees table.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redact"
	"github.com/onetick/onetick/internal/storekit"
)

// Options configure a Backend.
type Options struct {
	// Prefix of every key; default "onetick".
	Prefix string
	// ClockTolerance: a claim for a slot more than this far in the future
	// by Redis's clock (TIME) is refused as early. Default 100ms.
	ClockTolerance time.Duration
	// HistoryLen is how many leadership terms are kept. Default 100.
	HistoryLen int
	// Durability is DurabilityAsync (default) or DurabilityReplicated.
	Durability string
	// Replicas is how many replicas must acknowledge a write in the
	// replicated mode (default 1); ReplicationTimeout bounds the wait
	// (default 100ms).
	Replicas           int
	ReplicationTimeout time.Duration
	// Ledger bounds the run ledger (ledger.go); zero fields take
	// onetick.DefaultLedgerMaxAge and DefaultLedgerMaxPerJob. Off keeps
	// none.
	Ledger onetick.LedgerRetention
}

// Backend implements onetick.Backend on one Redis server.
type Backend struct {
	c      goredis.UniversalClient
	db     int
	owns   bool
	view   bool // a shard's view (shard.go): Shard refuses
	opts   Options
	leader string
	epoch  string
	terms  string
	last   string
	chann  string
	// Controls: pause intervals and who paused (hashes by job), the
	// control log (list) and its version (integer).
	paused, control, log, version string
	// lg: the run ledger's keys (ledger.go).
	lg ledgerKeys
}

var _ onetick.Backend = (*Backend)(nil)

// New returns a Backend on an existing client. Close does not close the
// client.
func New(c goredis.UniversalClient, opts Options) *Backend {
	if opts.Prefix == "" {
		opts.Prefix = "onetick"
	}
	if opts.ClockTolerance == 0 {
		opts.ClockTolerance = 100 * time.Millisecond
	}
	if opts.HistoryLen == 0 {
		opts.HistoryLen = 100
	}
	if opts.Durability == "" {
		opts.Durability = DurabilityAsync
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.ReplicationTimeout == 0 {
		opts.ReplicationTimeout = defaultReplicationTimeout
	}
	opts.Ledger = storekit.Retention(opts.Ledger)
	db := 0
	if cl, ok := c.(*goredis.Client); ok {
		db = cl.Options().DB
	}
	p := opts.Prefix
	return &Backend{c: c, db: db, opts: opts,
		leader: p + ":leader", epoch: p + ":epoch", terms: p + ":terms",
		last: p + ":last", chann: p + ":released",
		paused: p + ":paused", control: p + ":control", log: p + ":controls", version: p + ":controls:version",
		lg: newLedgerKeys(p)}
}

// Open connects to the Redis at url (redis:// or rediss:// for TLS, with
// user, password and database as go-redis's ParseURL accepts them) and
// returns a Backend that owns the connection.
func Open(url string, opts Options) (*Backend, error) {
	o, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: url %s: %s", redact.URL(url), redact.Error(err))
	}
	b := New(goredis.NewClient(o), opts)
	b.owns = true
	return b, nil
}

// Client returns the underlying client.
func (b *Backend) Client() goredis.UniversalClient { return b.c }

// Prefix returns the key prefix.
func (b *Backend) Prefix() string { return b.opts.Prefix }

// Close closes the connection if the Backend opened it.
func (b *Backend) Close() error {
	if b.owns {
		return b.c.Close()
	}
	return nil
}

// Ping checks that Redis answers.
func (b *Backend) Ping(ctx context.Context) error { return b.c.Ping(ctx).Err() }

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// damageOf turns a script's {-1, key, reason, kind, value} answer into a
// *DamageError.
func (b *Backend) damageOf(v []any) *onetick.DamageError {
	return b.damageAt(v, 1, "")
}

// damageAt reads key, field (when withField), reason, kind and value from
// v starting at i.
func (b *Backend) damageAt(v []any, i int, field string) *onetick.DamageError {
	str := func(k int) string {
		if k < len(v) {
			s, _ := v[k].(string)
			return s
		}
		return ""
	}
	key := str(i)
	return &onetick.DamageError{Key: key, Field: field, Reason: str(i + 1), Kind: onetick.DamageKind(str(i + 2)),
		Value: str(i + 3), Repairable: b.owned(key)}
}

// noteOf turns a script's {key, reason} note into a *DamageError, or nil.
func (b *Backend) noteOf(x any) *onetick.DamageError {
	n, _ := x.([]any)
	if len(n) != 2 {
		return nil
	}
	key, _ := n[0].(string)
	reason, _ := n[1].(string)
	return &onetick.DamageError{Key: key, Reason: reason, Kind: onetick.DamageType, Repairable: b.owned(key)}
}

// owned reports whether key is one of onetick's own keys (not a stream).
func (b *Backend) owned(key string) bool {
	switch key {
	case b.leader, b.epoch, b.terms, b.last, b.paused, b.control, b.log, b.version,
		b.lg.log, b.lg.folded, b.lg.records, b.lg.spans:
		return true
	}
	return strings.HasPrefix(key, b.opts.Prefix+":ticks:") || strings.HasPrefix(key, b.opts.Prefix+":trigger:") ||
		strings.HasPrefix(key, b.lg.idx)
}

// Acquire implements onetick.Leaser.
func (b *Backend) Acquire(ctx context.Context, holder string, ttl time.Duration) (onetick.Grant, error) {
	cmd, rerr := b.write(ctx, acquireScript, []string{b.leader, b.epoch, b.terms},
		holder, ttl.Milliseconds(), b.opts.HistoryLen)
	v, err := cmd.Slice()
	if err != nil {
		return onetick.Grant{}, err
	}
	switch v[0].(int64) {
	case 1:
		g := onetick.Grant{
			Lease:     onetick.Lease{Holder: holder, Epoch: onetick.Epoch(v[1].(int64))},
			StoreTime: msTime(v[2].(int64)),
			Damage:    b.noteOf(v[3]),
		}
		if rerr != nil {
			// Not led on a lease the replicas may not have: give it back
			// (best effort) and let the caller retry.
			_ = b.Release(context.WithoutCancel(ctx), g.Lease)
			return onetick.Grant{}, rerr
		}
		return g, nil
	case -1:
		return onetick.Grant{}, b.damageOf(v)
	}
	l, err := onetick.ParseToken(v[1].(string))
	if err != nil {
		return onetick.Grant{}, &onetick.DamageError{Key: b.leader, Kind: onetick.DamageValue, Value: v[1].(string), Reason: err.Error(), Repairable: true}
	}
	pttl := time.Duration(max(v[2].(int64), 0)) * time.Millisecond
	return onetick.Grant{}, &onetick.HeldError{Leader: onetick.LeaderInfo{Lease: l, TTL: pttl, Held: true}}
}

// Renew implements onetick.Leaser.
func (b *Backend) Renew(ctx context.Context, l onetick.Lease, ttl time.Duration) (onetick.Grant, error) {
	cmd, rerr := b.write(ctx, renewScript, []string{b.leader, b.terms},
		l.Token(), ttl.Milliseconds(), int64(l.Epoch))
	v, err := cmd.Slice()
	if errors.Is(err, goredis.Nil) {
		return onetick.Grant{}, onetick.ErrLeaseLost
	}
	if err != nil {
		return onetick.Grant{}, err
	}
	if rerr != nil {
		// Extended on the primary, but not trusted: the caller's trust
		// deadline stays where the last replicated renewal put it.
		return onetick.Grant{}, rerr
	}
	return onetick.Grant{Lease: l, StoreTime: msTime(v[0].(int64)), Damage: b.noteOf(v[1])}, nil
}

// Release implements onetick.Leaser.
func (b *Backend) Release(ctx context.Context, l onetick.Lease) error {
	v, err := releaseScript.Run(ctx, b.c, []string{b.leader, b.terms},
		l.Token(), int64(l.Epoch), b.chann).Slice()
	if err != nil {
		return err
	}
	if v[0].(int64) != 1 {
		return onetick.ErrLeaseLost
	}
	return nil
}

// Leader implements onetick.Leaser. A lease key of another type, or a
// value that is not "holder|epoch", is a *DamageError.
func (b *Backend) Leader(ctx context.Context) (onetick.LeaderInfo, error) {
	v, err := leaderScript.Run(ctx, b.c, []string{b.leader}).Slice()
	if err != nil {
		return onetick.LeaderInfo{}, err
	}
	if n, ok := v[0].(int64); ok && n == -1 {
		return onetick.LeaderInfo{}, b.damageOf(v)
	}
	s, ok := v[0].(string)
	if !ok {
		return onetick.LeaderInfo{}, nil
	}
	l, err := onetick.ParseToken(s)
	if err != nil {
		return onetick.LeaderInfo{}, &onetick.DamageError{Key: b.leader, Kind: onetick.DamageValue, Value: s,
			Reason: fmt.Sprintf("value %q is not a lease (\"holder|epoch\")", short(s)), Repairable: true}
	}
	pttl := v[1].(int64)
	if pttl < 0 {
		return onetick.LeaderInfo{}, &onetick.DamageError{Key: b.leader, Kind: onetick.DamageNoExpiry, Value: s,
			Reason: fmt.Sprintf("lease %q has no expiry (onetick always sets one)", short(s)), Repairable: true}
	}
	return onetick.LeaderInfo{Lease: l, TTL: time.Duration(pttl) * time.Millisecond, Held: true}, nil
}

// short bounds a value quoted in a message.
func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// Watch implements onetick.Leaser: it subscribes to the release channel
// and to keyspace notifications of the lease key. The latter arrive only
// where Redis has notify-keyspace-events enabled for generic and expired
// events (for example "Kgx"); without them a standby still takes over at
// the lease's expiry instant, which it learns from PTTL.
func (b *Backend) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	ps := b.c.Subscribe(ctx, b.chann, "__keyspace@"+strconv.Itoa(b.db)+"__:"+b.leader)
	go func() {
		defer close(out)
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case msg, ok := <-ch:
				if !ok {
					return
				}
				if msg.Channel != b.chann && msg.Payload != "del" && msg.Payload != "expired" {
					continue
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// Claim implements onetick.Claimer.
func (b *Backend) Claim(ctx context.Context, l onetick.Lease, ticks []onetick.Tick) (onetick.ClaimResult, error) {
	// Even an empty claim runs the script: it is fenced like any other.
	var p packer
	p.b = make([]byte, 0, 128*len(ticks))
	p.array(11 * len(ticks))
	for _, t := range ticks {
		p.str(t.Job)
		p.uint(uint64(max(t.Slot, 0)))
		p.str(t.ID())
		p.str(t.Payload)
		p.uint(uint64(max(t.Retention.Milliseconds(), 1)))
		p.int(t.MaxLen)
		p.str(t.Stream)
		p.bool(t.OutOfOrder)
		p.str(t.Version)
		if b.ledgerOn() {
			p.ledgerText(t)
		} else {
			p.str("")
		}
		p.relay(t, "")
	}
	cmd, rerr := b.write(ctx, claimScript, b.claimKeys(ticks),
		l.Token(), b.opts.ClockTolerance.Milliseconds(), int64(l.Epoch), l.Holder, b.opts.Prefix+":ticks:", p.b, b.ledgerFlag())
	v, err := cmd.Slice()
	if err != nil {
		if strings.HasPrefix(err.Error(), "FENCED") {
			return onetick.ClaimResult{}, onetick.ErrFenced
		}
		return onetick.ClaimResult{}, err
	}
	if n, ok := v[0].(int64); ok && n == -1 {
		return onetick.ClaimResult{}, b.damageOf(v)
	}
	now, _ := v[0].(int64)
	outs, _ := v[1].(string)
	if len(outs) != len(ticks) {
		return onetick.ClaimResult{}, fmt.Errorf("redis: claim returned %d outcomes for %d ticks", len(outs), len(ticks))
	}
	if n, _ := v[4].(int64); n > int64(foldAfter) && rerr == nil {
		// A long log: fold a chunk of it here, so that it cannot grow
		// without bound when nothing else folds. A failure is the next
		// fold's to report.
		_, _ = b.foldChunk(ctx)
	}
	return b.result(now, outs, v[2], v[3], ticks), rerr
}

// claimKeys are the claim's keys: the five the script names, then every
// tick-record bucket and stream it touches, so that every key is declared
// (Redis Cluster, and stores that refuse undeclared keys).
func (b *Backend) claimKeys(ticks []onetick.Tick) []string {
	keys := []string{b.leader, b.last, b.terms, b.paused, b.lg.log}
	seen := make(map[string]bool, 8)
	var lastB int64 = -1
	for _, t := range ticks {
		if bk := int64(t.Slot) / 60000; bk != lastB {
			lastB = bk
			k := b.opts.Prefix + ":ticks:" + strconv.FormatInt(bk, 10)
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if t.Relay != nil && t.Relay.Kind == onetick.RelayAsynq {
			for _, k := range asynqRelayKeys(*t.Relay, t.ID()) {
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			continue
		}
		if !seen[t.Stream] {
			seen[t.Stream] = true
			keys = append(keys, t.Stream)
		}
	}
	return keys
}

// LastFired implements onetick.Claimer.
func (b *Backend) LastFired(ctx context.Context, jobs []string) (map[string]onetick.Slot, error) {
	out := make(map[string]onetick.Slot, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	v, err := b.c.HMGet(ctx, b.last, jobs...).Result()
	if err != nil {
		if isWrongType(err) {
			return nil, b.wrongType(ctx, b.last, "a hash")
		}
		return nil, err
	}
	var bad onetick.DamageErrors
	for i, x := range v {
		s, ok := x.(string)
		if !ok {
			continue
		}
		n, ok := parseSlot(s)
		if !ok {
			bad = append(bad, &onetick.DamageError{Key: b.last, Field: jobs[i], Job: jobs[i], Repairable: true,
				Kind: onetick.DamageValue, Value: s,
				Reason: fmt.Sprintf("last-fired slot %q is not an integer (Unix ms)", short(s))})
			continue
		}
		out[jobs[i]] = onetick.Slot(n)
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// parseSlot parses a last-fired slot as the claim script does: an integer
// of at most 16 characters.
func parseSlot(s string) (int64, bool) {
	if len(s) > 16 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func isWrongType(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") }

// wrongType describes key, which holds another type than want.
func (b *Backend) wrongType(ctx context.Context, key, want string) *onetick.DamageError {
	typ, err := b.c.Type(ctx, key).Result()
	if err != nil {
		typ = "value of another type"
	}
	return &onetick.DamageError{Key: key, Kind: onetick.DamageType, Reason: "holds a " + typ + ", not " + want, Repairable: b.owned(key)}
}

// Time implements onetick.Claimer.
func (b *Backend) Time(ctx context.Context) (time.Time, error) { return b.c.Time(ctx).Result() }

type termJSON struct {
	Epoch  *int64 `json:"epoch"`
	Holder string `json:"holder"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Reason string `json:"reason"`
}

// History implements onetick.Backend.
func (b *Backend) History(ctx context.Context, n int) ([]onetick.Term, error) {
	if n <= 0 {
		return nil, nil
	}
	raw, err := b.c.LRange(ctx, b.terms, 0, int64(n-1)).Result()
	if err != nil {
		if isWrongType(err) {
			return nil, b.wrongType(ctx, b.terms, "a list")
		}
		return nil, err
	}
	out := make([]onetick.Term, 0, len(raw))
	var bad onetick.DamageErrors
	for i, r := range raw {
		term, ok := parseTerm(r)
		if !ok {
			bad = append(bad, &onetick.DamageError{Key: b.terms, Field: strconv.Itoa(i), Repairable: true,
				Kind: onetick.DamageValue, Value: r,
				Reason: fmt.Sprintf("entry %q is not a term (JSON); skipped", short(r))})
			continue
		}
		out = append(out, term)
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// parseTerm decodes one history entry as the scripts do: a JSON object
// with a numeric epoch.
func parseTerm(r string) (onetick.Term, bool) {
	var t termJSON
	if err := jsonUnmarshal(r, &t); err != nil || t.Epoch == nil {
		return onetick.Term{}, false
	}
	term := onetick.Term{Epoch: onetick.Epoch(*t.Epoch), Holder: t.Holder, Start: msTime(t.Start), Reason: onetick.EndReason(t.Reason)}
	if t.End != 0 {
		term.End = msTime(t.End)
	}
	return term, true
}

// ReadStream returns the entries of a stream, oldest first (count <= 0:
// all of them).
func (b *Backend) ReadStream(ctx context.Context, key string, count int64) ([]onetick.TickRecord, error) {
	var msgs []goredis.XMessage
	var err error
	if count > 0 {
		msgs, err = b.c.XRangeN(ctx, key, "-", "+", count).Result()
	} else {
		msgs, err = b.c.XRange(ctx, key, "-", "+").Result()
	}
	if err != nil {
		return nil, err
	}
	out := make([]onetick.TickRecord, len(msgs))
	for i, m := range msgs {
		out[i] = recordOf(m)
	}
	return out, nil
}

func recordOf(m goredis.XMessage) onetick.TickRecord {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	slot, _ := strconv.ParseInt(str("slot"), 10, 64)
	epoch, _ := strconv.ParseInt(str("epoch"), 10, 64)
	return onetick.TickRecord{ID: m.ID, Job: str("job"), Slot: onetick.Slot(slot), Tick: str("tick"),
		Epoch: onetick.Epoch(epoch), Replica: str("replica"), Payload: str("payload"), Kind: str("kind"),
		Version: str("version")}
}
