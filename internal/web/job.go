package web

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onetick/onetick"
)

// The page of one job, at /jobs/{job}: the job's state and deadline, its
// slots of the last day as a strip, its runs with their output, its dead
// letters, and the operator's actions (pause, resume, trigger, backfill,
// replay), which the page's script sends to the HTTP API with the token
// the operator types into it.

// JobPage is everything the page of one job shows.
type JobPage struct {
	Replica Replica
	// StoreTime is the store's clock when it was read.
	StoreTime time.Time
	// StoreError is set when the store could not be read.
	StoreError string
	// Job is the job's position in its schedule.
	Job onetick.JobStatus
	// Deadline is the job's deadline (zero: none).
	Deadline onetick.Deadline
	// Ledger is false when the store keeps no run ledger; LedgerNote
	// then says why.
	Ledger     bool
	LedgerNote string
	// Strip is the job's slots of the last day.
	Strip Strip
	// Runs are the job's newest ledger records, newest slot first;
	// MoreRuns is set when the ledger holds older ones.
	Runs     []onetick.Run
	MoreRuns bool
	// Workers is set when the store has a worker store: Dead and
	// DeadTotal are then read (DeadNote says what was not).
	Workers bool
	// Dead are the job's dead letters, oldest first; DeadTotal counts
	// them all when known (-1 when not).
	Dead      []DeadLetter
	DeadTotal int
	DeadNote  string
	// Changes is set when the API accepts changes (http.token is set).
	Changes bool
	// Refresh is how often the page refreshes itself (the handler sets it).
	Refresh time.Duration
}

// DeadLetter is a tick the workers gave up on, as the page lists it.
type DeadLetter struct {
	ID       string
	Tick     string
	Slot     onetick.Slot
	At       time.Time
	Attempts int
	Error    string
}

// JobSource fills the page of a job. An error wrapping
// onetick.ErrUnknownJob is a 404; a page returned with another error is
// shown with the error.
type JobSource interface {
	JobPage(ctx context.Context, job string) (*JobPage, error)
}

// JobSourceFunc adapts a function to a JobSource.
type JobSourceFunc func(ctx context.Context, job string) (*JobPage, error)

// JobPage calls f.
func (f JobSourceFunc) JobPage(ctx context.Context, job string) (*JobPage, error) { return f(ctx, job) }

// Page bounds of the job page's reads.
const (
	// DefaultRunsShown is how many records the runs list shows.
	DefaultRunsShown = 50
	// maxStripRecords bounds the records read for the strip (the ledger
	// keeps 1,000 per job by default).
	maxStripRecords = 5 * onetick.MaxRunLimit
)

// JobStore is the JobSource of a replica: the job's position from the
// store (onetick.ReadStatus), its ledger records, its dead letters and
// its deadline.
type JobStore struct {
	Backend onetick.Backend
	// For, if set, is the view that holds a job's state (with shards, its
	// shard's view); nil: Backend.
	For func(job string) (onetick.Backend, error)
	// AllJobs returns the jobs the page can show (the file's and the
	// jobs defined at run time).
	AllJobs func(ctx context.Context) ([]onetick.Job, error)
	// Ledger returns the ledger that holds job's records (with shards,
	// its shard's), or an error saying why the store keeps none (shown on
	// the page); nil: none.
	Ledger func(job string) (onetick.Ledger, error)
	// Dead returns the job's dead letters (at most limit, oldest first)
	// and how many it has (-1: unknown); nil: the store has no workers.
	Dead func(ctx context.Context, job string, limit int) ([]DeadLetter, int, error)
	// Deadline returns a job's deadline; nil: the job's own (Job.Deadline,
	// from its definition).
	Deadline func(onetick.Job) onetick.Deadline
	// Replica describes the replica serving the page; nil shows none.
	Replica func() Replica
	// Changes: the API accepts changes.
	Changes bool
	// RunsShown is how many records the runs list shows (default
	// DefaultRunsShown).
	RunsShown int
}

// JobPage reads the page of job.
func (s *JobStore) JobPage(ctx context.Context, name string) (*JobPage, error) {
	p := &JobPage{Changes: s.Changes, Job: onetick.JobStatus{Name: name}, DeadTotal: -1}
	if s.Replica != nil {
		p.Replica = s.Replica()
	}
	jobs, err := s.AllJobs(ctx)
	if err != nil {
		return p, err
	}
	var job onetick.Job
	found := false
	for _, j := range jobs {
		if j.Name == name {
			job, found = j, true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("%w %s", onetick.ErrUnknownJob, onetick.Excerpt(name))
	}
	p.Deadline = job.Deadline
	if s.Deadline != nil {
		p.Deadline = s.Deadline(job)
	}
	b := s.Backend
	if s.For != nil {
		if b, err = s.For(name); err != nil {
			return p, err
		}
	}
	st, err := onetick.ReadStatus(ctx, b, []onetick.Job{job}, 0)
	if err != nil {
		return p, err
	}
	p.StoreTime, p.Job = st.StoreTime, st.Jobs[0]
	if s.Ledger == nil {
		p.LedgerNote = "this store keeps no run ledger"
	} else if lg, err := s.Ledger(name); err != nil {
		p.LedgerNote = err.Error()
	} else {
		p.Ledger = true
		if err := s.readLedger(ctx, lg, job, p); err != nil {
			return p, err
		}
	}
	if s.Dead != nil {
		p.Workers = true
		dead, total, err := s.Dead(ctx, name, DefaultRunsShown)
		if err != nil {
			p.DeadNote = err.Error()
		}
		p.Dead, p.DeadTotal = dead, total
	}
	return p, nil
}

// readLedger reads the job's records newest first, back to the strip's
// window (at most maxStripRecords), and derives the strip and the runs
// list from them.
func (s *JobStore) readLedger(ctx context.Context, lg onetick.Ledger, job onetick.Job, p *JobPage) error {
	shown := s.RunsShown
	if shown <= 0 {
		shown = DefaultRunsShown
	}
	from := onetick.SlotOf(p.StoreTime.Add(-StripWindow))
	var runs []onetick.Run
	q := onetick.RunQuery{Job: job.Name, Limit: max(shown+1, 200)}
	for {
		page, err := lg.Runs(ctx, q)
		if errors.Is(err, onetick.ErrLedgerOff) {
			p.Ledger, p.LedgerNote = false, err.Error()
			return nil
		}
		if err != nil {
			return err
		}
		runs = append(runs, page.Runs...)
		n := len(page.Runs)
		if page.Next == "" || n == 0 || max(page.Runs[n-1].Slot, page.Runs[n-1].Through) < from || len(runs) >= maxStripRecords {
			if page.Next != "" || len(runs) > shown {
				p.MoreRuns = true
			}
			break
		}
		q.After, q.Limit = page.Next, onetick.MaxRunLimit
	}
	p.Runs = runs[:min(shown, len(runs))]
	p.Strip = BuildStrip(StripInput{Schedule: job.Schedule, Status: p.Job, Runs: runs, Deadline: p.Deadline, Now: p.StoreTime})
	return nil
}
