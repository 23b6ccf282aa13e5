package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redact"
	"github.com/onetick/onetick/internal/storekit"
)

// Options configure a Backend.
type Options struct {
	// Schema holds every table; default "onetick". Several independent
	// scheduler groups can share one database in different schemas. At
	// most 40 characters of [a-z0-9_], starting with a letter or "_".
	Schema string
	// ClockTolerance: a claim for a slot more than this far in the future
	// by the database's clock is refused as early. Default 100ms.
	ClockTolerance time.Duration
	// HistoryLen is how many leadership terms are kept. Default 100.
	HistoryLen int
	// EntryRetention: Prune deletes stream entries older than this (by
	// the time they were appended). 0 (the default) keeps them, as a
	// Redis stream without MaxLen does; a tick's MaxLen trims its stream
	// either way.
	EntryRetention time.Duration
	// Ledger bounds the run ledger (docs/ledger.md): records older than
	// MaxAge (default 7 days) by their slot and beyond the newest
	// MaxPerJob (default 1,000) of a job are dropped by claims and Prune;
	// Off keeps none.
	Ledger onetick.LedgerRetention
	// Logger receives the listener connection's losses and returns;
	// default: discarded.
	Logger *slog.Logger
	// RiverSchema is where River's tables are, for jobs relayed to River
	// (relay.go); default "": the connection's search_path, as River's.
	RiverSchema string
}

// Backend implements onetick.Backend on PostgreSQL.
type Backend struct {
	pool  *pgxpool.Pool
	owns  bool
	opts  Options
	ident string // the quoted schema name
	qs    sync.Map

	hub *hub

	riverMu     sync.Mutex
	riverClient *river.Client[pgx.Tx]

	// A shard's view (shard.go): its lease row, and the count that
	// decides which jobs its listings hold. The store itself is shard 0
	// of 1. root is the store a view was made from (nil on the store).
	shard, shards int
	root          *Backend
}

var _ onetick.Backend = (*Backend)(nil)

var schemaRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// New returns a Backend on an existing pool. Close does not close the
// pool. The schema must have been migrated (Migrate).
func New(pool *pgxpool.Pool, opts Options) (*Backend, error) {
	if opts.Schema == "" {
		opts.Schema = "onetick"
	}
	if !schemaRe.MatchString(opts.Schema) {
		return nil, fmt.Errorf("postgres: schema %q: want at most 40 characters of a-z, 0-9 and _, not starting with a digit", opts.Schema)
	}
	if opts.ClockTolerance == 0 {
		opts.ClockTolerance = 100 * time.Millisecond
	}
	if opts.HistoryLen <= 0 {
		opts.HistoryLen = 100
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Ledger = storekit.Retention(opts.Ledger)
	b := &Backend{pool: pool, opts: opts, ident: pgx.Identifier{opts.Schema}.Sanitize(), shards: 1}
	lc := pool.Config().ConnConfig // a copy
	params := make(map[string]string, len(lc.RuntimeParams)+1)
	for k, v := range lc.RuntimeParams {
		params[k] = v
	}
	params["application_name"] = ListenerName(opts.Schema)
	lc.RuntimeParams = params
	b.hub = newHub(lc, []string{b.channel(chanLease), b.channel(chanAppend), b.channel(chanReleased)},
		opts.Logger.With("schema", opts.Schema))
	return b, nil
}

// Open connects to the PostgreSQL at url (a postgres:// URL or a
// key=value connection string, as pgx accepts them, including pgxpool's
// pool_max_conns and friends) and returns a Backend that owns the pool.
// It does not migrate the schema (Migrate).
func Open(ctx context.Context, url string, opts Options) (*Backend, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: url %s: %w", redact.URL(url), errors.Unwrap(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", redact.URL(url), err)
	}
	b, err := New(pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	b.owns = true
	return b, nil
}

// ListenerName is the application_name of a Backend's LISTEN connection
// on schema, as pg_stat_activity shows it.
func ListenerName(schema string) string { return "onetick listener " + schema }

// Pool returns the connection pool.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// Schema returns the schema name.
func (b *Backend) Schema() string { return b.opts.Schema }

// Close stops the notification listener and closes the pool if the
// Backend opened it. A shard's view's Close does nothing.
func (b *Backend) Close() error {
	if b.root != nil {
		return nil
	}
	b.hub.close()
	if b.owns {
		b.pool.Close()
	}
	return nil
}

// Ping checks that the database answers.
func (b *Backend) Ping(ctx context.Context) error { return b.pool.Ping(ctx) }

// q returns query with {s} replaced by the quoted schema name.
func (b *Backend) q(query string) string {
	if v, ok := b.qs.Load(query); ok {
		return v.(string)
	}
	s := strings.ReplaceAll(query, "{s}", b.ident)
	b.qs.Store(query, s)
	return s
}

// table names a table as a DamageError does: "<schema>.<table>".
func (b *Backend) table(name string) string { return b.opts.Schema + "." + name }

// lockSQL takes a transaction-scoped advisory lock (two-key form): the
// first key is onetick's ("onet" in ASCII), the second a hash of the
// schema and the purpose (lockKey), so that schemas do not contend.
const lockSQL = `SELECT pg_advisory_xact_lock(1869505908, hashtext($1))`

func (b *Backend) lockKey(purpose string) string { return b.opts.Schema + ":" + purpose }

// Notification channels, per schema.
const (
	chanLease    = "lease"    // payload acquired / released
	chanAppend   = "append"   // entries were appended
	chanReleased = "released" // an overlap marker was released; payload: group
)

func (b *Backend) channel(name string) string { return b.opts.Schema + "." + name }

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// entryID formats a stream entry's id as "<ms>-<seq>", like a Redis
// stream id: the database's clock at append, and the entry's sequence.
func entryID(ms, id int64) string {
	return strconv.FormatInt(ms, 10) + "-" + strconv.FormatInt(id, 10)
}

// parseEntryID returns the sequence of an "<ms>-<seq>" id.
func parseEntryID(id string) (int64, bool) {
	_, seq, ok := strings.Cut(id, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	return n, err == nil && n > 0
}

// Time implements onetick.Claimer.
func (b *Backend) Time(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := b.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
	return t.UTC(), err
}

// short bounds a value quoted in a message.
func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// ReadStream returns the entries of a stream, oldest first (count <= 0:
// all of them).
func (b *Backend) ReadStream(ctx context.Context, stream string, count int64) ([]onetick.TickRecord, error) {
	limit := "ALL"
	if count > 0 {
		limit = strconv.FormatInt(count, 10)
	}
	rows, err := b.pool.Query(ctx, b.q(`SELECT id, ms, job, slot, tick, epoch, replica, payload, kind, version
		FROM {s}.entries WHERE stream = $1 ORDER BY id LIMIT `+limit), stream)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (onetick.TickRecord, error) {
		var id, ms, slot, epoch int64
		var t onetick.TickRecord
		err := r.Scan(&id, &ms, &t.Job, &slot, &t.Tick, &epoch, &t.Replica, &t.Payload, &t.Kind, &t.Version)
		t.ID, t.Slot, t.Epoch = entryID(ms, id), onetick.Slot(slot), onetick.Epoch(epoch)
		return t, err
	})
}
