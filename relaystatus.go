package onetick

import (
	"context"
	"errors"
	"fmt"
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

// natsBacklogNote is the Note of a NATS relay whose store keeps no run
// ledger: JetStream's consumers are not onetick's, and nothing counts the
// ticks not yet published.
const natsBacklogNote = "not known: the run ledger is off; ticks not yet published wait in the job's stream (worker_relay_* metrics)"

// natsLedgerNote is the Note of a NATS relay's backlog read from the run
// ledger.
const natsLedgerNote = "claimed, not yet published to JetStream (the run ledger's enqueued, running and retrying records; your consumers' backlog is JetStream's)"

// natsBacklog counts the ticks of jobs claimed and not yet published: the
// ledger's records (the newest MaxRunLimit per job) that are enqueued,
// running or retrying.
func natsBacklog(ctx context.Context, b Backend, jobs []string) (n int64, note string, err error) {
	lg, ok := b.(Ledger)
	if !ok {
		return 0, natsBacklogNote, errNoLedger
	}
	if len(jobs) > MaxNATSBacklogJobs {
		// Each job is one read of up to MaxRunLimit records: a status
		// page refresh must stay cheap however many jobs a relay has.
		return 0, fmt.Sprintf("not counted: %d jobs relay to it, more than %d (the worker_relay_* metrics tell)", len(jobs), MaxNATSBacklogJobs), errNoLedger
	}
	for _, j := range jobs {
		page, err := lg.Runs(ctx, RunQuery{Job: j, Limit: MaxRunLimit})
		if errors.Is(err, ErrLedgerOff) {
			return 0, natsBacklogNote, errNoLedger
		}
		if err != nil {
			return 0, "", err
		}
		for _, r := range page.Runs {
			switch r.Fate {
			case FateEnqueued, FateRunning, FateRetrying:
				n++
			}
		}
	}
	return n, natsLedgerNote, nil
}

var errNoLedger = errors.New("no run ledger")

// MaxNATSBacklogJobs is the most jobs of one NATS relay whose backlog the
// status counts (one ledger read each); beyond it the backlog is n/a.
const MaxNATSBacklogJobs = 50

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
				// Published by a worker from the job's stream: counted
				// from the ledger once the jobs are known (below).
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
		if rs.Kind == RelayNATS {
			n, note, err := natsBacklog(ctx, b, rs.Jobs)
			switch {
			case errors.Is(err, errNoLedger):
				rs.Note = note
			case err != nil:
				rs.Error = err.Error()
			default:
				rs.Backlog, rs.Note = &n, note
			}
		}
		res[i] = *rs
	}
	return res
}
