package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// WorkerStore is the worker.Store of one consumer group on a Backend's
// Redis: the group is a Redis consumer group on each job's stream, and
// the group's own keys live under "<prefix>:worker:<group>:":
//
//	done:<minute>  hash per minute of slots: tick id -> "entry|consumer|ms",
//	               expiring after the records' retention
//	retries        sorted set of scheduled retries (JSON), by due time
//	dead           stream of dead letters
//	deadcount      hash: job -> dead letters
//	last           hash: job -> "outcome|ms|tick"
//	running        sorted set of runs in flight, by expiry
//	alive          sorted set of consumers, by the expiry of their liveness
//	run:<job>      the job's overlap marker: "stream\nentry id", PX hold
//	waiters:<job>  sorted set of the job's waiter places: token, by slot
//	released       pub/sub channel: a marker or waiter place was released
//
// A consumer group created by the first fetch starts at the beginning of
// its stream: ticks enqueued before any worker ran are run (the stream's
// MaxLen bounds how many).
type WorkerStore struct {
	c     goredis.UniversalClient
	group string
	base  string
	// ledger: the run ledger's log key, and "1" when the backend keeps a
	// ledger (ledger.go).
	ledger, ledgerOn string

	mu       sync.Mutex
	fetch    map[string]*fetchState // per consumer
	reclaims int                    // Reclaim calls, to prune consumers now and then
}

// Consumers without pending entries are deleted from the group when idle
// this long, checked every pruneEvery Reclaim calls of one store.
const (
	pruneIdle  = time.Hour
	pruneEvery = 100
)

var _ worker.Store = (*WorkerStore)(nil)

// WorkerStore returns the worker store of group (default "onetick") on
// b's connection.
func (b *Backend) WorkerStore(group string) *WorkerStore {
	if group == "" {
		group = "onetick"
	}
	return &WorkerStore{c: b.c, group: group, base: b.opts.Prefix + ":worker:" + group + ":",
		ledger: b.lg.log, ledgerOn: b.ledgerFlag(), fetch: map[string]*fetchState{}}
}

func (s *WorkerStore) key(k string) string { return s.base + k }

func (s *WorkerStore) doneKey(slot onetick.Slot) string {
	return s.base + "done:" + strconv.FormatInt(int64(slot)/60000, 10)
}

// fetchState remembers, for one consumer, which streams may have entries
// not yet delivered to the group ("hot") and, for the others, the newest
// entry id seen, so that a fetch visits only streams with work and
// otherwise blocks on all of them at once.
type fetchState struct {
	mu      sync.Mutex // one fetch at a time per consumer
	streams []string
	hot     []string
	tails   map[string]string
	rot     int
}

func (s *WorkerStore) state(consumer string, streams []string) *fetchState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.fetch[consumer]
	if st == nil || !slices.Equal(st.streams, streams) {
		st = &fetchState{streams: slices.Clone(streams), hot: slices.Clone(streams), tails: map[string]string{}}
		s.fetch[consumer] = st
	}
	return st
}

// Fetch implements worker.Store. It takes entries with a script over the
// streams that may have some, and blocks (XREAD on every stream from its
// newest entry) only when none has; a cancelled ctx unblocks it at once
// (CLIENT UNBLOCK) where the client is a single-server *goredis.Client.
func (s *WorkerStore) Fetch(ctx context.Context, consumer string, streams []string, max int, block time.Duration) ([]*worker.Delivery, error) {
	if max <= 0 || len(streams) == 0 {
		return nil, nil
	}
	st := s.state(consumer, streams)
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(st.hot) > 0 {
			// Start at a different stream each time, so none starves.
			st.rot++
			keys := make([]string, len(st.hot))
			for i := range keys {
				keys[i] = st.hot[(i+st.rot)%len(st.hot)]
			}
			v, err := wFetchScript.Run(context.WithoutCancel(ctx), s.c, keys, s.group, consumer, max).Slice()
			if err != nil {
				return nil, err
			}
			entries, _ := v[0].([]any)
			tails, _ := v[1].([]any)
			st.hot = st.hot[:0]
			for i, k := range keys {
				if t, _ := tails[i].(string); t != "" {
					st.tails[k] = t
				} else {
					st.hot = append(st.hot, k)
				}
			}
			out := make([]*worker.Delivery, 0, len(entries))
			for _, e := range entries {
				x := e.([]any)
				d := deliveryOf(keys[x[0].(int64)-1], x[1].(string), x[2])
				d.Deliveries = 1
				out = append(out, d)
			}
			if len(out) > 0 {
				return out, nil
			}
			continue
		}
		if block <= 0 {
			return nil, nil
		}
		hot, err := s.waitAppend(ctx, st, block)
		if err != nil || len(hot) == 0 {
			return nil, err
		}
		st.hot = hot
		block = time.Millisecond // once woken, do not wait a second time
	}
}

