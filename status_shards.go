package onetick

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
)

// ShardStatus is one shard's lease (Status.Shards): who leads it, its
// epoch, how long the lease has left, how many of the jobs it holds, and
// its newest terms.
type ShardStatus struct {
	Shard   int         `json:"shard"`
	Leader  *LeaderView `json:"leader"`
	Jobs    int         `json:"jobs"`
	History []Term      `json:"history"`
}

// ReplicaShards is a replica that holds shard leases and the shards it
// leads (Status.Replicas). Replicas leading no shard are not in the
// leases, so not listed.
type ReplicaShards struct {
	Holder string `json:"holder"`
	Shards []int  `json:"shards"`
}

// ReadShardedStatus reads the status of a store with len(views) shards,
// views[n] being shard n's view (docs/shards.md, "Who reads the fleet"):
// each shard's part is ReadStatus over its view with the jobs ShardOf puts
// in it, so a job's position, gap and damage are read where its shard
// keeps them. The parts are merged: Jobs in the order of jobs, Damage and
// Relays of every shard (a relay's backlog summed over the shards),
// Controls newest first (at most history); Shards lists each shard's
// lease and terms and Replicas who leads which, while Leader and History,
// one lease's, stay empty. One view is ReadStatus.
func ReadShardedStatus(ctx context.Context, views []Backend, jobs []Job, history int) (*Status, error) {
	if len(views) == 1 {
		return ReadStatus(ctx, views[0], jobs, history)
	}
	parts, per, err := readShards(ctx, views, jobs, history)
	if err != nil {
		return nil, err
	}
	st := &Status{StoreTime: parts[0].StoreTime, History: []Term{}, Jobs: make([]JobStatus, 0, len(jobs)),
		Damage: []*DamageError{}, Controls: []ControlRecord{}}
	byName := map[string]JobStatus{}
	var relays [][]RelayStatus
	holders := map[string][]int{}
	for n, p := range parts {
		st.Shards = append(st.Shards, ShardStatus{Shard: n, Leader: p.Leader, Jobs: len(per[n]), History: p.History})
		if p.Leader != nil {
			holders[p.Leader.Holder] = append(holders[p.Leader.Holder], n)
		}
		for _, j := range p.Jobs {
			byName[j.Name] = j
		}
		st.Damage = append(st.Damage, p.Damage...)
		st.Controls = append(st.Controls, p.Controls...)
		relays = append(relays, p.Relays)
	}
	for _, j := range jobs {
		st.Jobs = append(st.Jobs, byName[j.Name])
	}
	// Newest first; a stable sort keeps each shard's own order on ties.
	slices.SortStableFunc(st.Controls, func(a, b ControlRecord) int { return b.At.Compare(a.At) })
	st.Controls = st.Controls[:min(len(st.Controls), max(history, 0))]
	st.Relays = mergeRelays(relays)
	for h, led := range holders {
		st.Replicas = append(st.Replicas, ReplicaShards{Holder: h, Shards: led})
	}
	slices.SortFunc(st.Replicas, func(a, b ReplicaShards) int { return cmp.Compare(a.Holder, b.Holder) })
	return st, nil
}

// ReadShardedRelays is ReadRelays over each shard's view with its jobs,
// merged as ReadShardedStatus merges them.
func ReadShardedRelays(ctx context.Context, views []Backend, jobs []Job) []RelayStatus {
	if len(views) == 1 {
		return readRelays(ctx, views[0], jobs)
	}
	per := jobsByShard(jobs, len(views))
	var relays [][]RelayStatus
	for n, v := range views {
		relays = append(relays, readRelays(ctx, v, per[n]))
	}
	return mergeRelays(relays)
}

// readShards reads each shard's status with its jobs.
func readShards(ctx context.Context, views []Backend, jobs []Job, history int) ([]*Status, [][]Job, error) {
	per := jobsByShard(jobs, len(views))
	parts := make([]*Status, len(views))
	for n, v := range views {
		st, err := ReadStatus(ctx, v, per[n], history)
		if err != nil {
			return nil, nil, fmt.Errorf("shard %d: %w", n, err)
		}
		parts[n] = st
	}
	return parts, per, nil
}

// jobsByShard splits jobs by ShardOf, keeping their order.
func jobsByShard(jobs []Job, shards int) [][]Job {
	per := make([][]Job, shards)
	for _, j := range jobs {
		n := ShardOf(j.Name, shards)
		per[n] = append(per[n], j)
	}
	return per
}

// mergeRelays merges the relays of each shard by kind and queue: their
// jobs, the first error or note, and one backlog. A relay's queue is the
// target's (an asynq queue, a River queue, a NATS stream), shared by
// every shard's jobs, so each shard read the same backlog: the largest
// reading is kept (they differ only by when they were taken), unknown
// only if no shard's is known.
func mergeRelays(parts [][]RelayStatus) []RelayStatus {
	type key struct{ kind, queue string }
	byKey := map[key]*RelayStatus{}
	var out []*RelayStatus
	for _, rs := range parts {
		for _, r := range rs {
			k := key{r.Kind, r.Queue}
			m := byKey[k]
			if m == nil {
				c := r
				c.Jobs = slices.Clone(r.Jobs)
				if r.Backlog != nil {
					n := *r.Backlog
					c.Backlog = &n
				}
				byKey[k] = &c
				out = append(out, &c)
				continue
			}
			m.Jobs = append(m.Jobs, r.Jobs...)
			switch {
			case r.Backlog == nil:
			case m.Backlog == nil:
				n := *r.Backlog
				m.Backlog = &n
			default:
				*m.Backlog = max(*m.Backlog, *r.Backlog)
			}
			m.Error = cmp.Or(m.Error, r.Error)
			m.Note = cmp.Or(m.Note, r.Note)
		}
	}
	sort.Slice(out, func(a, c int) bool {
		if out[a].Kind != out[c].Kind {
			return out[a].Kind < out[c].Kind
		}
		return out[a].Queue < out[c].Queue
	})
	res := make([]RelayStatus, len(out))
	for i, r := range out {
		sort.Strings(r.Jobs)
		res[i] = *r
	}
	return res
}
