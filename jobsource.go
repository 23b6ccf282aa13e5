package onetick

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Jobs can be defined at run time, kept in the store beside the jobs of
// the configuration file (`onetick jobs apply`). The leader reads them at
// the start of its term and again whenever their version changes (checked
// at least every second), and applies a change without a restart.

// StoredJob is one job definition kept in the store.
type StoredJob struct {
	// Set is the named set the job belongs to: `jobs apply` makes a set
	// exactly the jobs of a file.
	Set  string `json:"set"`
	Name string `json:"name"`
	// Def is the job's definition as the configuration file has it (JSON);
	// the store keeps it opaque.
	Def json.RawMessage `json:"def"`
	// Since is the store's time when this definition was applied: its
	// first slot is after it, so a new or changed job never fires a slot
	// from before its definition, and a job removed and added again does
	// not fire the slots it missed.
	Since time.Time `json:"since"`
}

// JobsDiff is what an apply or remove changed (or, in a dry run, would).
type JobsDiff struct {
	Added     []string `json:"added"`
	Changed   []string `json:"changed"`
	Removed   []string `json:"removed"`
	Unchanged []string `json:"unchanged"`
	// Version is the jobs' version after the change.
	Version int64 `json:"version"`
	DryRun  bool  `json:"dry_run"`
}

// ValidateJobSet checks the name of a job set; every JobStore refuses
// another with this *InputError.
func ValidateJobSet(set string) error {
	if set == "" || len(set) > 100 || strings.ContainsAny(set, "|{}") || !utf8.ValidString(set) ||
		strings.IndexFunc(set, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return &InputError{Msg: fmt.Sprintf("job set %q: want 1 to 100 bytes of UTF-8, no spaces, control characters, | or braces", set)}
	}
	return nil
}

// DiffJobs is the decision of an ApplyJobs, for stores that make it in Go:
// cur holds what the store keeps (set and definition) under each name of
// jobs and under each current member of set. It returns the difference
// (lists sorted; Version and DryRun left to the caller) and the jobs to
// write (new or changed), or an *InputError when a name belongs to another
// set.
func DiffJobs(set string, jobs []StoredJob, cur map[string]StoredJob) (JobsDiff, []StoredJob, error) {
	d := JobsDiff{Added: []string{}, Changed: []string{}, Removed: []string{}, Unchanged: []string{}}
	keep := make(map[string]bool, len(jobs))
	var write []StoredJob
	for _, j := range jobs {
		keep[j.Name] = true
		c, ok := cur[j.Name]
		switch {
		case ok && c.Set != set:
			return JobsDiff{}, nil, &InputError{Msg: fmt.Sprintf("job %q belongs to the set %q, not %q: remove it there first, or rename it", j.Name, c.Set, set)}
		case ok && bytes.Equal(c.Def, j.Def):
			d.Unchanged = append(d.Unchanged, j.Name)
			continue
		case ok:
			d.Changed = append(d.Changed, j.Name)
		default:
			d.Added = append(d.Added, j.Name)
		}
		write = append(write, j)
	}
	for name, c := range cur {
		if c.Set == set && !keep[name] {
			d.Removed = append(d.Removed, name)
		}
	}
	for _, l := range [][]string{d.Added, d.Changed, d.Removed, d.Unchanged} {
		sort.Strings(l)
	}
	return d, write, nil
}

// JobStore keeps job definitions in the store. Backends that support jobs
// defined at run time implement it.
type JobStore interface {
	// ApplyJobs makes set exactly jobs (each with Name and Def), in one
	// atomic step: new names are added and changed definitions replaced
	// (both with Since = the store's now), names no longer in jobs are
	// removed; with dryRun nothing is written. A name that belongs to
	// another set is refused (*InputError) and nothing is written.
	ApplyJobs(ctx context.Context, set string, jobs []StoredJob, dryRun bool) (JobsDiff, error)
	// RemoveJobs removes the named jobs of set. A removed job's last-fired
	// slot stays in the store.
	RemoveJobs(ctx context.Context, set string, names []string) (JobsDiff, error)
	// StoredJobs returns every stored job and the jobs' version.
	StoredJobs(ctx context.Context) ([]StoredJob, int64, error)
	// JobsVersion returns the version alone (cheap); it increases with
	// every change.
	JobsVersion(ctx context.Context) (int64, error)
}

