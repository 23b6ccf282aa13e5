// Package web serves onetick's status page: at "/" of a replica's HTTP
// listener, the leader and its epoch, the recent leadership terms, this
// replica and the damage it ran into, the relays the jobs hand their ticks
// to with their backlogs, and a table of jobs.
//
// The page is read-only (GET and HEAD only) and self-contained: one HTML
// response with its style and script inline, built by html/template from
// embedded files, so it needs nothing beyond the replica (no CDN, no
// fonts, no build step) and every value is escaped.
//
// What it shows is a view model, Page, that a Source fills for each
// request. Store is the Source a replica uses: it reads the store as the
// /status endpoint does, so every replica shows the same fleet. Tests
// render fixed Pages through SourceFunc.
//
// Paging: at most PageSize jobs are shown per page, in configuration
// order; ?job=SUBSTRING keeps the jobs whose name contains it (any case),
// ?page=N picks a page, ?attention=1 keeps the jobs that need a look (a
// gap, damage, a pause, a failed last run, dead letters). The default view
// reads only the page's jobs from the store, so a refresh costs the same
// with 100 jobs or 100,000; ?attention=1 reads every matching job, like
// `onetick status`.
//
// Refresh: an inline script re-fetches the same URL every few seconds
// (?refresh=SECONDS, default 5) and swaps the parts that change, keeping
// the scroll position and the filter being typed. When the replica stops
// answering, the page keeps the last data under a "not updated since"
// banner and goes on trying, where a meta refresh would have replaced it
// with the browser's error page and stopped. It skips refreshes while the
// tab is hidden. Without script, a <noscript> meta refresh reloads it.
package web

import (
	"context"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/onetick/onetick"
)

// PageSize is how many jobs one page shows.
const PageSize = 100

// Page is everything the status page shows.
type Page struct {
	// Replica is the replica serving the page.
	Replica Replica
	// StoreTime is the store's clock when it was read: the "now" of the
	// relative times on the page.
	StoreTime time.Time
	// StoreError is set when the store could not be read; the page then
	// shows what the replica knows by itself.
	StoreError string
	// Leader is the current lease; nil when nobody leads.
	Leader *onetick.LeaderView
	// Terms are the recent leadership terms, newest first.
	Terms []onetick.Term
	// Shards and Replicas are set with more than one shard: each shard's
	// lease ("who leads which shard") and the shards each replica leads
	// (onetick.ReadShardedStatus); Leader and Terms are then empty.
	Shards   []onetick.ShardStatus
	Replicas []onetick.ReplicaShards
	// Jobs are the rows of this page.
	Jobs []Job
	// Damage is damaged store state that belongs to no job (lease, epoch,
	// history, tick records); a job's own damage is on its row.
	Damage []*onetick.DamageError
	// Relays are the relays every job uses (not only this page's), with
	// the tasks waiting in each, as `onetick status` shows them.
	Relays []onetick.RelayStatus
	// Total is the number of configured jobs; Matched the number that
	// match Query (before paging).
	Total, Matched int
	Query          Query
	// PageSize is the number of rows per page (default PageSize).
	PageSize int
	// Workers shows the last run and dead letter columns, which are
	// shown anyway once a row has a value for them.
	Workers bool
	// Refresh is how often the page refreshes itself (the handler sets it).
	Refresh time.Duration
}

// Replica describes the replica serving the page.
type Replica struct {
	Name     string
	IsLeader bool
	// Problems is the damage this replica ran into and has not seen
	// repaired (onetick.Scheduler.Problems).
	Problems []onetick.Problem
}

// Job is one row of the jobs table: the job's position in its schedule as
// the store has it, and what other parts of onetick know about it. The
// optional fields are filled by whoever knows them (see Store.Annotate);
// nil means "nothing to show".
type Job struct {
	onetick.JobStatus
	// Paused is set while the job is paused.
	Paused *Pause
	// LastRun is the outcome of the job's most recent run by a worker.
	LastRun *Run
	// DeadLetters counts the job's ticks that the workers gave up on.
	DeadLetters *int64
}

// Pause says who paused a job, when and why.
type Pause struct {
	Since  time.Time
	By     string
	Reason string
}

// Run is the outcome of one run of a job.
type Run struct {
	At time.Time
	// OK is true for a successful run.
	OK bool
	// Outcome says what happened in a few words ("ok", "failed: timeout").
	Outcome string
}

