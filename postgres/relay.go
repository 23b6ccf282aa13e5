package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/onetick/onetick"
)

// The River relay (issue 21): a tick of a job whose relay is River is
// inserted as a River job by the claim's own transaction (and the
// enqueue's, for triggers and backfills), instead of being appended to
// the job's stream. The tick is in River if and only if it is claimed:
// a fenced claim writes nothing, a retried claim writes no tick record
// again and so inserts nothing new, and River's uniqueness by args makes
// a second insert of one tick a no-op besides.

// RiverVersion is the River release whose insert this build uses.
const RiverVersion = "v0.51.2"

// RiverTick is the args of the River job a relayed tick becomes. A
// worker embeds it in its own args type, whose Kind is the relay's Type
// (the job's name by default):
//
//	type ReportArgs struct{ postgres.RiverTick }
//	func (ReportArgs) Kind() string { return "report" }
type RiverTick struct {
	// Job is onetick's job.
	Job string `json:"job"`
	// Slot is the tick's slot (a trigger's: when it was enqueued).
	Slot time.Time `json:"slot"`
	// Tick is the tick's id, unique per job and slot (or trigger key).
	Tick string `json:"tick"`
	// Payload is the job's payload.
	Payload string `json:"payload,omitempty"`
	// Origin is "schedule", onetick.KindTrigger or onetick.KindBackfill.
	Origin string `json:"origin"`
	// Version is the job definition's version, when it has one.
	Version string `json:"version,omitempty"`
}

// riverArgs is a RiverTick inserted under a kind chosen at run time.
type riverArgs struct {
	kind string
	body json.RawMessage
}

func (a riverArgs) Kind() string                 { return a.kind }
func (a riverArgs) MarshalJSON() ([]byte, error) { return a.body, nil }

// CanRelay implements onetick.Relayer: PostgreSQL relays to River, whose
// tables (migrated by the team with rivermigrate or `river migrate-up`)
// must be in Options.RiverSchema at exactly the migration version this
// build's River knows.
func (b *Backend) CanRelay(ctx context.Context, r onetick.Relay) error {
	if r.Kind != onetick.RelayRiver {
		return fmt.Errorf("postgres relays ticks to %s only, not to %s", onetick.RelayRiver, r.Kind)
	}
	where := "schema " + b.opts.RiverSchema
	if b.opts.RiverSchema == "" {
		where = "the connection's search_path"
	}
	m, err := rivermigrate.New(riverpgxv5.New(b.pool), &rivermigrate.Config{Schema: b.opts.RiverSchema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	// Read directly: River's own reader refuses a version it does not
	// know without saying which is newer.
	table := "river_migration"
	if b.opts.RiverSchema != "" {
		table = pgx.Identifier{b.opts.RiverSchema, table}.Sanitize()
	}
	var exists bool
	if err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return fmt.Errorf("river: looking for its tables in %s: %w", where, err)
	}
	if !exists {
		return fmt.Errorf("river's tables are not in %s: run River's migrations there (rivermigrate, or `river migrate-up`) for River %s", where, RiverVersion)
	}
	var v *int
	if err := b.pool.QueryRow(ctx, `SELECT max(version) FROM `+table+` WHERE line = 'main'`).Scan(&v); err != nil {
		return fmt.Errorf("river: reading its migrations in %s (a layout before River v0.5 is not supported): %w", where, err)
	}
	all := m.AllVersions()
	known := all[len(all)-1].Version
	switch {
	case v == nil:
		return fmt.Errorf("river's tables are not in %s: run River's migrations there (rivermigrate, or `river migrate-up`) for River %s", where, RiverVersion)
	case *v > known:
		return fmt.Errorf("river's tables in %s are at migration version %d, newer than the %d that River %s (this build) knows: upgrade onetick", where, *v, known, RiverVersion)
	case *v < known:
		return fmt.Errorf("river's tables in %s are at migration version %d, older than the %d that River %s (this build) needs: run River's migrations", where, *v, known, RiverVersion)
	}
	_, err = b.river()
	return err
}

// riverBacklogStates are the states of a River job not yet worked:
// waiting to be fetched (available), for its time (scheduled), or for its
// next attempt (retryable).
const riverBacklogStates = `'available', 'scheduled', 'retryable'`

// RelayBacklog implements onetick.RelayBacklogger for River: the River
// jobs of r's queue (every kind, as for asynq's pending list) not yet
// worked, that is available, scheduled or retryable, in
// Options.RiverSchema. Running jobs, finished ones and River's pending
// state (jobs held back by River itself) are not counted.
func (b *Backend) RelayBacklog(ctx context.Context, r onetick.Relay) (int64, error) {
	if r.Kind != onetick.RelayRiver {
		return 0, fmt.Errorf("postgres: no backlog of a %s relay (this store relays to %s)", r.Kind, onetick.RelayRiver)
	}
	queue := r.Queue
	if queue == "" {
		queue = onetick.DefaultRelayQueue
	}
	table, where := "river_job", "the connection's search_path"
	if b.opts.RiverSchema != "" {
		table, where = pgx.Identifier{b.opts.RiverSchema, table}.Sanitize(), "schema "+b.opts.RiverSchema
	}
	var n int64
	err := b.pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE queue = $1 AND state IN (`+riverBacklogStates+`)`, queue).Scan(&n)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "42P01": // undefined_table
		return 0, fmt.Errorf("river's tables are not in %s", where)
	case err != nil:
		return 0, fmt.Errorf("river: backlog of queue %s: %w", queue, err)
	}
	return n, nil
}

// RiverSchema returns Options.RiverSchema: where River's tables are.
func (b *Backend) RiverSchema() string { return b.opts.RiverSchema }

// river returns the Backend's insert-only River client (no queues, no
// workers: it never works a job), made on first use.
func (b *Backend) river() (*river.Client[pgx.Tx], error) {
	if b.root != nil {
		return b.root.river() // one client per store, its views' too
	}
	b.riverMu.Lock()
	defer b.riverMu.Unlock()
	if b.riverClient != nil {
		return b.riverClient, nil
	}
	c, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{Schema: b.opts.RiverSchema, Logger: b.opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	b.riverClient = c
	return c, nil
}

// relayRiver inserts, in tx, a River job for each relayed tick of plan
// whose record this write created (out): exactly the ticks the claim or
// enqueue hands over.
func (b *Backend) relayRiver(ctx context.Context, tx pgx.Tx, plan []wtick, out written) error {
	var params []river.InsertManyParams
	for _, w := range plan {
		r := w.t.Relay
		if r == nil || w.paused || !out[w.id] {
			continue
		}
		origin := w.kind
		if origin == "" {
			origin = "schedule"
		}
		body, err := json.Marshal(RiverTick{Job: w.t.Job, Slot: msTime(w.slot), Tick: w.id, Payload: w.t.Payload,
			Origin: origin, Version: w.t.Version})
		if err != nil {
			return err
		}
		kind := r.Type
		if kind == "" {
			kind = w.t.Job
		}
		queue := r.Queue
		if queue == "" {
			queue = onetick.DefaultRelayQueue
		}
		params = append(params, river.InsertManyParams{Args: riverArgs{kind: kind, body: body},
			InsertOpts: &river.InsertOpts{Queue: queue, MaxAttempts: r.MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}})
	}
	if len(params) == 0 {
		return nil
	}
	c, err := b.river()
	if err != nil {
		return err
	}
	if _, err := c.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("river: insert %d relayed ticks: %w", len(params), err)
	}
	return nil
}