// waitAppend blocks until an entry newer than the known tails is appended
// to one of the streams, and returns those streams.
func (s *WorkerStore) waitAppend(ctx context.Context, st *fetchState, block time.Duration) ([]string, error) {
	args := make([]string, 0, 2*len(st.streams))
	args = append(args, st.streams...)
	for _, k := range st.streams {
		t := st.tails[k]
		if t == "" {
			t = "0-0"
		}
		args = append(args, t)
	}
	xa := &goredis.XReadArgs{Streams: args, Count: 1, Block: max(block, time.Millisecond)}
	res, err := s.xread(ctx, xa)
	if errors.Is(err, goredis.Nil) {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	hot := make([]string, 0, len(res))
	for _, r := range res {
		hot = append(hot, r.Stream)
	}
	return hot, nil
}

// xread runs a blocking XREAD that a cancelled ctx cuts short (CLIENT
// UNBLOCK from another connection), where the client allows it.
func (s *WorkerStore) xread(ctx context.Context, xa *goredis.XReadArgs) ([]goredis.XStream, error) {
	cl, ok := s.c.(*goredis.Client)
	if !ok {
		return s.c.XRead(context.WithoutCancel(ctx), xa).Result()
	}
	conn := cl.Conn()
	defer conn.Close()
	id, err := conn.ClientID(ctx).Result()
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = cl.ClientUnblock(context.Background(), id).Err() })
	defer stop()
	return conn.XRead(context.WithoutCancel(ctx), xa).Result()
}

// deliveryOf parses an entry's fields (a flat array from a script, or a
// map from a command).
func deliveryOf(stream, id string, fields any) *worker.Delivery {
	get := fieldGetter(fields)
	slot, _ := strconv.ParseInt(get("slot"), 10, 64)
	epoch, _ := strconv.ParseInt(get("epoch"), 10, 64)
	attempt, err := strconv.Atoi(get("attempt"))
	if err != nil || attempt < 1 {
		attempt = 1
	}
	d := &worker.Delivery{Stream: stream, ID: id, Job: get("job"), Slot: onetick.Slot(slot), Tick: get("tick"),
		Epoch: onetick.Epoch(epoch), Replica: get("replica"), Payload: get("payload"), Attempt: attempt,
		Version: get("version")}
	if ms, _, ok := strings.Cut(id, "-"); ok {
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			d.Enqueued = msTime(n)
		}
	}
	return d
}

func fieldGetter(fields any) func(string) string {
	switch f := fields.(type) {
	case []any:
		m := make(map[string]string, len(f)/2)
		for i := 0; i+1 < len(f); i += 2 {
			k, _ := f[i].(string)
			v, _ := f[i+1].(string)
			m[k] = v
		}
		return func(k string) string { return m[k] }
	case map[string]any:
		return func(k string) string { v, _ := f[k].(string); return v }
	}
	return func(string) string { return "" }
}

// Reclaim implements worker.Store.
func (s *WorkerStore) Reclaim(ctx context.Context, consumer string, streams []string, idle time.Duration, max int) ([]*worker.Delivery, error) {
	if max <= 0 || len(streams) == 0 {
		return nil, nil
	}
	s.mu.Lock()
	s.reclaims++
	prune := s.reclaims%pruneEvery == 0
	s.mu.Unlock()
	if prune {
		if _, err := s.PruneConsumers(ctx, streams, pruneIdle); err != nil {
			return nil, err
		}
	}
	keys := append([]string{s.key("alive")}, streams...)
	v, err := wReclaimScript.Run(ctx, s.c, keys, s.group, consumer, idle.Milliseconds(), max).Slice()
	if err != nil {
		return nil, err
	}
	out := make([]*worker.Delivery, 0, len(v))
	for _, e := range v {
		x := e.([]any)
		d := deliveryOf(streams[x[0].(int64)-1], x[1].(string), x[2])
		d.Deliveries = int(x[3].(int64))
		out = append(out, d)
	}
	return out, nil
}

