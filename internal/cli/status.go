package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/worker"
)

// cmdStatus reads the leader, its history and each job's position from
// the backend. It works from any machine that reaches the store.
func cmdStatus(ctx context.Context, args []string, env Env) error {
	fs := newFlags("status", env)
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	history := fs.Int("history", 10, "how many leadership terms to show")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	f, jobs, h, err := sf.open(ctx, "status", pos, env)
	if err != nil {
		return err
	}
	defer h.Close()
	b := h.Backend()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ops := &onetick.Ops{Backend: b, Jobs: jobs, Source: newStoreSource(b, jobs, env.logger())}
	if jobs, err = ops.AllJobs(sctx); err != nil {
		return fmt.Errorf("reading status from %s: %v", f.MaskedStore(), err)
	}
	st, err := readStatus(sctx, h, jobs, *history)
	if err != nil {
		return fmt.Errorf("reading status from %s: %v", f.MaskedStore(), err)
	}
	runs := readRuns(sctx, f, h)
	if !*asJSON {
		fprintf(env.Stdout, "store: %s\n", h.Describe(sctx))
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(statusWithRuns{Status: st, Runs: runs, Store: h.Describe(sctx)}); err != nil {
			return err
		}
	} else {
		printStatus(env.Stdout, st)
		printRuns(env.Stdout, runs)
	}
	if n := len(st.Damage); n > 0 {
		return fmt.Errorf("the store holds %d damaged pieces of state (listed above); `onetick repair --config %s` shows what it can move aside", n, f.Path)
	}
	return nil
}

// readStatus reads the status over each shard's view of the store (the
// store itself with one shard): with shards, each shard's lease and who
// leads which, and each job read from its shard's view.
func readStatus(ctx context.Context, h *stores.Handle, jobs []onetick.Job, history int) (*onetick.Status, error) {
	views, err := shardViews(h)
	if err != nil {
		return nil, err
	}
	return onetick.ReadShardedStatus(ctx, views, jobs, history)
}

// shardViews returns each shard's view of the store, in shard order.
func shardViews(h *stores.Handle) ([]onetick.Backend, error) {
	views := make([]onetick.Backend, h.Shards())
	for n := range views {
		v, err := h.View(n)
		if err != nil {
			return nil, err
		}
		views[n] = v
	}
	return views, nil
}

func fmtSlot(s *onetick.Slot, loc *time.Location) string {
	if s == nil {
		return "-"
	}
	return s.Time().In(loc).Format(time.RFC3339)
}

func printStatus(w io.Writer, st *onetick.Status) {
	if len(st.Shards) > 0 {
		printShards(w, st)
	} else {
		printLeader(w, st)
	}
	fmt.Fprintln(w, "\njobs:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSCHEDULE\tZONE\tPREFER\tLAST FIRED\tNEXT\tSTATE")
	for _, j := range st.Jobs {
		loc, err := time.LoadLocation(j.Zone)
		if err != nil {
			loc = time.UTC
		}
		state := jobState(j)
		if j.Gap > 0 {
			state = strings.Replace(state, fmt.Sprintf("%d missed", j.Gap),
				fmt.Sprintf("%d missed (%s .. %s)", j.Gap, fmtSlot(j.GapFrom, loc), fmtSlot(j.GapTo, loc)), 1)
		}
		fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.Name, j.Schedule, j.Zone, j.Prefer,
			fmtSlot(j.LastFired, loc), fmtSlot(j.Next, loc), state)
	}
	_ = tw.Flush()
	printRelays(w, st.Relays)
	if len(st.Controls) > 0 {
		fmt.Fprintln(w, "\nrecent controls (newest first):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  AT\tACTION\tJOB\tWHO\tREASON\tDETAIL")
		for _, c := range st.Controls {
			fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.At.Format(time.RFC3339), c.Action, c.Job, c.Who, dash(c.Reason), dash(c.Detail))
		}
		_ = tw.Flush()
	}
	if len(st.Damage) == 0 {
		return
	}
	fmt.Fprintln(w, "\ndamaged store state (onetick refuses what depends on it; nothing else is affected):")
	printDamage(w, st.Damage)
}

// printRelays lists the relays the jobs use and the tasks waiting in each
// (n/a: the store cannot tell).
func printRelays(w io.Writer, rs []onetick.RelayStatus) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nrelays (tasks waiting in the other queue):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RELAY\tQUEUE\tBACKLOG\tJOBS")
	for _, r := range rs {
		backlog, note := "n/a", ""
		if r.Backlog != nil {
			backlog = fmt.Sprint(*r.Backlog)
		}
		if r.Error != "" {
			note = "  (" + r.Error + ")"
		} else if r.Note != "" {
			note = "  (" + r.Note + ")"
		}
		fprintf(tw, "  %s\t%s\t%s\t%s%s\n", r.Kind, r.Queue, backlog, strings.Join(r.Jobs, ","), note)
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printDamage(w io.Writer, ds []*onetick.DamageError) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tFIELD\tJOB\tREASON\tREPAIR")
	for _, d := range ds {
		field, job, fix := "-", "-", "onetick repair"
		if d.Field != "" {
			field = d.Field
		}
		if d.Job != "" {
			job = d.Job
		}
		if !d.Repairable {
			fix = "by hand (not onetick's key)"
		}
		fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", d.Key, field, job, d.Reason, fix)
	}
	_ = tw.Flush()
}

// statusWithRuns is the JSON of `onetick status`: the store's status and,
// when jobs have run blocks, the worker fleet's.
type statusWithRuns struct {
	*onetick.Status
	Runs  *worker.Status `json:"runs,omitempty"`
	Store string         `json:"store"`
}

// readRuns reads the worker status of the jobs with a run block (nil when
// none has one, or the store cannot tell).
func readRuns(ctx context.Context, f *config.File, h *stores.Handle) *worker.Status {
	jobs := runJobs(f)
	if len(jobs) == 0 {
		return nil
	}
	store, err := workInspector(h, f.Worker.Group)
	if err != nil {
		return nil
	}
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	st, err := store.Status(ctx, names)
	if err != nil {
		return nil
	}
	return &st
}

func printRuns(w io.Writer, st *worker.Status) {
	if st == nil {
		return
	}
	fprintf(w, "\nruns (worker group; %d dead letters in all: `onetick dead list`):\n", st.Dead)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  JOB\tLAST OUTCOME\tLAST TICK\tAT\tIN FLIGHT\tDEAD LETTERS")
	for _, j := range st.Jobs {
		at := "-"
		if !j.LastAt.IsZero() {
			at = j.LastAt.Format(time.RFC3339)
		}
		fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\n", j.Job, dash(string(j.LastOutcome)), dash(j.LastTick), at, j.InFlight, j.Dead)
	}
	_ = tw.Flush()
}
