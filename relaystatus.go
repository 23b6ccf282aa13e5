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
			if bl, ok := b.(RelayBacklogger); ok {
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
