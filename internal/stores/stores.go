// Package stores is the one place that learns which store a configuration
// names and opens it: Open reads the backend section of a config.File and
// returns a Handle with the onetick.Backend, the worker store, a
// description for logs, status and /readyz, the store's upkeep, the sink
// of the embedded stores, and Close. Migrate and Embedded are the
// maintenance and the choice of embedded store that the CLI needs before
// or instead of a Handle.
//
// Adding a store is one case in Open (and in Migrate when it keeps a
// schema); the rest of the program uses the Handle.
package stores

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/worker"
)

// Kind names a store.
type Kind string

// The kinds of store.
const (
	Redis    Kind = "redis"
	Postgres Kind = "postgres"
	Etcd     Kind = "etcd"
	File     Kind = "file"
	Memory   Kind = "memory"
)

// SchemaMode says what Open does with a store's schema (PostgreSQL; the
// file store migrates itself when opened, Redis keeps none).
type SchemaMode int

const (
	// CheckSchema refuses a schema that is not at this onetick's version,
	// so that an operator's command never migrates under a running fleet.
	CheckSchema SchemaMode = iota
	// MigrateSchema brings the schema to this onetick's version (`run`,
	// `migrate`); safe when replicas start together.
	MigrateSchema
)

// Options say what the configuration does not: which embedded store (see
// Embedded) and how to treat the schema.
type Options struct {
	// Path is the file store's state file, for a configuration without a
	// shared store (Redis or PostgreSQL).
	Path string
	// Memory chooses the in-process store instead of the file store.
	Memory bool
	// Schema is what Open does with a PostgreSQL schema.
	Schema SchemaMode
	// Logger receives the store's notices (a file that others can read,
	// failed upkeep). Default: discard.
	Logger *slog.Logger
	// Stdout is where the embedded stores' sink writes ticks, one JSON
	// line each; nil: no sink.
	Stdout io.Writer

	// ledger is the configuration's ledger section (set by Open).
	ledger onetick.LedgerRetention
}

// InvalidError is a configuration that cannot open a store as it is
// written (a URL the client refuses, --data with the in-process store):
// bad input, where other errors of Open are a store that does not answer.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *InvalidError) Unwrap() error { return e.Err }

func invalid(err error) error { return &InvalidError{Err: err} }

// WorkStore is a store's worker store: the worker's half and the
// inspection the CLI uses (dead letters, last runs).
type WorkStore interface {
	worker.Store
	worker.Inspector
}

