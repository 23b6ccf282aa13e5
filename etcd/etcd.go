package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("etcd: backend closed")

// ErrConflict: a transaction lost its compare to concurrent writers more
// times in a row than Backend retries; nothing of it was written.
var ErrConflict = errors.New("etcd: too many concurrent writers, transaction not applied")

// DefaultMaxTxnOps is etcd's default --max-txn-ops.
const DefaultMaxTxnOps = 128

// Config says how to reach etcd.
type Config struct {
	// Endpoints are the client URLs of the cluster's members.
	Endpoints []string
	// TLS, if set, is the client's TLS configuration (a CA to trust, a
	// client certificate for etcd's --client-cert-auth).
	TLS *tls.Config
	// Username and Password authenticate with etcd's RBAC, when set.
	Username, Password string
	// DialTimeout bounds the first connection; default 5s.
	DialTimeout time.Duration
}

// Options configure a Backend.
type Options struct {
	// Prefix is prepended to every key; default "onetick/". Several
	// scheduler groups share a cluster under different prefixes.
	Prefix string
	// Clock is the store's clock. etcd has no time of its own that a
	// client can read: this is the replica's own clock (see the package
	// comment, "The clock"). Default the real clock.
	Clock clockwork.Clock
	// ClockTolerance: a claim for a slot more than this far in the future
	// by the store's clock is refused as early. Default 100ms.
	ClockTolerance time.Duration
	// HistoryLen is how many leadership terms are kept. Default 100.
	HistoryLen int
	// MaxTxnOps is the server's --max-txn-ops (default 128, etcd's
	// default): a claim larger than one transaction is split.
	MaxTxnOps int
	// MaxTxnBytes bounds the bytes a claim's transaction carries; default
	// 1 MiB, under etcd's default --max-request-bytes (1.5 MiB).
	MaxTxnBytes int
	// Ledger bounds the run ledger; zero fields take
	// onetick.DefaultLedgerMaxAge and DefaultLedgerMaxPerJob.
	Ledger onetick.LedgerRetention
}

// Backend is the onetick store on etcd. It is safe for concurrent use.
type Backend struct {
	c      *clientv3.Client
	own    bool
	view   bool // a shard's view (shard.go): Close does nothing
	opts   Options
	p      string
	closed atomic.Bool

	mu     sync.Mutex
	recLse map[int64]recLease // record TTL (s) -> a lease records share
}

// recLease is an etcd lease that tick records with one retention share
// while it has at least that retention left.
type recLease struct {
	id      clientv3.LeaseID
	granted time.Time
}

var _ onetick.Backend = (*Backend)(nil)

// Open connects to etcd and returns a Backend that closes the connection
// with Close.
func Open(ctx context.Context, cfg Config, opts Options) (*Backend, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, TLS: cfg.TLS, Username: cfg.Username,
		Password: cfg.Password, DialTimeout: cfg.DialTimeout, Context: context.WithoutCancel(ctx), Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd: connect to %v: %w", cfg.Endpoints, err)
	}
	b := New(c, opts)
	b.own = true
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := c.Get(pctx, b.k("epoch")); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("etcd: reach %v: %w", cfg.Endpoints, err)
	}
	return b, nil
}

