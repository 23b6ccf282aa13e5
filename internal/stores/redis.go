package stores

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/config"
	otredis "github.com/onetick/onetick/redis"
)

// clientName is the name onetick's connections give Redis (CLIENT LIST).
const clientName = "onetick"

// openRedis builds the client of the configured topology and checks that
// Redis answers.
func openRedis(ctx context.Context, f *config.File, o Options) (*Handle, error) {
	client, err := f.RedisClient(clientName)
	if err != nil {
		return nil, invalid(err)
	}
	opts := f.BackendOptions()
	opts.Ledger = o.ledger
	b := otredis.New(client, opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Ping(pctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", f.MaskedRedisURL(), err)
	}
	r := f.Backend.Redis
	h := &Handle{backend: b, close: client.Close,
		desc:     Description{Kind: Redis, Address: f.MaskedRedisURL(), Prefix: r.Prefix},
		work:     func(group string) WorkStore { return b.WorkerStore(group) },
		viewWork: viewWorkStore[*otredis.Backend, *otredis.WorkerStore](Redis),
	}
	h.describe = func(ctx context.Context) string { return describeRedis(ctx, f, client) }
	h.announce = func(ctx context.Context, log *slog.Logger) {
		log.Info("using Redis", "store", h.describe(ctx), "prefix", r.Prefix)
	}
	// The run ledger's log is folded into its records every second, so
	// that it stays short between reads; a failure is logged when it
	// changes, not every second.
	// With shards, every shard's view has its own ledger, folded in turn.
	h.upkeep = func(ctx context.Context) {
		var last string
		fail := func(err error) {
			if msg := err.Error(); msg != last {
				last = msg
				o.Logger.Warn("folding the run ledger failed; `onetick runs` shows the records folded so far", "err", err)
			}
		}
		if h.Shards() == 1 {
			b.FoldPeriodically(ctx, time.Second, fail)
			return
		}
		foldShards(ctx, h, fail)
	}
	return h, nil
}

// describeRedis says which Redis a replica uses and, for Sentinel and
// Cluster, which primary it sees now.
func describeRedis(ctx context.Context, f *config.File, client goredis.UniversalClient) string {
	r := f.Backend.Redis
	durability := ""
	if r.Durability == otredis.DurabilityReplicated {
		durability = fmt.Sprintf(", durability replicated (%d replicas within %s)", r.Replicas, r.ReplicationTimeout)
	}
	switch {
	case r.Sentinel != nil:
		primary := "unknown"
		for _, a := range r.Sentinel.Addrs {
			sc := goredis.NewSentinelClient(&goredis.Options{Addr: a, Username: r.Sentinel.Username, Password: r.Sentinel.Password})
			addr, err := sc.GetMasterAddrByName(ctx, r.Sentinel.Primary).Result()
			_ = sc.Close()
			if err == nil && len(addr) == 2 {
				primary = addr[0] + ":" + addr[1]
				break
			}
		}
		return fmt.Sprintf("redis sentinel %q, primary %s%s", r.Sentinel.Primary, primary, durability)
	case r.Cluster != nil:
		node := "unknown"
		if cc, ok := client.(*goredis.ClusterClient); ok {
			if slots, err := cc.ClusterSlots(ctx).Result(); err == nil {
				s := otredis.Slot(r.Prefix)
				for _, sr := range slots {
					if s >= sr.Start && s <= sr.End && len(sr.Nodes) > 0 {
						node = sr.Nodes[0].Addr
					}
				}
				node += " (slot " + strconv.Itoa(s) + " of " + r.Prefix + ")"
			}
		}
		return fmt.Sprintf("redis cluster, primary %s%s", node, durability)
	}
	return "redis " + f.MaskedRedisURL() + durability
}

// foldShards folds the run ledger of every shard's view of a Redis store
// every second until ctx ends.
func foldShards(ctx context.Context, h *Handle, fail func(error)) {
	if h.ledgerOff {
		return
	}
	views := make([]*otredis.Backend, 0, h.Shards())
	for n := range h.Shards() {
		v, err := h.View(n)
		if err != nil {
			fail(err)
			return
		}
		if rb, ok := v.(*otredis.Backend); ok {
			views = append(views, rb)
		}
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for n, v := range views {
			if err := v.FoldLedger(ctx); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("shard %d: %w", n, err))
			}
		}
	}
}
