package web

import (
	"context"

	"github.com/onetick/onetick"
)

// DefaultHistory is how many leadership terms the timeline shows.
const DefaultHistory = 20

// Store is the Source of a replica: it reads the leader, the terms and the
// jobs' positions from the store with onetick.ReadStatus, as /status does,
// so every replica shows the same fleet.
type Store struct {
	Backend onetick.Backend
	// Views are the shards' views of the store, in shard order, with more
	// than one shard (stores.Handle.View): the page then reads each job
	// from its shard's view and shows who leads which shard. Nil: Backend
	// is the one shard.
	Views []onetick.Backend
	// Jobs are the configured jobs, in the order the page lists them.
	Jobs []onetick.Job
	// AllJobs, when set, is called on every read instead of using Jobs
	// (the file's jobs and the jobs defined at run time).
	AllJobs func(ctx context.Context) ([]onetick.Job, error)
	// Replica describes the replica serving the page; nil shows none.
	Replica func() Replica
	// History is how many terms the timeline shows (default DefaultHistory).
	History int
	// PageSize is the number of rows per page (default PageSize).
	PageSize int
	// Annotate, when set, fills the optional fields of rows just read from
	// the store (Paused, LastRun, DeadLetters), before ?attention=1 looks at
	// them: the controls and the workers plug in here, and the page shows
	// what they fill. An error is shown like a store error.
	Annotate func(ctx context.Context, rows []Job) error
	// Workers shows the last run and dead letter columns even when no row
	// on the page has a value for them.
	Workers bool
}

// Page reads the page for q. In the default view it reads only the jobs of
// the page; with q.Attention it reads every job that matches the filter.
func (s *Store) Page(ctx context.Context, q Query) (*Page, error) {
	size := s.PageSize
	if size <= 0 {
		size = PageSize
	}
	history := s.History
	if history <= 0 {
		history = DefaultHistory
	}
	jobs := s.Jobs
	if s.AllJobs != nil {
		var err error
		if jobs, err = s.AllJobs(ctx); err != nil {
			return &Page{PageSize: size, Workers: s.Workers, Query: q}, err
		}
	}
	p := &Page{Total: len(jobs), PageSize: size, Workers: s.Workers}
	if s.Replica != nil {
		p.Replica = s.Replica()
	}
	matched := jobs
	if q.Job != "" {
		matched = nil
		for _, j := range jobs {
			if q.Matches(j.Name) {
				matched = append(matched, j)
			}
		}
	}
	read := matched
	if !q.Attention {
		lo, hi := q.window(len(matched), size)
		read = matched[lo:hi]
	}
	p.Query = q
	views := s.Views
	if len(views) < 2 {
		views = []onetick.Backend{s.Backend}
	}
	st, err := onetick.ReadShardedStatus(ctx, views, read, history)
	if err != nil {
		p.Matched = len(matched)
		return p, err
	}
	p.StoreTime, p.Leader, p.Terms = st.StoreTime, st.Leader, st.History
	p.Shards, p.Replicas = st.Shards, st.Replicas
	if len(p.Shards) > 0 {
		// Each shard's count of every job, not of this page's.
		for i := range p.Shards {
			p.Shards[i].Jobs = 0
		}
		for _, j := range jobs {
			p.Shards[onetick.ShardOf(j.Name, len(p.Shards))].Jobs++
		}
	}
	// Every job's relays: the page's jobs are a window of them.
	p.Relays = onetick.ReadShardedRelays(ctx, views, jobs)
	for _, d := range st.Damage {
		if d.Job == "" {
			p.Damage = append(p.Damage, d)
		}
	}
	rows := make([]Job, len(st.Jobs))
	for i, js := range st.Jobs {
		rows[i] = Job{JobStatus: js}
	}
	if s.Annotate != nil {
		if err := s.Annotate(ctx, rows); err != nil {
			p.Matched = len(matched)
			return p, err
		}
	}
	if !q.Attention {
		p.Jobs, p.Matched = rows, len(matched)
		return p, nil
	}
	var need []Job
	for _, r := range rows {
		if r.Attention() {
			need = append(need, r)
		}
	}
	lo, hi := p.Query.window(len(need), size)
	p.Jobs, p.Matched = need[lo:hi], len(need)
	return p, nil
}