// JobSource gives the scheduler the jobs defined at run time.
type JobSource interface {
	// Jobs returns the jobs (each Since set) and their version. A job that
	// cannot be used (its definition does not parse, its name is a file
	// job's) is left out and logged by the source.
	Jobs(ctx context.Context) ([]Job, int64, error)
	Version(ctx context.Context) (int64, error)
}

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

// diffJobs compares the run-time jobs read at version v with s.dyn and
// returns the jobs to add (new or changed) and the names to remove.
func (s *Scheduler) diffJobs(jobs []Job, v int64, log *slog.Logger) (add []*jobState, remove []string) {
	s.srcVersion = v
	// Whether a run-time job gets its own metric series depends on the
	// whole fleet's size, file and run-time jobs together: a fleet of a
	// few file jobs and a million stored ones is a fleet of a million.
	own, _ := s.cfg.JobMetrics.selects(len(s.jobs) + len(jobs))
	var seen map[string]bool // the names read, when there may be removals
	if len(s.dyn) > 0 {
		seen = make(map[string]bool, len(jobs))
	}
	for _, j := range jobs {
		if s.fileJob[j.Name] {
			log.Error("a job defined at run time has the name of a job in the configuration file; ignored", "job", j.Name)
			continue
		}
		if seen != nil {
			seen[j.Name] = true
		}
		if cur, ok := s.dyn[j.Name]; ok && cur.Since.Equal(j.Since) {
			continue
		}
		if _, ok := s.dyn[j.Name]; ok {
			remove = append(remove, j.Name)
		}
		add = append(add, s.newJobState(withJobDefaults(j, s.lease.TTL), own(j.Name)))
	}
	for name := range s.dyn {
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
func (s *Scheduler) applySource(ctx context.Context, h *jobHeap, add []*jobState, remove []string, log *slog.Logger) {
	for _, name := range remove {
		if j, ok := s.dyn[name]; ok {
			if j.index >= 0 && j.index < h.Len() && (*h)[j.index] == j {
				heap.Remove(h, j.index)
			}
			delete(s.dyn, name)
			s.metrics.dropJob(name)
		}
	}
	if len(add) == 0 {
		if len(remove) > 0 {
			log.Info("jobs defined at run time changed", "removed", len(remove), "version", s.srcVersion)
		}
		return
	}
	names := make([]string, len(add))
	for i, j := range add {
		names[i] = j.Name
	}
	last, err := s.cfg.Backend.LastFired(ctx, names)
	if last == nil && err != nil {
		last = map[string]Slot{}
	}
	now := SlotOf(s.storeNow())
	for _, j := range add {
		s.startJob(j, last, nil, now)
		s.dyn[j.Name] = j
		heap.Push(h, j)
	}
	log.Info("jobs defined at run time changed", "added_or_changed", len(add), "removed", len(remove), "version", s.srcVersion)
}

// newJobState builds a job's state and metrics; own: the job has its own
// metric series.
func (s *Scheduler) newJobState(j Job, own bool) *jobState {
	return &jobState{Job: j, index: -1, metrics: s.metrics.forJob(j.Name, j.Prefer, own)}
}

// startJob sets a job's cursor at the start of a term, or when it is
// added during one: its last-fired slot (none: now), never before its
// definition.
func (s *Scheduler) startJob(j *jobState, last map[string]Slot, damaged map[string]*DamageError, now Slot) {
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
	j.retention = s.memo.retention(j.Schedule, now)
	j.next = s.memo.next(j.Schedule, j.cursor)
}
