package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// PruneConsumers deletes the group's consumers on streams that own no
// pending entry and have been idle for at least idle, and returns how many
// it deleted. Reclaim calls it now and then; each worker process adds a
// consumer name to the group, which would otherwise stay forever.
func (s *WorkerStore) PruneConsumers(ctx context.Context, streams []string, idle time.Duration) (int, error) {
	n, err := wPruneScript.Run(ctx, s.c, streams, s.group, idle.Milliseconds()).Int()
	return n, err
}

// Status implements worker.Inspector.
func (s *WorkerStore) Status(ctx context.Context, jobs []string) (worker.Status, error) {
	v, err := wStatusScript.Run(ctx, s.c, []string{s.key("running"), s.key("dead")}).Slice()
	if err != nil {
		return worker.Status{}, err
	}
	st := worker.Status{StoreTime: msTime(v[0].(int64)), Dead: v[2].(int64), Jobs: make([]worker.JobStatus, len(jobs))}
	inFlight := map[string]int{}
	running, _ := v[1].([]any)
	for _, m := range running {
		ms, _ := m.(string)
		job, _, _ := strings.Cut(ms, "\n")
		inFlight[job]++
	}
	for i, j := range jobs {
		st.Jobs[i] = worker.JobStatus{Job: j, InFlight: inFlight[j]}
	}
	for lo := 0; lo < len(jobs); lo += 1000 {
		chunk := jobs[lo:min(lo+1000, len(jobs))]
		pipe := s.c.Pipeline()
		last := pipe.HMGet(ctx, s.key("last"), chunk...)
		counts := pipe.HMGet(ctx, s.key("deadcount"), chunk...)
		if _, err := pipe.Exec(ctx); err != nil {
			return worker.Status{}, err
		}
		for i := range chunk {
			js := &st.Jobs[lo+i]
			if l, ok := last.Val()[i].(string); ok {
				parts := strings.SplitN(l, "|", 3)
				if len(parts) == 3 {
					ms, _ := strconv.ParseInt(parts[1], 10, 64)
					js.LastOutcome, js.LastAt, js.LastTick = worker.Outcome(parts[0]), msTime(ms), parts[2]
				}
			}
			if c, ok := counts.Val()[i].(string); ok {
				js.Dead, _ = strconv.ParseInt(c, 10, 64)
			}
		}
	}
	return st, nil
}

// DoneRecords implements worker.Inspector.
func (s *WorkerStore) DoneRecords(ctx context.Context, ticks []string) (map[string]worker.DoneRecord, error) {
	out := map[string]worker.DoneRecord{}
	buckets := map[string][]string{}
	for _, t := range ticks {
		i := strings.LastIndexByte(t, ':')
		slot, err := strconv.ParseInt(t[i+1:], 10, 64)
		if i < 0 || err != nil {
			return nil, fmt.Errorf("redis: malformed tick id %q", t)
		}
		k := s.doneKey(onetick.Slot(slot))
		buckets[k] = append(buckets[k], t)
	}
	pipe := s.c.Pipeline()
	cmds := map[string]*goredis.SliceCmd{}
	for k, ts := range buckets {
		cmds[k] = pipe.HMGet(ctx, k, ts...)
	}
	if len(cmds) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	for k, cmd := range cmds {
		for i, x := range cmd.Val() {
			v, ok := x.(string)
			if !ok {
				continue
			}
			parts := strings.Split(v, "|")
			if len(parts) < 3 {
				continue
			}
			ms, _ := strconv.ParseInt(parts[len(parts)-1], 10, 64)
			t := buckets[k][i]
			out[t] = worker.DoneRecord{Tick: t, Entry: parts[0], Consumer: strings.Join(parts[1:len(parts)-1], "|"), At: msTime(ms)}
		}
	}
	return out, nil
}

// DeadLetters implements worker.Inspector.
func (s *WorkerStore) DeadLetters(ctx context.Context, after string, n int) ([]worker.DeadLetter, error) {
	if n <= 0 {
		return nil, nil
	}
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := s.c.XRangeN(ctx, s.key("dead"), start, "+", int64(n)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]worker.DeadLetter, len(msgs))
	for i, m := range msgs {
		out[i] = deadLetterOf(m)
	}
	return out, nil
}

func deadLetterOf(m goredis.XMessage) worker.DeadLetter {
	get := fieldGetter(m.Values)
	num := func(k string) int64 { n, _ := strconv.ParseInt(get(k), 10, 64); return n }
	return worker.DeadLetter{ID: m.ID, Job: get("job"), Tick: get("tick"), Slot: onetick.Slot(num("slot")),
		Epoch: onetick.Epoch(num("epoch")), Replica: get("replica"), Payload: get("payload"), Stream: get("stream"),
		Entry: get("entry"), Attempts: int(num("attempts")), Deliveries: int(num("deliveries")),
		Error: get("error"), Consumer: get("consumer"), At: msTime(num("at"))}
}

// Replay implements worker.Inspector.
func (s *WorkerStore) Replay(ctx context.Context, id string) (worker.DeadLetter, error) {
	msgs, err := s.c.XRange(ctx, s.key("dead"), id, id).Result()
	if err != nil {
		if strings.Contains(err.Error(), "Invalid stream ID") {
			return worker.DeadLetter{}, fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
		}
		return worker.DeadLetter{}, err
	}
	if len(msgs) == 0 {
		return worker.DeadLetter{}, fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
	}
	dl := deadLetterOf(msgs[0])
	v, err := wReplayScript.Run(ctx, s.c, []string{s.key("dead"), s.key("deadcount"), dl.Stream, s.ledger}, id, s.group, s.ledgerOn).Result()
	if err != nil {
		return worker.DeadLetter{}, err
	}
	if n, ok := v.(int64); ok && n == 0 {
		return worker.DeadLetter{}, fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
	}
	return dl, nil
}
