package cli

import (
	"context"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	otpostgres "github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/sqlite"
)

// describeStore says which store a replica uses and, for Sentinel and
// Cluster, which primary it sees now: for `onetick status` and /readyz.
func describeStore(ctx context.Context, f *config.File, b onetick.Backend) string {
	if pg, ok := b.(*otpostgres.Backend); ok {
		return describePostgres(ctx, f, pg)
	}
	r := f.Backend.Redis
	if r == nil {
		if sb, ok := b.(*sqlite.Backend); ok {
			return "embedded (file " + sb.Path() + ")"
		}
		return "embedded (in-process)"
	}
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
		if o, ok := b.(ownedRedis); ok {
			if cc, ok := o.client.(*goredis.ClusterClient); ok {
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
		}
		return fmt.Sprintf("redis cluster, primary %s%s", node, durability)
	}
	return "redis " + f.MaskedRedisURL() + durability
}

// describePostgres names the database, its server and whether it is a
// primary (a replica in recovery cannot take writes).
func describePostgres(ctx context.Context, f *config.File, b *otpostgres.Backend) string {
	out := f.MaskedStore()
	var version string
	var recovery bool
	err := b.Pool().QueryRow(ctx, `SELECT current_setting('server_version'), pg_is_in_recovery()`).Scan(&version, &recovery)
	if err != nil {
		return out + " (unreachable: " + err.Error() + ")"
	}
	role := "primary"
	if recovery {
		role = "standby (read-only: claims will fail)"
	}
	return out + ", PostgreSQL " + version + " " + role
}