// Attention reports whether the row needs a look: a gap, damage, a pause,
// a failed last run or dead letters.
func (j Job) Attention() bool {
	return j.Gap > 0 || len(j.Damage) > 0 || j.Paused != nil ||
		(j.LastRun != nil && !j.LastRun.OK) || (j.DeadLetters != nil && *j.DeadLetters > 0)
}

// Query is what the reader asked for.
type Query struct {
	// Job keeps the jobs whose name contains it, in any case.
	Job string
	// Page is the page to show, from 1.
	Page int
	// Attention keeps the jobs that need a look (Job.Attention).
	Attention bool
}

// maxFilter bounds the filter: job names are at most 200 bytes.
const maxFilter = 200

const maxPage = 1 << 30

// ParseQuery reads a Query from URL parameters. It never fails: what it
// cannot use it ignores, so a bad link still shows a page.
func ParseQuery(v url.Values) Query {
	q := Query{Job: strings.TrimSpace(v.Get("job")), Page: 1}
	if len(q.Job) > maxFilter {
		q.Job = strings.ToValidUTF8(q.Job[:maxFilter], "")
	}
	if n, err := strconv.Atoi(v.Get("page")); err == nil && n > 1 {
		// Bounded so that row numbers (page × size) cannot overflow; a
		// page past the end shows the last one anyway.
		q.Page = min(n, maxPage)
	}
	switch strings.ToLower(v.Get("attention")) {
	case "1", "true", "on", "yes":
		q.Attention = true
	}
	return q
}

// Matches reports whether a job name passes the filter.
func (q Query) Matches(name string) bool {
	return q.Job == "" || strings.Contains(strings.ToLower(name), strings.ToLower(q.Job))
}

// window clamps q.Page into the pages of n rows of size each and returns
// the bounds of its rows.
func (q *Query) window(n, size int) (lo, hi int) {
	pages := max(1, (n+size-1)/size)
	q.Page = min(max(q.Page, 1), pages)
	lo = (q.Page - 1) * size
	return lo, min(lo+size, n)
}

// Source fills the page for a query. A Page returned with an error is
// shown with the error (the replica's own part stays useful when the store
// is unreachable).
type Source interface {
	Page(ctx context.Context, q Query) (*Page, error)
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(ctx context.Context, q Query) (*Page, error)

// Page calls f.
func (f SourceFunc) Page(ctx context.Context, q Query) (*Page, error) { return f(ctx, q) }

func (p *Page) size() int {
	if p.PageSize > 0 {
		return p.PageSize
	}
	return PageSize
}

// Pages is the number of pages of the matching jobs.
func (p *Page) Pages() int { return max(1, (p.Matched+p.size()-1)/p.size()) }

// First and Last number the rows of this page among the matching jobs,
// from 1 (First is 0 when there are none).
func (p *Page) First() int {
	if len(p.Jobs) == 0 {
		return 0
	}
	return (p.Query.Page-1)*p.size() + 1
}

// Last is the number of this page's last row.
func (p *Page) Last() int { return p.First() + len(p.Jobs) - 1 }

// URL is the page's address with page n of the same query and refresh.
func (p *Page) URL(n int) template.URL {
	v := url.Values{}
	if p.Query.Job != "" {
		v.Set("job", p.Query.Job)
	}
	if p.Query.Attention {
		v.Set("attention", "1")
	}
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	if p.CustomRefresh() {
		v.Set("refresh", strconv.Itoa(int(p.Refresh/time.Second)))
	}
	if len(v) == 0 {
		return "./"
	}
	// Built from url.Values, so it is a well-formed query: safe as is.
	return template.URL("?" + v.Encode())
}

// CustomRefresh reports whether the page refreshes at another pace than
// the default, which its links and filter then keep.
func (p *Page) CustomRefresh() bool { return p.Refresh > 0 && p.Refresh != DefaultRefresh }

// ShowWorkers reports whether the last run and dead letter columns show.
func (p *Page) ShowWorkers() bool {
	if p.Workers {
		return true
	}
	for _, j := range p.Jobs {
		if j.LastRun != nil || j.DeadLetters != nil {
			return true
		}
	}
	return false
}

// current reports whether t is the term of the lease held now.
func (p *Page) current(t onetick.Term) bool {
	return p.Leader != nil && t.Epoch == p.Leader.Epoch && t.Holder == p.Leader.Holder && t.End.IsZero()
}

// Blocking reports whether one of the replica's problems stops its work.
func (r Replica) Blocking() bool {
	for _, p := range r.Problems {
		if p.Blocking {
			return true
		}
	}
	return false
}
