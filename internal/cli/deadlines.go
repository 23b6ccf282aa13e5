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
// deadlines need one. With shards, the one watcher judges each job from
// its shard's ledger while this replica leads the shard.
func deadlineWatcher(f *config.File, sched *onetick.Scheduler, h *stores.Handle) (*onetick.DeadlineWatcher, error) {
	if f.Role == config.RoleWorker {
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
