package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/internal/web"
)

// With `shards:` above 1 (docs/shards.md) everything keyed by a job is in
// its shard's view of the store: its controls, tick records, ledger and
// default stream. The operator's actions on a job (pause, resume,
// trigger, backfill, from the command line and the API) go to the view
// of the job's shard (stores.Handle.ForJob); the reads over every job
// (the control log, the jobs' states) read each view and merge. The jobs
// defined at run time are the fleet's: they are applied, removed and read
// through the store itself (Handle.Backend), never through a view. With
// one shard the only view is the store itself: today's path.

// fleetOps are the operator's actions over the shards: one onetick.Ops
// per shard's view, each knowing every job (the file's and the store's).
type fleetOps struct {
	ops []*onetick.Ops
}

// newFleetOps builds the actions of h's shards; mk fills in what every
// shard's Ops shares (the jobs, their source, the sink, the metrics)
// around the view's backend.
func newFleetOps(h *stores.Handle, mk func(view onetick.Backend) *onetick.Ops) (*fleetOps, error) {
	f := &fleetOps{ops: make([]*onetick.Ops, h.Shards())}
	for n := range f.ops {
		v, err := h.View(n)
		if err != nil {
			return nil, fmt.Errorf("shard %d of %d: %w", n, h.Shards(), err)
		}
		f.ops[n] = mk(v)
	}
	return f, nil
}

// For is the actions on job: over its shard's view.
func (f *fleetOps) For(job string) *onetick.Ops {
	return f.ops[onetick.ShardOf(job, len(f.ops))]
}

// Fleet is the actions that are not a job's (AllJobs): shard 0's Ops,
// which is the store's own with one shard.
func (f *fleetOps) Fleet() *onetick.Ops { return f.ops[0] }

// sharded reports whether there is more than one shard.
func (f *fleetOps) sharded() bool { return len(f.ops) > 1 }

// ControlLog is the newest n records of every shard's control log,
// newest first. A damaged log's records are kept and the damage returned
// (onetick.ErrDamaged), as one store's log is read.
func (f *fleetOps) ControlLog(ctx context.Context, n int) ([]onetick.ControlRecord, error) {
	if !f.sharded() {
		return f.ops[0].Backend.ControlLog(ctx, n)
	}
	var out []onetick.ControlRecord
	var damaged error
	for _, o := range f.ops {
		recs, err := o.Backend.ControlLog(ctx, n)
		if err != nil && !errors.Is(err, onetick.ErrDamaged) {
			return nil, err
		}
		if err != nil && damaged == nil {
			damaged = err
		}
		out = append(out, recs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > n {
		out = out[:n]
	}
	return out, damaged
}

// JobStates is every job's state (onetick.ReadStatus's Jobs), each read
// from its shard's view, in the order of jobs.
func (f *fleetOps) JobStates(ctx context.Context, jobs []onetick.Job) ([]onetick.JobStatus, error) {
	if !f.sharded() {
		st, err := onetick.ReadStatus(ctx, f.ops[0].Backend, jobs, 0)
		if err != nil {
			return nil, err
		}
		return st.Jobs, nil
	}
	per := make([][]onetick.Job, len(f.ops))
	for _, j := range jobs {
		n := onetick.ShardOf(j.Name, len(f.ops))
		per[n] = append(per[n], j)
	}
	byName := map[string]onetick.JobStatus{}
	for n, js := range per {
		if len(js) == 0 {
			continue
		}
		st, err := onetick.ReadStatus(ctx, f.ops[n].Backend, js, 0)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", n, err)
		}
		for _, s := range st.Jobs {
			byName[s.Name] = s
		}
	}
	out := make([]onetick.JobStatus, 0, len(jobs))
	for _, j := range jobs {
		if s, ok := byName[j.Name]; ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// jobOps are the API's actions on job: over its shard's view.
func (a *api) jobOps(job string) *onetick.Ops {
	if a.shards == nil {
		return a.ops
	}
	return a.shards.For(job)
}

// fleet is the API's actions over every shard (one: a.ops).
func (a *api) fleet() *fleetOps {
	if a.shards == nil {
		return &fleetOps{ops: []*onetick.Ops{a.ops}}
	}
	return a.shards
}

// replicaOf names the replica of s and says whether it leads now: with
// shards, whether it leads any shard (its Balancer's).
func replicaOf(s *onetick.Scheduler) (name string, leading bool) {
	if e := s.Elector(); e != nil {
		return e.Holder(), e.IsLeader()
	}
	b := s.Balancer()
	return b.Holder(), len(b.Led()) > 0
}

// replica is this replica for the status pages.
func (a *api) replica() web.Replica {
	name, leading := replicaOf(a.sched)
	return web.Replica{Name: name, IsLeader: leading, Problems: a.sched.Problems()}
}
