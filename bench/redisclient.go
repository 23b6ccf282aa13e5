package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/testsupport/redisserver"
)

// redisServer is the benchmarks' Redis: one redis-server process on a
// free loopback port without persistence (see package
// testsupport/redisserver), with the clients the harness makes for it.
type redisServer struct{ *redisserver.Server }

func startRedis() (*redisServer, error) {
	s, err := redisserver.Start()
	if err != nil {
		return nil, err
	}
	return &redisServer{s}, nil
}

// newClient returns a go-redis client that counts its round trips (one per
// command sent outside a pipeline, one per pipeline).
func (s *redisServer) newClient(rt *atomic.Int64) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	if rt != nil {
		c.AddHook(rtHook{rt})
	}
	return c
}

type rtHook struct{ n *atomic.Int64 }

func (h rtHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h rtHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h rtHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// admin is the harness's own connection: flush, INFO, reading results.
type admin struct{ c *goredis.Client }

func (a admin) flush(ctx context.Context) error {
	if err := a.c.FlushAll(ctx).Err(); err != nil {
		return err
	}
	return a.c.ConfigResetStat(ctx).Err()
}

// commandCalls returns the number of commands Redis executed (INFO
// commandstats: every command, including those run inside Lua scripts, and
// the EVALSHA/EVAL calls themselves), excluding the harness's own INFO,
// CONFIG and FLUSHALL.
func (a admin) commandCalls(ctx context.Context) (int64, error) {
	s, err := a.c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "info", "config|resetstat", "flushall", "config":
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if k, v, _ := strings.Cut(f, "="); k == "calls" {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total, nil
}

func (a admin) usedMemory(ctx context.Context) (int64, error) {
	s, err := a.c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("used_memory not in INFO memory")
}

func (a admin) version(ctx context.Context) string {
	s, err := a.c.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}