// Register implements worker.Store.
func (s *WorkerStore) Register(ctx context.Context, consumer string, streams []string, live time.Duration) error {
	keys := append([]string{s.key("alive")}, streams...)
	return wRegisterScript.Run(ctx, s.c, keys, consumer, s.group, max(live.Milliseconds(), 1)).Err()
}

// Begin implements worker.Store.
func (s *WorkerStore) Begin(ctx context.Context, consumer string, hold time.Duration, starts []worker.Start) (worker.BeginResult, error) {
	if len(starts) == 0 {
		return worker.BeginResult{}, nil
	}
	keys := make([]string, 0, 6+4*len(starts))
	keys = append(keys, s.key("running"), s.key("last"), s.key("dead"), s.key("deadcount"), s.key("alive"), s.ledger)
	args := make([]any, 0, 5+12*len(starts))
	args = append(args, consumer, s.group, max(hold.Milliseconds(), 1), s.key("released"), s.ledgerOn)
	for _, st := range starts {
		d := st.D
		keys = append(keys, d.Stream, s.doneKey(d.Slot), s.key(storekit.RunMarker(d.Job)), s.key("waiters:"+d.Job))
		overlap := st.Overlap
		if overlap == "" {
			overlap = worker.OverlapSkip
		}
		ordered := 0
		if st.Ordered {
			ordered = 1
		}
		args = append(args, d.ID, d.Job, d.Tick, string(overlap), st.MaxDeliveries, int64(d.Slot), int64(d.Epoch),
			d.Replica, d.Payload, d.Attempt, st.MaxWaiting, ordered)
	}
	v, err := wBeginScript.Run(ctx, s.c, keys, args...).Slice()
	if err != nil {
		return worker.BeginResult{}, err
	}
	codes, _ := v[1].(string)
	counts, _ := v[2].([]any)
	if len(codes) != len(starts) || len(counts) != len(starts) {
		return worker.BeginResult{}, fmt.Errorf("redis: begin answered %d codes for %d starts", len(codes), len(starts))
	}
	res := worker.BeginResult{StoreTime: msTime(v[0].(int64)), Admissions: make([]worker.Admission, len(starts))}
	for i, c := range []byte(codes) {
		res.Admissions[i] = map[byte]worker.Admission{'R': worker.Run, 'W': worker.Wait, 'D': worker.SkipDone,
			'S': worker.SkipOverlap, 'X': worker.DeadDeliveries, 'L': worker.NotOwned}[c]
		if n, _ := counts[i].(int64); n > 0 {
			starts[i].D.Deliveries = int(n)
		}
	}
	return res, nil
}

// Heartbeat implements worker.Store.
func (s *WorkerStore) Heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	// A thousand holds per script, so that one call does not block Redis
	// for long; one call with none marks the consumer alive.
	var lost []int
	for lo := 0; lo == 0 || lo < len(holds); lo += 1000 {
		l, err := s.heartbeat(ctx, consumer, live, hold, holds[lo:min(lo+1000, len(holds))])
		if err != nil {
			return nil, err
		}
		for _, i := range l {
			lost = append(lost, lo+i)
		}
	}
	return lost, nil
}

