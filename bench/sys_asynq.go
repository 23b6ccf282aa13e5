package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"
)

const asynqPending = "asynq:{default}:pending"

// asynqInst is one asynq.Scheduler instance. asynq's scheduler has no
// leader election: every instance enqueues every entry.
type asynqInst struct {
	g      *gate
	s      *asynq.Scheduler
	client *goredis.Client // nil when the scheduler owns its connection
}

func (i *asynqInst) stop() {
	i.s.Shutdown()
	if i.client != nil {
		_ = i.client.Close()
	}
}

func (i *asynqInst) gate() *gate { return i.g }

// startAsynq starts a scheduler with n "@every 1s" entries, each enqueuing
// a task whose payload is the job's name. The slot of a firing is the
// instant asynq called PreEnqueueFunc (its cron fired), truncated to the
// second; the enqueue instant is when PostEnqueueFunc saw the enqueue
// succeed. With rt set, the scheduler runs on a harness client that counts
// round trips (NewSchedulerFromRedisClient); otherwise as users usually
// start it, NewScheduler with a RedisClientOpt.
func startAsynq(srv *redisServer, id, n int, spec string, r *recorder, rt *atomic.Int64) (*asynqInst, error) {
	inst := &asynqInst{g: &gate{}}
	// Firings of one entry may overlap (during a pause): pair each
	// PostEnqueueFunc with the oldest pending PreEnqueueFunc of its job.
	var mu sync.Mutex
	pending := map[string][]int64{}
	opts := &asynq.SchedulerOpts{
		LogLevel: asynq.FatalLevel,
		PreEnqueueFunc: func(t *asynq.Task, _ []asynq.Option) {
			slot := time.Now().Truncate(time.Second).UnixMilli()
			job := string(t.Payload())
			mu.Lock()
			pending[job] = append(pending[job], slot)
			mu.Unlock()
			inst.g.wait()
		},
		PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
			now := time.Now().UnixNano()
			if info == nil {
				return // failed: nothing to pair reliably; counted as missed
			}
			job := string(info.Payload)
			mu.Lock()
			q := pending[job]
			var slot int64
			if len(q) > 0 {
				slot, pending[job] = q[0], q[1:]
			}
			mu.Unlock()
			if err == nil && r != nil {
				r.addTagged(info.ID, rec{job: jobIndex(job), inst: int32(id), slot: slot, at: now})
			}
		},
	}
	if rt != nil {
		inst.client = srv.newClient(rt)
		inst.s = asynq.NewSchedulerFromRedisClient(inst.client, opts)
	} else {
		inst.s = asynq.NewScheduler(asynq.RedisClientOpt{Addr: srv.Addr()}, opts)
	}
	for j := 0; j < n; j++ {
		if _, err := inst.s.Register(spec, asynq.NewTask("tick", []byte(jobName(j)))); err != nil {
			return nil, err
		}
	}
	if err := inst.s.Start(); err != nil {
		return nil, err
	}
	return inst, nil
}

func asynqStoreCount(ctx context.Context, c *goredis.Client) (int64, error) {
	return c.LLen(ctx, asynqPending).Result()
}
