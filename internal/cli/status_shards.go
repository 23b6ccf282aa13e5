package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onetick/onetick"
)

// printLeader prints one lease's leader and terms (one shard).
func printLeader(w io.Writer, st *onetick.Status) {
	if st.Leader != nil {
		fprintf(w, "leader: %s (epoch %d), lease %.1fs left\n", st.Leader.Holder, st.Leader.Epoch, st.Leader.TTLLeft)
	} else {
		fmt.Fprintln(w, "leader: none")
	}
	fprintf(w, "store time: %s\n\nleadership history (newest first):\n", st.StoreTime.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  EPOCH\tHOLDER\tSTART\tEND\tENDED BY")
	for _, t := range st.History {
		end, reason := termEnd(t)
		fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", t.Epoch, t.Holder, t.Start.Format(time.RFC3339), end, reason)
	}
	_ = tw.Flush()
}

func termEnd(t onetick.Term) (end, reason string) {
	end, reason = "-", "(current)"
	if !t.End.IsZero() {
		end, reason = t.End.Format(time.RFC3339), string(t.Reason)
	} else if t.Reason != "" {
		reason = string(t.Reason)
	}
	return end, reason
}

// printShards prints who leads which shard (the lease of each: holder,
// epoch, time left), the shards each replica leads, and the newest terms
// of every shard.
func printShards(w io.Writer, st *onetick.Status) {
	led := 0
	for _, s := range st.Shards {
		if s.Leader != nil {
			led++
		}
	}
	fprintf(w, "shards: %d, %d led by %d replicas\n", len(st.Shards), led, len(st.Replicas))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SHARD\tLEADER\tEPOCH\tEXPIRES IN\tJOBS")
	for _, s := range st.Shards {
		if s.Leader == nil {
			fprintf(tw, "  %d\t(none)\t-\t-\t%d\n", s.Shard, s.Jobs)
			continue
		}
		fprintf(tw, "  %d\t%s\t%d\t%.1fs\t%d\n", s.Shard, s.Leader.Holder, s.Leader.Epoch, s.Leader.TTLLeft, s.Jobs)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nshards per replica:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  REPLICA\tLEADS\tSHARDS")
	for _, r := range st.Replicas {
		fprintf(tw, "  %s\t%d/%d\t%s\n", r.Holder, len(r.Shards), len(st.Shards), shardList(r.Shards))
	}
	if led < len(st.Shards) {
		fprintf(tw, "  (none)\t%d/%d\t%s\n", len(st.Shards)-led, len(st.Shards), shardList(unled(st.Shards)))
	}
	_ = tw.Flush()
	// The newest terms of every shard: as many as one shard's history
	// (--history), at least one per shard.
	type shardTerm struct {
		shard int
		onetick.Term
	}
	var terms []shardTerm
	most := 0
	for _, s := range st.Shards {
		most = max(most, len(s.History))
		for _, t := range s.History {
			terms = append(terms, shardTerm{s.Shard, t})
		}
	}
	slices.SortStableFunc(terms, func(a, b shardTerm) int { return b.Start.Compare(a.Start) })
	fprintf(w, "\nstore time: %s\n\nleadership history (newest first, every shard):\n", st.StoreTime.Format(time.RFC3339))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SHARD\tEPOCH\tHOLDER\tSTART\tEND\tENDED BY")
	for _, t := range terms[:min(len(terms), max(most, len(st.Shards)))] {
		end, reason := termEnd(t.Term)
		fprintf(tw, "  %d\t%d\t%s\t%s\t%s\t%s\n", t.shard, t.Epoch, t.Holder, t.Start.Format(time.RFC3339), end, reason)
	}
	_ = tw.Flush()
}

// unled returns the shards nobody leads.
func unled(shards []onetick.ShardStatus) []int {
	var out []int
	for _, s := range shards {
		if s.Leader == nil {
			out = append(out, s.Shard)
		}
	}
	return out
}

// shardList prints shard numbers as 0,2,5.
func shardList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
