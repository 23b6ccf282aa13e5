package cli

import (
	"fmt"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
)

// deadlineWatcher builds the watcher of the jobs' deadlines, which checks
// while sched leads; nil on a replica that only works. A store without a
// ledger gets a watcher all the same: it says once, in the log, that
// deadlines need one. None with shards: the watcher follows one lease and
// one ledger (docs/shards.md).
func deadlineWatcher(f *config.File, sched *onetick.Scheduler, h *stores.Handle) (*onetick.DeadlineWatcher, error) {
	if f.Role == config.RoleWorker {
		return nil, nil
	}
	if h.Shards() > 1 {
		// Deadlines are refused with shards, in the file and in the jobs
		// applied at run time (config).
		return nil, nil
	}
	cfg, err := f.Deadlines.Watcher()
	if err != nil {
		return nil, fmt.Errorf("%s: deadlines.notify: %v", f.Path, err)
	}
	if lg, err := h.Ledger(); err == nil {
		cfg.Ledger = lg
	}
	return sched.DeadlineWatcher(cfg)
}
