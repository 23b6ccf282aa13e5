package onetick

import (
	"context"
	"sort"
)

// RelayStatus is one relay the jobs use (a kind and a queue) and its
// backlog in the other system.
type RelayStatus struct {
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// Jobs are the jobs relayed to it, sorted.
	Jobs []string `json:"jobs"`
	// Backlog is how many of its tasks wait, not yet taken by the other
	// system's workers; nil when the store cannot tell (it is no
	// RelayBacklogger, or reading failed: see Error).
	Backlog *int64 `json:"backlog"`
	Error   string `json:"error,omitempty"`
	// Note says why the backlog is not known when no store could tell
	// (NATS JetStream).
	Note string `json:"note,omitempty"`
}

// natsBacklogNote is the Note of a NATS relay: JetStream's consumers are
// not onetick's, and the store holds no hand-off to count.
const natsBacklogNote = "not known: JetStream's consumers are yours; ticks not yet published wait in the job's stream (worker_relay_* metrics)"

// ReadRelays returns the relays jobs use, by kind and queue, with their
// backlogs as far as b can tell (Status.Relays, for every job: the status
// page reads its jobs a page at a time).
func ReadRelays(ctx context.Context, b Backend, jobs []Job) []RelayStatus {
	return readRelays(ctx, b, jobs)
}

// readRelays returns the relays jobs use, by kind and queue, with their
// backlogs as far as b can tell.
func readRelays(ctx context.Context, b Backend, jobs []Job) []RelayStatus {
	type key struct{ kind, queue string }
	byKey := map[key]*RelayStatus{}
	var out []*RelayStatus
	for _, j := range jobs {
		if j.Relay == nil {
			continue
		}
		r := *j.Relay
		if r.Queue == "" {
			r.Queue = DefaultRelayQueue
		}
		k := key{r.Kind, r.Queue}
		rs := byKey[k]
		if rs == nil {
			rs = &RelayStatus{Kind: r.Kind, Queue: r.Queue}
			byKey[k] = rs
			out = append(out, rs)
			if r.Kind == RelayNATS {
				// Published by a worker from the job's stream: no store
				// holds the other side's backlog.
				rs.Note = natsBacklogNote
			} else if bl, ok := b.(RelayBacklogger); ok {
				if n, err := bl.RelayBacklog(ctx, r); err != nil {
					rs.Error = err.Error()
				} else {
					rs.Backlog = &n
				}
			}
		}
		rs.Jobs = append(rs.Jobs, j.Name)
	}
	sort.Slice(out, func(a, c int) bool {
		if out[a].Kind != out[c].Kind {
			return out[a].Kind < out[c].Kind
		}
		return out[a].Queue < out[c].Queue
	})
	res := make([]RelayStatus, len(out))
	for i, rs := range out {
		sort.Strings(rs.Jobs)
		res[i] = *rs
	}
	return res
}
