package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
)

// `onetick shards migrate --config FILE --to N [--apply]` changes the
// fleet's shard count, offline (docs/shards.md, "Migration between shard
// counts"). On Redis each layout has its own keys: the store copies each
// job's last-fired slot, pause intervals and who paused from its shard
// under the stored count to its shard under N, then records N
// (redis.(*Backend).MigrateShards). On PostgreSQL the layouts share every
// job's rows: the count is recorded once no shard's lease is held
// (onetick.Layouter). The jobs are the configuration's and the run-time
// ones, read through the store (never a shard's view). The count in the
// configuration file is not used: the store's is the one migrated from.

const shardsUsage = "usage: onetick shards migrate --config FILE --to N [--apply] [--redis URL]"

// cmdShards is `onetick shards SUBCOMMAND`.
func cmdShards(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 || args[0] != "migrate" {
		return badInput("%s", shardsUsage)
	}
	return cmdShardsMigrate(ctx, args[1:], env)
}

func cmdShardsMigrate(ctx context.Context, args []string, env Env) error {
	fs := newFlags("shards migrate", env)
	path := fs.String("config", "", "configuration file")
	redisURL := fs.String("redis", "", "Redis URL, overrides backend.redis.url and ONETICK_REDIS_URL")
	to := fs.Int("to", 0, "the new shard count (1 to "+strconv.Itoa(onetick.MaxShards)+")")
	apply := fs.Bool("apply", false, "migrate (without it: print the plan, change nothing)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("shards migrate: unexpected argument %q (%s)", pos[0], shardsUsage)
	}
	if *to < 1 || *to > onetick.MaxShards {
		return badInput("--to: want a shard count from 1 to %d, got %d (%s)", onetick.MaxShards, *to, shardsUsage)
	}
	c, err := check(*path, overrides{redisURL: *redisURL}, env)
	if err != nil {
		return err
	}
	f := c.f
	switch {
	case f.Backend.Etcd != nil:
		return badInput("shards migrate: %s uses etcd, which records no shard count yet: start the fleet with the new count on a new key prefix", f.Path)
	case !f.Shared():
		return badInput("shards migrate: %s uses an embedded store (the file store or backend.memory), which runs one replica and takes shards: 1 only", f.Path)
	}
	// The file's count does not matter here: open the store itself.
	fileShards := max(f.Shards, 1)
	f.Shards = 1
	h, err := openStore(ctx, f, stores.Options{Logger: env.logger()})
	if err != nil {
		return err
	}
	defer h.Close()
	out := env.Stdout
	switch b := h.Backend().(type) {
	case *otredis.Backend:
		return migrateRedisShards(ctx, b, c.jobs, fileShards, *to, *apply, out)
	case *postgres.Backend:
		return migratePostgresShards(ctx, b, *to, *apply, out)
	}
	return badInput("shards migrate: the %s store of %s records no shard count", h.Kind(), f.Path)
}

// migrateRedisShards plans or performs the migration on Redis and prints
// it.
func migrateRedisShards(ctx context.Context, b *otredis.Backend, jobs []onetick.Job, fileShards, to int, apply bool, out io.Writer) error {
	stored, _, err := b.StoredJobs(ctx)
	if err != nil {
		return fmt.Errorf("shards migrate: reading the jobs defined at run time: %w", err)
	}
	names := make([]string, 0, len(jobs)+len(stored))
	streams := map[string]bool{} // jobs with a default stream
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	for _, sj := range stored {
		names = append(names, sj.Name)
		var d struct {
			Stream string `json:"stream"`
		}
		if json.Unmarshal(sj.Def, &d) == nil && d.Stream == "" {
			streams[sj.Name] = true
		}
	}
	m, err := b.MigrateShards(ctx, names, to, apply)
	var busy *otredis.ShardsBusyError
	if err != nil && !errors.As(err, &busy) || m == nil {
		return fmt.Errorf("shards migrate: %w", err)
	}
	for _, j := range jobs {
		if isDefaultStream(b.Prefix(), j, fileShards, m.From, m.To) {
			streams[j.Name] = true
		}
	}
	if m.From == m.To {
		fprintf(out, "the store %s holds the layout of %d shard(s) already: nothing to do\n", b.Prefix(), m.To)
		return nil
	}
	printShardPlan(out, b.Prefix(), m, len(names), streams)
	if busy != nil {
		return fmt.Errorf("shards migrate: refused: %w", busy)
	}
	if !apply {
		fprintf(out, "\ndry run: nothing changed. Stop every replica (let the workers drain their streams first), then run again with --apply.\n")
		return nil
	}
	fprintf(out, "\nmigrated: %s records %d shard(s) now; start the fleet with shards: %d.\n", b.Prefix(), m.To, m.To)
	if m.To > 1 {
		fprintf(out, "the one-shard lease %s:leader is held for %q: a replica of a version without shards stays standby.\n", b.Prefix(), onetick.LayoutHolder(m.To))
	}
	fprintf(out, "the old layout's keys are left in place (nothing reads them now).\n")
	return nil
}

