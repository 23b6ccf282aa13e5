package onetick

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
