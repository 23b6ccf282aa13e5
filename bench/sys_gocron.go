package main

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	goredis "github.com/redis/go-redis/v9"
)

// The community package github.com/go-co-op/gocron-redis-lock/v2 is not
// served by the module proxy reachable here, so the Locker below is a
// minimal equivalent of what it does with the options its README uses
// (redsync mutex, WithTries(1)): SET key token NX PX ttl, one try, and a
// compare-and-delete on Unlock after the job ran. The Elector is the
// common hand-written pattern: one atomic script that keeps or takes a
// leader key with a TTL on every IsLeader call; the harness deletes the
// key (compare-and-delete) after Shutdown, as a careful user would, since
// gocron's Elector interface has no release hook.

var (
	electScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`)
	casDelScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
	errNotLeader = errors.New("not the leader")
	errLocked    = errors.New("lock held elsewhere")
)

const gocronLeaderKey = "gocron:leader"

type redisElector struct {
	c   *goredis.Client
	id  string
	ttl time.Duration
	g   *gate
}

func (e *redisElector) IsLeader(ctx context.Context) error {
	e.g.wait()
	ok, err := electScript.Run(ctx, e.c, []string{gocronLeaderKey}, e.id, e.ttl.Milliseconds()).Int()
	if err != nil {
		return err
	}
	if ok != 1 {
		return errNotLeader
	}
	return nil
}

func (e *redisElector) release(ctx context.Context) {
	_ = casDelScript.Run(ctx, e.c, []string{gocronLeaderKey}, e.id).Err()
}

type redisLocker struct {
	c   *goredis.Client
	id  string
	ttl time.Duration
	g   *gate
	seq atomic.Int64
}

type redisLock struct {
	l          *redisLocker
	key, token string
}

func (l *redisLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	l.g.wait()
	token := l.id + ":" + strconv.FormatInt(l.seq.Add(1), 10)
	ok, err := l.c.SetNX(ctx, "gocron:lock:"+key, token, l.ttl).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errLocked
	}
	return &redisLock{l: l, key: "gocron:lock:" + key, token: token}, nil
}

func (k *redisLock) Unlock(ctx context.Context) error {
	return casDelScript.Run(ctx, k.l.c, []string{k.key}, k.token).Err()
}

type gocronInst struct {
	g      *gate
	s      gocron.Scheduler
	el     *redisElector
	client *goredis.Client
}

func (i *gocronInst) stop() {
	_ = i.s.Shutdown()
	if i.el != nil {
		i.el.release(context.Background())
	}
	_ = i.client.Close()
}

func (i *gocronInst) gate() *gate { return i.g }

// startGocron starts a gocron scheduler with n jobs on the cron spec (with
// seconds), coordinated by an elector (elector true) or a locker. A job
// run takes its slot as the instant gocron started it truncated to the
// second, then appends an entry to the job's stream (the enqueue).
func startGocron(srv *redisServer, id, n int, spec string, elector bool, ttl time.Duration, r *recorder, rt *atomic.Int64) (*gocronInst, error) {
	c := srv.newClient(rt)
	inst := &gocronInst{g: &gate{}, client: c}
	name := "g" + strconv.Itoa(id)
	var opt gocron.SchedulerOption
	if elector {
		inst.el = &redisElector{c: c, id: name, ttl: ttl, g: inst.g}
		opt = gocron.WithDistributedElector(inst.el)
	} else {
		opt = gocron.WithDistributedLocker(&redisLocker{c: c, id: name, ttl: ttl, g: inst.g})
	}
	s, err := gocron.NewScheduler(opt, gocron.WithLocation(time.UTC))
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	inst.s = s
	for j := 0; j < n; j++ {
		job := jobName(j)
		ji := int32(j)
		_, err := s.NewJob(gocron.CronJob(spec, true), gocron.NewTask(func() {
			slot := time.Now().Truncate(time.Second).UnixMilli()
			inst.g.wait()
			err := c.XAdd(context.Background(), &goredis.XAddArgs{Stream: "gocron:stream:" + job,
				Values: []any{"slot", slot, "inst", id}}).Err()
			if err == nil && r != nil {
				r.add(rec{job: ji, inst: int32(id), slot: slot, at: time.Now().UnixNano()})
			}
		}), gocron.WithName(job))
		if err != nil {
			_ = s.Shutdown()
			_ = c.Close()
			return nil, err
		}
	}
	s.Start()
	return inst, nil
}

func gocronStoreCount(ctx context.Context, c *goredis.Client, n int) (int64, error) {
	p := c.Pipeline()
	cmds := make([]*goredis.IntCmd, n)
	for j := range n {
		cmds[j] = p.XLen(ctx, "gocron:stream:"+jobName(j))
	}
	if _, err := p.Exec(ctx); err != nil {
		return 0, err
	}
	var t int64
	for _, c := range cmds {
		t += c.Val()
	}
	return t, nil
}