func (s *WorkerStore) heartbeat(ctx context.Context, consumer string, live, hold time.Duration, holds []worker.Hold) ([]int, error) {
	keys := make([]string, 0, 2+2*len(holds))
	keys = append(keys, s.key("running"), s.key("alive"))
	args := make([]any, 0, 4+3*len(holds))
	args = append(args, consumer, s.group, max(hold.Milliseconds(), 1), max(live.Milliseconds(), 1))
	for _, h := range holds {
		marker, kind := s.key(storekit.RunMarker(h.D.Job)), "n"
		switch h.Marker {
		case worker.MarkerRun:
			kind = "r"
		case worker.MarkerWait:
			marker, kind = s.key("waiters:"+h.D.Job), "w"
		}
		keys = append(keys, h.D.Stream, marker)
		args = append(args, h.D.ID, h.D.Job, kind)
	}
	v, err := wHeartbeatScript.Run(ctx, s.c, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	lost := make([]int, len(v))
	for i, x := range v {
		lost[i] = int(x) - 1
	}
	return lost, nil
}

// retryMember is the JSON of a scheduled retry: the next attempt's entry.
type retryMember struct {
	Stream  string `json:"s"`
	Job     string `json:"j"`
	Slot    string `json:"sl"`
	Tick    string `json:"t"`
	Epoch   string `json:"e"`
	Replica string `json:"r"`
	Payload string `json:"p"`
	Attempt string `json:"a"`
	Group   string `json:"g"`
	Origin  string `json:"o"`           // the failed entry: makes the member unique
	Version string `json:"v,omitempty"` // the job's definition version
}

// Finish implements worker.Store.
func (s *WorkerStore) Finish(ctx context.Context, consumer string, fs []worker.Finish) ([]bool, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, 6+4*len(fs))
	keys = append(keys, s.key("running"), s.key("last"), s.key("retries"), s.key("dead"), s.key("deadcount"), s.ledger)
	args := make([]any, 0, 4+13*len(fs))
	args = append(args, consumer, s.group, s.key("released"), s.ledgerOn)
	for _, f := range fs {
		d := f.D
		keys = append(keys, d.Stream, s.doneKey(d.Slot), s.key(storekit.RunMarker(d.Job)), s.key("waiters:"+d.Job))
		var kind string
		var num int64
		var member string
		switch f.Kind {
		case worker.FinishDone:
			kind, num = "d", max(f.Retention.Milliseconds(), 1)
		case worker.FinishRetry:
			kind, num = "r", max(f.Delay.Milliseconds(), 0)
			js, err := json.Marshal(retryMember{Stream: d.Stream, Job: d.Job, Slot: strconv.FormatInt(int64(d.Slot), 10),
				Tick: d.Tick, Epoch: strconv.FormatInt(int64(d.Epoch), 10), Replica: d.Replica, Payload: d.Payload,
				Attempt: strconv.Itoa(d.Attempt + 1), Group: s.group, Origin: d.Stream + "\n" + d.ID, Version: d.Version})
			if err != nil {
				return nil, err
			}
			member = string(js)
		case worker.FinishDead:
			kind = "x"
		case worker.FinishRelease:
			kind = "g"
		default:
			return nil, fmt.Errorf("redis: unknown finish kind %d", f.Kind)
		}
		var ev string
		if s.ledgerOn == "1" {
			js, err := eventJSON(storekit.FinishEvent(consumer, f))
			if err != nil {
				return nil, err
			}
			ev = js
		}
		args = append(args, kind, d.ID, d.Job, d.Tick, int64(d.Slot), int64(d.Epoch), d.Replica, d.Payload,
			d.Attempt, f.Err, num, member, ev)
	}
	v, err := wFinishScript.Run(ctx, s.c, keys, args...).Text()
	if err != nil {
		return nil, err
	}
	if len(v) != len(fs) {
		return nil, fmt.Errorf("redis: finish answered %d results for %d", len(v), len(fs))
	}
	owned := make([]bool, len(fs))
	for i := range v {
		owned[i] = v[i] == '1'
	}
	return owned, nil
}

// PromoteDue implements worker.Store: one script lists the due retries,
// another moves them (grouped by stream, so that every stream touched is
// declared) and removes each from the schedule in the same step.
func (s *WorkerStore) PromoteDue(ctx context.Context, max int) (worker.Promoted, error) {
	v, err := wDueScript.Run(ctx, s.c, []string{s.key("retries")}, max).Slice()
	if err != nil {
		return worker.Promoted{}, err
	}
	p := worker.Promoted{Next: msDur(v[1].(int64))}
	members, _ := v[2].([]any)
	if len(members) == 0 {
		return p, nil
	}
	keys := []string{s.key("retries")}
	index := map[string]int{}
	var args []any
	for _, m := range members {
		ms, _ := m.(string)
		var r retryMember
		if err := json.Unmarshal([]byte(ms), &r); err != nil {
			return p, fmt.Errorf("redis: scheduled retry %q: %w", ms, err)
		}
		i, ok := index[r.Stream]
		if !ok {
			keys = append(keys, r.Stream)
			i = len(keys)
			index[r.Stream] = i
		}
		args = append(args, i, ms)
	}
	w, err := wPromoteScript.Run(ctx, s.c, keys, args...).Int64Slice()
	if err != nil {
		return p, err
	}
	p.N, p.Next = int(w[0]), msDur(w[1])
	return p, nil
}

func msDur(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// Released implements worker.Store.
func (s *WorkerStore) Released(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	ps := s.c.Subscribe(ctx, s.key("released"))
	go func() {
		defer close(out)
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}
