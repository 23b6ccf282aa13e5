package onetick

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// While it leads, the scheduler watches two things in the store that
// operators change: the pause controls and the jobs defined at run time.
// It checks their versions at most every second, in the background: the
// round trips must not delay a claim (at 200 ms of latency each way, two
// checks before every claim made a leader fall behind its slots).

// refreshEvery is how often the versions are checked.
const refreshEvery = time.Second

// refresh is what one background check found.
type refresh struct {
	controls   map[string]JobControl
	ctlVersion int64
	ctlChanged bool
	jobs       []Job
	srcVersion int64
	srcChanged bool
}

// fetchRefresh reads the versions and whatever changed since ctlV and
// srcV. It does I/O only; the firing loop applies the result.
func (r *runner) fetchRefresh(ctx context.Context, ctlV, srcV int64, log *slog.Logger) refresh {
	var out refresh
	if v, err := r.backend.ControlsVersion(ctx); err == nil && v != ctlV {
		ctl, v, err := r.backend.Controls(ctx)
		if err == nil || ctl != nil {
			out.controls, out.ctlVersion, out.ctlChanged = ctl, v, true
		} else if ctx.Err() == nil {
			log.Warn("reading the pause controls failed; the store still refuses paused slots", "err", err)
		}
	}
	if r.s.cfg.Source != nil {
		if v, err := r.s.cfg.Source.Version(ctx); err == nil && v != srcV {
			if jobs, v, ok := r.s.fetchJobs(ctx, log); ok {
				out.jobs, out.srcVersion, out.srcChanged = jobs, v, true
			}
		}
	}
	return out
}

// refresher runs the background checks of one term.
type refresher struct {
	wg      sync.WaitGroup
	pending chan refresh // non-nil while a check runs
	last    time.Time
}

// maybeStart starts a check when none runs and the last is refreshEvery
// old.
func (rf *refresher) maybeStart(ctx context.Context, r *runner, log *slog.Logger) {
	if rf.pending != nil || r.s.clock.Since(rf.last) < refreshEvery {
		return
	}
	rf.last = r.s.clock.Now()
	ch := make(chan refresh, 1)
	rf.pending = ch
	ctlV, srcV := r.ctlVersion, r.srcVersion
	rf.wg.Add(1)
	go func() {
		defer rf.wg.Done()
		ch <- r.fetchRefresh(ctx, ctlV, srcV, log)
	}()
}

// apply applies a finished check to the running term.
func (r *runner) applyRefresh(ctx context.Context, h *jobHeap, got refresh, log *slog.Logger) {
	if got.ctlChanged {
		r.controls, r.ctlVersion = got.controls, got.ctlVersion
	}
	if got.srcChanged {
		if add, remove := r.diffJobs(got.jobs, got.srcVersion, log); add != nil || remove != nil {
			r.applySource(ctx, h, add, remove, log)
		}
	}
}