// New returns a Backend over a client the caller owns (Close leaves it
// open).
func New(c *clientv3.Client, opts Options) *Backend {
	if opts.Prefix == "" {
		opts.Prefix = "onetick/"
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.ClockTolerance == 0 {
		opts.ClockTolerance = 100 * time.Millisecond
	}
	if opts.HistoryLen <= 0 {
		opts.HistoryLen = 100
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = DefaultMaxTxnOps
	}
	if opts.MaxTxnBytes <= 0 {
		opts.MaxTxnBytes = 1 << 20
	}
	opts.Ledger = storekit.Retention(opts.Ledger)
	return &Backend{c: c, opts: opts, p: opts.Prefix, recLse: map[int64]recLease{}}
}

// Client returns the etcd client.
func (b *Backend) Client() *clientv3.Client { return b.c }

// Close implements onetick.Backend.
func (b *Backend) Close() error {
	if b.view {
		return nil
	}
	if b.closed.Swap(true) {
		return nil
	}
	if b.own {
		return b.c.Close()
	}
	return nil
}

func (b *Backend) check(ctx context.Context) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Keys. Names from users (jobs, streams, tick ids) are path-escaped so
// that "/" in a name never reaches into another key range.

func (b *Backend) k(name string) string           { return b.p + name }
func (b *Backend) leaseKey() string               { return b.p + "lease" }
func (b *Backend) termKey(e onetick.Epoch) string { return b.p + "terms/" + pad(int64(e)) }
func (b *Backend) lastKey(job string) string      { return b.p + "last/" + url.PathEscape(job) }
func (b *Backend) ctlKey(job string) string       { return b.p + "ctl/" + url.PathEscape(job) }
func (b *Backend) recKey(id string) string        { return b.p + "t/" + url.PathEscape(id) }
func (b *Backend) streamPrefix(s string) string   { return b.p + "s/" + url.PathEscape(s) + "/" }

func pad(n int64) string { return fmt.Sprintf("%020d", n) }

// Time implements onetick.Claimer: the replica's own clock, since etcd
// offers none (see the package comment), once a linearizable read has
// shown that etcd answers (a member with a quorum): /readyz and status
// call it to learn whether the store is reachable, and the engine does
// not call it on its hot path.
func (b *Backend) Time(ctx context.Context) (time.Time, error) {
	if err := b.check(ctx); err != nil {
		return time.Time{}, err
	}
	if _, err := b.c.Get(ctx, b.k("epoch"), clientv3.WithCountOnly()); err != nil {
		return time.Time{}, fmt.Errorf("etcd: unreachable: %w", err)
	}
	return b.opts.Clock.Now(), nil
}

// --- reads and compares ---

// snapshot is what one read transaction saw: the keys, at one revision.
type snapshot struct {
	rev int64
	kvs map[string]*mvccpb.KeyValue
}

func (s *snapshot) val(key string) (string, bool) {
	kv, ok := s.kvs[key]
	if !ok {
		return "", false
	}
	return string(kv.Value), true
}

// unchanged compares key's mod revision with what s saw (0: absent).
func (s *snapshot) unchanged(key string) clientv3.Cmp {
	var rev int64
	if kv, ok := s.kvs[key]; ok {
		rev = kv.ModRevision
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev)
}

// read reads keys (deduplicated by the caller or not) in read
// transactions of at most MaxTxnOps gets, all at the revision of the
// first.
func (b *Backend) read(ctx context.Context, keys []string) (*snapshot, error) {
	s := &snapshot{kvs: make(map[string]*mvccpb.KeyValue, len(keys))}
	for start := 0; start < len(keys) || start == 0; start += b.opts.MaxTxnOps {
		end := min(start+b.opts.MaxTxnOps, len(keys))
		ops := make([]clientv3.Op, 0, end-start)
		for _, k := range keys[start:end] {
			if s.rev != 0 {
				ops = append(ops, clientv3.OpGet(k, clientv3.WithRev(s.rev)))
			} else {
				ops = append(ops, clientv3.OpGet(k))
			}
		}
		resp, err := b.c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("etcd: read: %w", err)
		}
		if s.rev == 0 {
			s.rev = resp.Header.Revision
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				s.kvs[string(kv.Key)] = kv
			}
		}
		if len(keys) == 0 {
			break
		}
	}
	return s, nil
}

func parseInt(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

// backoff waits a little before retry attempt n of a transaction that
// lost a compare.
func backoff(ctx context.Context, n int) error {
	d := time.Duration(1+n*n) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempts bounds the retries of a transaction that lost a compare.
const attempts = 30

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

func versionOf(kvs []*mvccpb.KeyValue) int64 {
	if len(kvs) == 0 {
		return 0
	}
	v, _ := parseInt(string(kvs[0].Value))
	return v
}

// Prefix returns the backend's key prefix.
func (b *Backend) Prefix() string { return b.p }

func sortStrings(s []string) { sort.Strings(s) }
