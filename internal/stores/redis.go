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
func openRedis(ctx context.Context, f *config.File) (*Handle, error) {
	client, err := redisClient(f, clientName)
	if err != nil {
		return nil, invalid(err)
	}
	b := otredis.New(client, redisOptions(f.Backend.Redis))
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Ping(pctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", f.MaskedRedisURL(), err)
	}
	r := f.Backend.Redis
	h := &Handle{backend: b, close: client.Close,
		desc: Description{Kind: Redis, Address: f.MaskedRedisURL(), Prefix: r.Prefix},
		work: func(group string) WorkStore { return b.WorkerStore(group) },
	}
	h.describe = func(ctx context.Context) string { return describeRedis(ctx, f, client) }
	h.announce = func(ctx context.Context, log *slog.Logger) {
		log.Info("using Redis", "store", h.describe(ctx), "prefix", r.Prefix)
	}
	return h, nil
}

// redisClient returns a go-redis client for the configured topology:
// standalone (the URL), Sentinel (a failover client that follows the
// primary) or Cluster. (It was config.File.RedisClient.)
func redisClient(f *config.File, name string) (goredis.UniversalClient, error) {
	r := f.Backend.Redis
	tc, err := f.TLSConfig()
	if err != nil {
		return nil, err
	}
	switch {
	case r.Sentinel != nil:
		return goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: r.Sentinel.Primary, SentinelAddrs: r.Sentinel.Addrs,
			SentinelUsername: r.Sentinel.Username, SentinelPassword: r.Sentinel.Password,
			Username: r.Username, Password: r.Password, TLSConfig: tc, ClientName: name,
		}), nil
	case r.Cluster != nil:
		return goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: r.Cluster.Addrs, Username: r.Username, Password: r.Password, TLSConfig: tc, ClientName: name,
			// go-redis reloads the slot map only this often (default 60s),
			// and a refused connection to a dead primary does not make it
			// reload sooner: with the default a failover left the client
			// writing to the dead node for a minute.
			ClusterStateReloadInterval: time.Second,
		}), nil
	}
	o, err := f.RedisOptions()
	if err != nil {
		return nil, err
	}
	o.ClientName = name
	return goredis.NewClient(o), nil
}

// redisOptions are the onetick Redis backend's options of the section.
// (It was config.File.BackendOptions.)
func redisOptions(r *config.Redis) otredis.Options {
	return otredis.Options{Prefix: r.Prefix, ClockTolerance: r.ClockTolerance.D(), Durability: r.Durability,
		Replicas: r.Replicas, ReplicationTimeout: r.ReplicationTimeout.D()}
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