// printShardPlan prints what moves (or moved) and what is not copied.
func printShardPlan(out io.Writer, prefix string, m *otredis.ShardMigration, jobs int, streams map[string]bool) {
	verb := "would copy"
	if m.Applied {
		verb = "copied"
	}
	fprintf(out, "shard count of %s: %d -> %d; %d job(s): %d keep their keys, %d move\n", prefix, m.From, m.To, jobs, m.Stayed, len(m.Moves))
	type pair struct{ from, to int }
	per := map[pair][3]int{}
	for _, mv := range m.Moves {
		p := pair{mv.From, mv.To}
		c := per[p]
		c[0]++
		if mv.Last {
			c[1]++
		}
		if mv.Paused {
			c[2]++
		}
		per[p] = c
	}
	pairs := make([]pair, 0, len(per))
	for p := range per {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, k int) bool {
		if pairs[i].to != pairs[k].to {
			return pairs[i].to < pairs[k].to
		}
		return pairs[i].from < pairs[k].from
	})
	for _, p := range pairs {
		c := per[p]
		fprintf(out, "  shard %d of %d (%s) -> shard %d of %d (%s): %d job(s); %s %d last-fired slot(s), %d pause(s)\n",
			p.from, m.From, otredis.ShardPrefix(prefix, p.from, m.From), p.to, m.To, otredis.ShardPrefix(prefix, p.to, m.To),
			c[0], verb, c[1], c[2])
	}
	fprintf(out, "not copied in this version: tick and trigger records, the run ledger, control logs, default streams' entries.\n")
	fprintf(out, "  backfill dedups by the tick records and the run ledger, which the new layout does not hold for a moved job:\n")
	fprintf(out, "  backfill a moved job only with --from after the instant the old fleet stopped (earlier slots may have fired under the old layout);\n")
	fprintf(out, "  a trigger retried with the key of one made before the migration is enqueued again.\n")
	var changed []string
	for _, mv := range m.Moves {
		if streams[mv.Job] {
			changed = append(changed, mv.Job)
		}
	}
	if len(changed) == 0 {
		fprintf(out, "no default stream changes key.\n")
		return
	}
	fprintf(out, "default streams whose key changes (drain the old one first; consumers outside onetick read the new one):\n")
	for _, j := range changed {
		fprintf(out, "  %s: %s -> %s\n", j, config.DefaultStream(prefix, j, m.From), config.DefaultStream(prefix, j, m.To))
	}
}

// isDefaultStream says whether the configuration gave j no stream of its
// own: its stream is a default one, under one of counts (the file's, the
// stored and the new one) or without shards.
func isDefaultStream(prefix string, j onetick.Job, counts ...int) bool {
	if j.Stream == "" || j.Stream == prefix+":stream:"+j.Name {
		return true
	}
	for _, n := range counts {
		if j.Stream == config.DefaultStream(prefix, j.Name, n) {
			return true
		}
	}
	return false
}

// migratePostgresShards records the count on PostgreSQL: its layouts
// share every job's rows, so nothing is copied; Layout records the count
// when no shard's lease is held.
func migratePostgresShards(ctx context.Context, b *postgres.Backend, to int, apply bool, out io.Writer) error {
	if !apply {
		fprintf(out, "PostgreSQL keeps every job's state in rows every layout shares: nothing is copied.\n"+
			"With --apply the count %d is recorded once no shard's lease is held (every replica stopped); starting the stopped fleet with shards: %d does the same.\n", to, to)
		return nil
	}
	if err := b.Layout(ctx, to); err != nil {
		var le *onetick.LayoutError
		if errors.As(err, &le) {
			return fmt.Errorf("shards migrate: refused: the store holds %d shard(s): %s", le.Stored, le.Why)
		}
		return fmt.Errorf("shards migrate: %w", err)
	}
	fprintf(out, "recorded: the store holds the layout of %d shard(s); start the fleet with shards: %d.\n", to, to)
	return nil
}
