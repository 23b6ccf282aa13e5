package config

import (
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/postgres"
	otredis "github.com/onetick/onetick/redis"
)

// The mappings from a backend section to what its store package takes.
// They never choose a store: the program's one place that learns which
// store is configured and opens it is internal/stores, which calls these;
// they stay exported for programs that embed onetick with a
// configuration file.

// RedisClient returns a go-redis client for the configured topology:
// standalone (the URL), Sentinel (a failover client that follows the
// primary) or Cluster; nil without a redis section.
func (f *File) RedisClient(name string) (goredis.UniversalClient, error) {
	r := f.Backend.Redis
	if r == nil {
		return nil, nil
	}
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

// BackendOptions are the Redis backend's options of the redis section.
func (f *File) BackendOptions() otredis.Options {
	r := f.Backend.Redis
	if r == nil {
		return otredis.Options{}
	}
	return otredis.Options{Prefix: r.Prefix, ClockTolerance: r.ClockTolerance.D(), Durability: r.Durability,
		Replicas: r.Replicas, ReplicationTimeout: r.ReplicationTimeout.D()}
}

// PostgresOptions are the PostgreSQL backend's options of the postgres
// section.
func (f *File) PostgresOptions() postgres.Options {
	pg := f.Backend.Postgres
	if pg == nil {
		return postgres.Options{}
	}
	return postgres.Options{Schema: pg.Schema, ClockTolerance: pg.ClockTolerance.D(), EntryRetention: pg.EntryRetention.D(), RiverSchema: pg.RiverSchema}
}
