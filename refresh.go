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
func (s *Scheduler) fetchRefresh(ctx context.Context, ctlV, srcV int64, log *slog.Logger) refresh {
	var r refresh
	if v, err := s.cfg.Backend.ControlsVersion(ctx); err == nil && v != ctlV {
		ctl, v, err := s.cfg.Backend.Controls(ctx)
		if err == nil || ctl != nil {
			r.controls, r.ctlVersion, r.ctlChanged = ctl, v, true
		} else if ctx.Err() == nil {
			log.Warn("reading the pause controls failed; the store still refuses paused slots", "err", err)
		}
	}
	if s.cfg.Source != nil {
		if v, err := s.cfg.Source.Version(ctx); err == nil && v != srcV {
			if jobs, v, ok := s.fetchJobs(ctx, log); ok {
				r.jobs, r.srcVersion, r.srcChanged = jobs, v, true
			}
		}
	}
	return r
}

// refresher runs the background checks of one term.
type refresher struct {
	wg      sync.WaitGroup
	pending chan refresh // non-nil while a check runs
	last    time.Time
}

// maybeStart starts a check when none runs and the last is refreshEvery
// old.
func (rf *refresher) maybeStart(ctx context.Context, s *Scheduler, log *slog.Logger) {
	if rf.pending != nil || s.clock.Since(rf.last) < refreshEvery {
		return
	}
	rf.last = s.clock.Now()
	ch := make(chan refresh, 1)
	rf.pending = ch
	ctlV, srcV := s.ctlVersion, s.srcVersion
	rf.wg.Add(1)
	go func() {
		defer rf.wg.Done()
		ch <- s.fetchRefresh(ctx, ctlV, srcV, log)
	}()
}

// apply applies a finished check to the running term.
func (s *Scheduler) applyRefresh(ctx context.Context, h *jobHeap, r refresh, log *slog.Logger) {
	if r.ctlChanged {
		s.controls, s.ctlVersion = r.controls, r.ctlVersion
	}
	if r.srcChanged {
		if add, remove := s.diffJobs(r.jobs, r.srcVersion, log); add != nil || remove != nil {
			s.applySource(ctx, h, add, remove, log)
		}
	}
}
