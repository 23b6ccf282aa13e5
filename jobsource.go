package onetick

import (
	"container/heap"
	"context"
	"log/slog"
)

// The scheduler's side of the jobs defined at run time: reading them
// through a JobSource and applying a change to a running term. The
// contract of the stores that keep them is in jobstore.go.

// sourceCheckEvery bounds how long the leader sleeps when it has run-time
// jobs, so that it applies a change within about a second.
const sourceCheckEvery = refreshEvery

// fetchJobs reads the run-time jobs (I/O only). ok is false on an error,
// which is logged; the current jobs then stay.
func (s *Scheduler) fetchJobs(ctx context.Context, log *slog.Logger) (jobs []Job, version int64, ok bool) {
	jobs, v, err := s.cfg.Source.Jobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("reading the jobs defined at run time failed; keeping the current ones", "err", err)
		}
		return nil, 0, false
	}
	return jobs, v, true
}

// diffJobs compares the run-time jobs of r's shard, of those read at
// version v (every shard's), with r.dyn and returns the jobs to add (new
// or changed) and the names to remove.
func (r *runner) diffJobs(jobs []Job, v int64, log *slog.Logger) (add []*jobState, remove []string) {
	r.srcVersion = v
	// Whether a run-time job gets its own metric series depends on the
	// whole fleet's size, file and run-time jobs together: a fleet of a
	// few file jobs and a million stored ones is a fleet of a million.
	own, _ := r.s.cfg.JobMetrics.selects(len(r.s.cfg.Jobs) + len(jobs))
	var seen map[string]bool // the names read, when there may be removals
	if len(r.dyn) > 0 {
		seen = make(map[string]bool, len(jobs))
	}
	for _, j := range jobs {
		if ShardOf(j.Name, r.shards) != r.shard {
			continue // another runner's
		}
		if r.fileJob[j.Name] {
			log.Error("a job defined at run time has the name of a job in the configuration file; ignored", "job", j.Name)
			continue
		}
		if seen != nil {
			seen[j.Name] = true
		}
		if cur, ok := r.dyn[j.Name]; ok && cur.Since.Equal(j.Since) {
			continue
		}
		if _, ok := r.dyn[j.Name]; ok {
			remove = append(remove, j.Name)
		}
		def := j // only the added ones escape: not every job read
		add = append(add, r.s.newJobState(&def, own(j.Name)))
	}
	for name := range r.dyn {
		if !seen[name] {
			remove = append(remove, name)
		}
	}
	return add, remove
}

// applySource applies a change of the run-time jobs to a running term:
// removed and changed jobs leave the heap, added and changed ones enter it
// from their first slot after their definition (or their last-fired slot,
// whichever is later).
func (r *runner) applySource(ctx context.Context, h *jobHeap, add []*jobState, remove []string, log *slog.Logger) {
	for _, name := range remove {
		if j, ok := r.dyn[name]; ok {
			if i := int(j.index); i >= 0 && i < h.Len() && (*h)[i] == j {
				heap.Remove(h, i)
			}
			delete(r.dyn, name)
			r.s.metrics.dropJob(name)
		}
	}
	if len(add) == 0 {
		if len(remove) > 0 {
			log.Info("jobs defined at run time changed", "removed", len(remove), "version", r.srcVersion)
		}
		return
	}
	names := make([]string, len(add))
	for i, j := range add {
		names[i] = j.Name
	}
	last, err := r.backend.LastFired(ctx, names)
	if last == nil && err != nil {
		last = map[string]Slot{}
	}
	now := SlotOf(r.storeNow())
	for _, j := range add {
		r.startJob(j, last, nil, now)
		r.dyn[j.Name] = j
		heap.Push(h, j)
	}
	log.Info("jobs defined at run time changed", "added_or_changed", len(add), "removed", len(remove), "version", r.srcVersion)
}

// newJobState builds a job's state and metrics; own: the job has its own
// metric series. The state keeps j.
func (s *Scheduler) newJobState(j *Job, own bool) *jobState {
	js := &jobState{}
	s.initJobState(js, j, own, nil)
	return js
}

// startJob sets a job's cursor at the start of a term, or when it is
// added during one: its last-fired slot (none: now), never before its
// definition.
func (r *runner) startJob(j *jobState, last map[string]Slot, damaged map[string]*DamageError, now Slot) {
	j.broken, j.retry, j.backoff, j.brokenTop = nil, false, 0, 0
	if c, ok := last[j.Name]; ok {
		j.cursor = c
	} else {
		// No history (or a damaged one): start from now, never backfill.
		j.cursor = now
	}
	if !j.Since.IsZero() {
		j.cursor = max(j.cursor, SlotOf(j.Since))
	}
	j.retention = r.memo.retention(j.Schedule, now)
	j.next = r.memo.next(j.Schedule, j.cursor)
}
