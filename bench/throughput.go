package main

import (
	"context"
	"fmt"
	"time"
)

// thrResult is a baseline's enqueue throughput with n tasks due at once.
type thrResult struct {
	n       int
	count   int           // enqueued for the first slot
	span    time.Duration // slot to the last of them
	setup   time.Duration // registering the n entries and starting
	stopped time.Duration // Shutdown took this long (it waits for runs in flight)
	thr     float64
	err     error
}

// baselineThroughput starts one instance of a baseline with n entries
// firing every 5 s (asynq "@every 5s", which fires on whole seconds; gocron
// "*/5 * * * * *"), so that all n are due in the same slot, and measures
// from that slot to the last enqueue for it. The instance is shut down
// before the next slot (or once its in-flight runs are done), so every
// enqueue belongs to the first slot.
func (e *env) baselineThroughput(ctx context.Context, key string, n int, limit time.Duration) thrResult {
	res := thrResult{n: n}
	if err := e.adm.flush(ctx); err != nil {
		return thrResult{err: err}
	}
	r := newRecorder(n + n/10)
	t0 := time.Now()
	var in instance
	var err error
	switch key {
	case "asynq":
		in, err = startAsynq(e.srv, 0, n, "@every 5s", r, nil)
	case "locker":
		in, err = startGocron(e.srv, 0, n, "*/5 * * * * *", false, 8*time.Second, r, nil)
	case "elector":
		in, err = startGocron(e.srv, 0, n, "*/5 * * * * *", true, 15*time.Second, r, nil)
	default:
		err = fmt.Errorf("unknown baseline %q", key)
	}
	if err != nil {
		return thrResult{err: err}
	}
	res.setup = time.Since(t0)
	// Wait for the first slot's enqueues: all n, or until just before the
	// next slot could fire, or the limit.
	deadline := time.Now().Add(limit)
	var first int64
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		r.mu.Lock()
		c := len(r.recs)
		if c > 0 && first == 0 {
			first = r.recs[0].slot
			for _, x := range r.recs {
				first = min(first, x.slot)
			}
		}
		r.mu.Unlock()
		if c >= n {
			break
		}
		if first != 0 && time.Now().After(time.UnixMilli(first).Add(4500*time.Millisecond)) {
			break
		}
	}
	ts := time.Now()
	in.stop()
	res.stopped = time.Since(ts)
	recs := r.snapshot()
	if len(recs) == 0 {
		return thrResult{err: fmt.Errorf("nothing enqueued within %s (setup took %s)", limit, res.setup)}
	}
	first = recs[0].slot
	for _, x := range recs {
		first = min(first, x.slot)
	}
	var last int64
	for _, x := range recs {
		res.count++
		last = max(last, x.at)
	}
	res.span = time.Duration(last - first*int64(time.Millisecond))
	if res.span > 0 {
		res.thr = float64(res.count) / res.span.Seconds()
	}
	return res
}