// Description names the store without credentials.
type Description struct {
	Kind Kind `json:"kind"`
	// Address is the masked URL or the Sentinel or Cluster addresses of a
	// shared store ("" for an embedded one).
	Address string `json:"address,omitempty"`
	// Schema is the PostgreSQL schema, Prefix the Redis or etcd key prefix, Path
	// the file store's file.
	Schema string `json:"schema,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Path   string `json:"path,omitempty"`
}

// Handle is an open store. Close it, not its Backend: it closes the
// clients Open built.
type Handle struct {
	backend onetick.Backend
	desc    Description
	work    func(group string) WorkStore
	// viewWork is the worker store of a shard's view (the store's own
	// Backend type); nil on a store that does not shard.
	viewWork func(view onetick.Backend, group string) (WorkStore, error)
	describe func(ctx context.Context) string
	announce func(ctx context.Context, log *slog.Logger)
	upkeep   func(ctx context.Context)
	sink     onetick.Sink
	close    func() error
	// ledgerOff: the configuration keeps no ledger (ledger.off).
	ledgerOff bool
	// shards is the configuration's shard count (1: the store itself).
	shards int
}

// Open opens the store f names (the embedded one of o without a shared
// store) and checks that it answers. Errors name the store's masked
// address; an *InvalidError is a configuration that cannot work.
func Open(ctx context.Context, f *config.File, o Options) (*Handle, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.ledger = f.Ledger.Retention()
	h, err := open(ctx, f, o)
	if h != nil {
		h.ledgerOff = o.ledger.Off
		h.shards = max(f.Shards, 1)
		if _, ok := h.backend.(onetick.Sharder); h.shards > 1 && !ok {
			_ = h.Close()
			return nil, invalid(fmt.Errorf("%s: shards: %d shards need a store that shards; the %s store does not (give 1, the default)", f.Path, h.shards, h.desc.Kind))
		}
		if _, ok := h.backend.(onetick.Members); h.shards > 1 && !ok {
			_ = h.Close()
			return nil, invalid(fmt.Errorf("%s: shards: %d shards need the fleet's membership (which replicas are live) on the store; the %s store keeps none yet (give 1, the default)", f.Path, h.shards, h.desc.Kind))
		}
	}
	return h, err
}

// open opens the store f names.
func open(ctx context.Context, f *config.File, o Options) (*Handle, error) {
	switch {
	case f.Backend.Postgres != nil:
		return openPostgres(ctx, f, o)
	case f.Backend.Redis != nil:
		return openRedis(ctx, f, o)
	case f.Backend.Etcd != nil:
		return openEtcd(ctx, f, o)
	case o.Memory:
		return openMemory(o), nil
	case o.Path != "":
		return openFile(o)
	}
	return nil, invalid(fmt.Errorf("%s: no store: give the file store's path or choose the in-process store", f.Path))
}

// Backend is the store as the scheduler, the controls and the status use
// it.
func (h *Handle) Backend() onetick.Backend { return h.backend }

// Kind names the store.
func (h *Handle) Kind() Kind { return h.desc.Kind }

// Description names the store without credentials.
func (h *Handle) Description() Description { return h.desc }

// WorkStore returns the worker store of group, or an error when the store
// keeps none.
func (h *Handle) WorkStore(group string) (WorkStore, error) {
	if h.work == nil {
		return nil, fmt.Errorf("the %s store has no worker store", h.desc.Kind)
	}
	return h.work(group), nil
}

// ShardWorkStore returns the worker store of group over shard n's view:
// where the workers of the jobs ShardOf puts in shard n read their
// default streams and keep their state. With one shard it is WorkStore.
func (h *Handle) ShardWorkStore(n int, group string) (WorkStore, error) {
	if h.Shards() == 1 && n == 0 {
		return h.WorkStore(group)
	}
	if h.viewWork == nil {
		return nil, fmt.Errorf("the %s store keeps no worker store per shard", h.desc.Kind)
	}
	v, err := h.View(n)
	if err != nil {
		return nil, err
	}
	return h.viewWork(v, group)
}

// JobLedger is the run ledger of the shard that holds job: the store's
// with one shard (Ledger).
func (h *Handle) JobLedger(job string) (onetick.Ledger, error) {
	return h.ViewLedger(onetick.ShardOf(job, h.Shards()))
}

// ViewLedger is the run ledger of shard n's view: the store's with one
// shard (Ledger).
func (h *Handle) ViewLedger(n int) (onetick.Ledger, error) {
	lg, err := h.Ledger()
	if err != nil || h.Shards() == 1 {
		return lg, err
	}
	v, err := h.View(n)
	if err != nil {
		return nil, err
	}
	if lg, ok := v.(onetick.Ledger); ok {
		return lg, nil
	}
	return nil, fmt.Errorf("the %s store's shard %d keeps no run ledger", h.desc.Kind, n)
}

// viewWorkStore makes the worker store of a view whose type is the
// store's own, B, with its WorkerStore method.
func viewWorkStore[B interface {
	onetick.Backend
	WorkerStore(string) W
}, W WorkStore](kind Kind) func(onetick.Backend, string) (WorkStore, error) {
	return func(v onetick.Backend, group string) (WorkStore, error) {
		b, ok := v.(B)
		if !ok {
			return nil, fmt.Errorf("the %s store's shard view is a %T, not the store's own type: it keeps no worker store", kind, v)
		}
		return b.WorkerStore(group), nil
	}
}

// Ledger is the store's run ledger (docs/ledger.md), or an error naming
// the store when it keeps none yet.
func (h *Handle) Ledger() (onetick.Ledger, error) {
	if h.ledgerOff {
		return nil, onetick.ErrLedgerOff
	}
	if lg, ok := h.Backend().(onetick.Ledger); ok {
		return lg, nil
	}
	return nil, fmt.Errorf("the %s store keeps no run ledger yet (see docs/ledger.md for the stores that do)", h.desc.Kind)
}

// Describe says which store is in use and what it sees now (a Sentinel's
// or Cluster's primary, a PostgreSQL server's version and role): for
// `onetick status`, /readyz and the start-up log.
func (h *Handle) Describe(ctx context.Context) string { return h.describe(ctx) }

// Announce logs, once at start-up, which store a replica uses and what
// that means (an embedded store: one host, ticks on standard output).
func (h *Handle) Announce(ctx context.Context, log *slog.Logger) { h.announce(ctx, log) }

// Upkeep does the store's periodic upkeep until ctx ends (PostgreSQL:
// delete the expired rows that Redis expires by itself); it returns at
// once for a store that needs none.
func (h *Handle) Upkeep(ctx context.Context) {
	if h.upkeep != nil {
		h.upkeep(ctx)
	}
}

// Sink is where ticks go when nothing reads the store's streams (the
// embedded stores: standard output); nil for a shared store.
func (h *Handle) Sink() onetick.Sink { return h.sink }

// Shards is the configuration's shard count: 1 unless `shards:` says more
// (docs/shards.md).
func (h *Handle) Shards() int { return max(h.shards, 1) }

// View is shard n's view of the store (docs/shards.md, decision 2): the
// store itself with one shard. Fleet-wide state (run-time job
// definitions, membership) is read through Backend, never through a view.
func (h *Handle) View(n int) (onetick.Backend, error) {
	if h.Shards() == 1 && n == 0 {
		return h.backend, nil
	}
	sh, ok := h.backend.(onetick.Sharder)
	if !ok {
		return nil, fmt.Errorf("the %s store does not shard", h.desc.Kind)
	}
	return sh.Shard(n, h.Shards())
}

// ForJob is the view of the shard that holds job (onetick.ShardOf): where
// its controls, records, ledger and default stream are.
func (h *Handle) ForJob(job string) (onetick.Backend, error) {
	return h.View(onetick.ShardOf(job, h.Shards()))
}

// Close closes the store and every client Open built for it.
func (h *Handle) Close() error { return h.close() }
