package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/worker"
)

// workInspector is what the commands and the API read of the workers of
// group (dead letters, last runs) and how they replay a dead letter: the
// store's worker store with one shard; with more, every shard's, merged
// (shardsInspector).
func workInspector(h *stores.Handle, group string) (worker.Inspector, error) {
	if h.Shards() == 1 {
		return h.WorkStore(group)
	}
	in := shardsInspector{group: group, shards: make([]stores.WorkStore, h.Shards())}
	for n := range in.shards {
		ws, err := h.ShardWorkStore(n, group)
		if err != nil {
			return nil, err
		}
		in.shards[n] = ws
	}
	return in, nil
}

// shardsInspector merges the worker stores of every shard's view. A dead
// letter's id is its shard's, two digits and a slash, then the shard's
// own id ("03/1712...-0"): Replay finds the shard from it, and a listing
// goes shard by shard, each oldest first, the cursor naming where it
// stopped.
type shardsInspector struct {
	group  string
	shards []stores.WorkStore
}

var _ worker.Inspector = shardsInspector{}

// shardID is the fleet's id of shard n's dead letter id.
func shardID(n int, id string) string { return fmt.Sprintf("%02d/%s", n, id) }

// splitID splits a fleet id into its shard and the shard's id.
func (s shardsInspector) splitID(id string) (int, string, bool) {
	nn, rest, ok := strings.Cut(id, "/")
	n, err := strconv.Atoi(nn)
	if !ok || err != nil || n < 0 || n >= len(s.shards) || len(nn) < 2 {
		return 0, "", false
	}
	return n, rest, true
}

// Status asks each job's shard about it; Dead is every shard's total.
func (s shardsInspector) Status(ctx context.Context, jobs []string) (worker.Status, error) {
	per := make([][]string, len(s.shards))
	for _, j := range jobs {
		n := onetick.ShardOf(j, len(s.shards))
		per[n] = append(per[n], j)
	}
	byJob := map[string]worker.JobStatus{}
	var out worker.Status
	for n, ws := range s.shards {
		st, err := ws.Status(ctx, per[n])
		if err != nil {
			return worker.Status{}, fmt.Errorf("shard %d: %w", n, err)
		}
		if out.StoreTime.IsZero() {
			out.StoreTime = st.StoreTime
		}
		out.Dead += st.Dead
		for _, j := range st.Jobs {
			byJob[j.Job] = j
		}
	}
	for _, j := range jobs {
		if js, ok := byJob[j]; ok {
			out.Jobs = append(out.Jobs, js)
		}
	}
	return out, nil
}

// DoneRecords asks every shard (a tick id does not say its job's name
// unambiguously).
func (s shardsInspector) DoneRecords(ctx context.Context, ticks []string) (map[string]worker.DoneRecord, error) {
	out := map[string]worker.DoneRecord{}
	for n, ws := range s.shards {
		recs, err := ws.DoneRecords(ctx, ticks)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", n, err)
		}
		for k, v := range recs {
			out[k] = v
		}
	}
	return out, nil
}

// DeadLetters lists shard by shard from after's shard (shard 0 for ""),
// each shard's oldest first.
func (s shardsInspector) DeadLetters(ctx context.Context, after string, n int) ([]worker.DeadLetter, error) {
	from, id := 0, ""
	if after != "" {
		var ok bool
		if from, id, ok = s.splitID(after); !ok {
			return nil, &onetick.InputError{Msg: fmt.Sprintf("dead letter id %s: with %d shards an id is the shard's two digits, a slash and the shard's id (as `onetick dead list` prints it)", onetick.Excerpt(after), len(s.shards))}
		}
	}
	var out []worker.DeadLetter
	for sh := from; sh < len(s.shards) && len(out) < n; sh++ {
		page, err := s.shards[sh].DeadLetters(ctx, id, n-len(out))
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", sh, err)
		}
		for _, d := range page {
			d.ID = shardID(sh, d.ID)
			out = append(out, d)
		}
		id = ""
	}
	return out, nil
}

// Replay replays the dead letter in the shard its id names.
func (s shardsInspector) Replay(ctx context.Context, id string) (worker.DeadLetter, error) {
	n, own, ok := s.splitID(id)
	if !ok {
		return worker.DeadLetter{}, worker.ErrDeadLetterNotFound
	}
	d, err := s.shards[n].Replay(ctx, own)
	if err != nil {
		return d, err
	}
	d.ID = shardID(n, d.ID)
	return d, nil
}
