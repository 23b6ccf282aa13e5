package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onetick/onetick"
)

// The operator's commands: pause, resume, trigger, backfill and jobs. They
// act on the shared store directly (like status), so they work from any
// machine that reaches it, with or without a replica running.

// defaultWho is the actor recorded with a control made from the CLI.
func defaultWho(env Env) string {
	name := env.Getenv("USER")
	if u, err := user.Current(); name == "" && err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	return name + "@" + host
}

// controlCmd parses the flags common to the control commands and opens
// the store; it returns the operations, the job named by the one
// positional argument, and a closer.
type controlCmd struct {
	name   string
	fs     *flag.FlagSet
	sf     storeFlags
	who    *string
	asJSON *bool
}

func newControlCmd(name string, env Env) *controlCmd {
	fs := newFlags(name, env)
	return &controlCmd{name: name, fs: fs, sf: addStoreFlags(fs),
		who:    fs.String("who", "", "who makes the change, recorded with it (default $USER@host)"),
		asJSON: fs.Bool("json", false, "print JSON")}
}

func (c *controlCmd) open(ctx context.Context, args []string, env Env, wantJob bool) (*fleetOps, string, func(), error) {
	pos, err := parseFlags(c.fs, args)
	if err != nil {
		return nil, "", nil, err
	}
	var job string
	if wantJob {
		if len(pos) != 1 {
			return nil, "", nil, badInput("%s: want exactly one JOB, got %d arguments", c.name, len(pos))
		}
		job, pos = pos[0], nil
	}
	f, jobs, h, err := c.sf.open(ctx, c.name, pos, env)
	if err != nil {
		return nil, "", nil, err
	}
	if *c.who == "" {
		*c.who = defaultWho(env)
	}
	// A trigger or backfill from the command line starts its ticks'
	// traces as the daemon's API does (the spans are exported at exit,
	// within the tracing section's timeout).
	tr, err := startTracing(f, "onetick "+c.name, env.logger(), nil)
	if err != nil {
		_ = h.Close()
		return nil, "", nil, err
	}
	// The jobs defined at run time are the fleet's: read through the
	// store itself; a job's actions go to its shard's view (shards.go).
	b := h.Backend()
	source := newStoreSource(b, jobs, env.logger())
	ops, err := newFleetOps(h, func(v onetick.Backend) *onetick.Ops {
		return &onetick.Ops{Backend: v, Jobs: jobs, Source: source, Sink: tr.opsSink()}
	})
	if err != nil {
		tr.stop()
		_ = h.Close()
		return nil, "", nil, err
	}
	return ops, job, func() { tr.stop(); _ = h.Close() }, nil
}

// opErr maps an operation's error to the CLI's: bad input and unknown
// jobs exit 2, the rest 1.
func opErr(err error) error {
	var in *onetick.InputError
	if errors.As(err, &in) || errors.Is(err, onetick.ErrUnknownJob) {
		return usageError{err}
	}
	return err
}

func (c *controlCmd) print(w io.Writer, v any, text func()) error {
	if *c.asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text()
	return nil
}

func cmdPause(ctx context.Context, args []string, env Env) error {
	c := newControlCmd("pause", env)
	reason := c.fs.String("reason", "", "why the job is paused (required; recorded)")
	ops, job, closeFn, err := c.open(ctx, args, env, true)
	if err != nil {
		return err
	}
	defer closeFn()
	ctl, err := ops.For(job).Pause(ctx, job, onetick.Actor{Who: *c.who, Reason: *reason})
	if err != nil {
		return opErr(err)
	}
	return c.print(env.Stdout, ctl, func() {
		if !ctl.Changed {
			fprintf(env.Stdout, "%s was paused already; the reason recorded is now: %s\n", job, ctl.Actor.Reason)
			return
		}
		since := ctl.Intervals[len(ctl.Intervals)-1].Since
		fprintf(env.Stdout, "paused %s since %s (by %s: %s); its slots are recorded as paused until `onetick resume %s`\n",
			job, since.Format(time.RFC3339), ctl.Actor.Who, ctl.Actor.Reason, job)
	})
}

func cmdResume(ctx context.Context, args []string, env Env) error {
	c := newControlCmd("resume", env)
	reason := c.fs.String("reason", "", "why the job is resumed (recorded)")
	ops, job, closeFn, err := c.open(ctx, args, env, true)
	if err != nil {
		return err
	}
	defer closeFn()
	ctl, err := ops.For(job).Resume(ctx, job, onetick.Actor{Who: *c.who, Reason: *reason})
	if err != nil {
		return opErr(err)
	}
	return c.print(env.Stdout, ctl, func() {
		n := len(ctl.Intervals)
		if !ctl.Changed || n == 0 {
			fprintf(env.Stdout, "%s was not paused; nothing changed\n", job)
			return
		}
		fprintf(env.Stdout, "resumed %s at %s; it fires from its next slot (paused slots are not caught up)\n",
			job, ctl.Intervals[n-1].Until.Format(time.RFC3339))
	})
}

func cmdTrigger(ctx context.Context, args []string, env Env) error {
	c := newControlCmd("trigger", env)
	key := c.fs.String("key", "", "idempotency key: a retry with the same key enqueues nothing (default: a new random key)")
	payload := c.fs.String("payload", "", "JSON payload (default: the job's)")
	reason := c.fs.String("reason", "", "why (recorded)")
	ops, job, closeFn, err := c.open(ctx, args, env, true)
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := ops.For(job).Trigger(ctx, job, *key, *payload, onetick.Actor{Who: *c.who, Reason: *reason})
	if err != nil {
		return opErr(err)
	}
	if err := c.print(env.Stdout, res, func() {
		switch {
		case res.Enqueued:
			fprintf(env.Stdout, "triggered %s: tick %s (retry with --key %s to be sure; it will not enqueue twice)\n", job, res.Tick, res.Key)
		case res.Outcome == onetick.Duplicate.String():
			fprintf(env.Stdout, "tick %s was enqueued before (same key); nothing enqueued again\n", res.Tick)
		}
	}); err != nil {
		return err
	}
	if res.Damage != nil {
		return fmt.Errorf("trigger refused: %v", res.Damage)
	}
	return nil
}

func cmdBackfill(ctx context.Context, args []string, env Env) error {
	c := newControlCmd("backfill", env)
	fromS := c.fs.String("from", "", "first instant of the range, RFC 3339 (required)")
	toS := c.fs.String("to", "", "last instant of the range, RFC 3339 (required, not in the future)")
	maxN := c.fs.Int("max", 0, fmt.Sprintf("most slots this request may enqueue (default %d, at most %d)", onetick.DefaultBackfillMax, onetick.BackfillMaxLimit))
	dry := c.fs.Bool("dry-run", false, "list the slots, enqueue nothing")
	again := c.fs.Bool("again", false, "also enqueue slots the run ledger records as enqueued or run")
	reason := c.fs.String("reason", "", "why (recorded)")
	ops, job, closeFn, err := c.open(ctx, args, env, true)
	if err != nil {
		return err
	}
	defer closeFn()
	from, err := parseTime("--from", *fromS)
	if err != nil {
		return opErr(err)
	}
	to, err := parseTime("--to", *toS)
	if err != nil {
		return opErr(err)
	}
	res, err := ops.For(job).Backfill(ctx, job, onetick.BackfillRequest{From: from, To: to, Max: *maxN, DryRun: *dry, Again: *again},
		onetick.Actor{Who: *c.who, Reason: *reason})
	if err != nil {
		return opErr(err)
	}
	return c.print(env.Stdout, res, func() {
		for i, s := range res.Slots {
			state := res.Outcomes[i]
			switch state {
			case onetick.WouldEnqueue:
				state = "would enqueue"
			case onetick.Claimed.String():
				state = "enqueued"
			case onetick.Duplicate.String():
				state = "already enqueued"
			}
			fprintf(env.Stdout, "%s  %s  %s\n", s.String(), onetick.TickID(job, s), state)
		}
		if res.DryRun {
			fprintf(env.Stdout, "dry run: %d slots, %d already enqueued; nothing enqueued\n", len(res.Slots), res.Duplicates)
		} else {
			fprintf(env.Stdout, "%d slots: %d enqueued, %d already enqueued, %d other\n", len(res.Slots), res.Enqueued, res.Duplicates, res.Other)
		}
	})
}

func cmdJobs(ctx context.Context, args []string, env Env) error {
	c := newControlCmd("jobs", env)
	ops, _, closeFn, err := c.open(ctx, args, env, false)
	if err != nil {
		return err
	}
	defer closeFn()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	jobs, err := ops.Fleet().AllJobs(sctx)
	if err != nil {
		return err
	}
	states, err := ops.JobStates(sctx, jobs)
	if err != nil {
		return err
	}
	return c.print(env.Stdout, states, func() {
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSTATE\tSCHEDULE\tZONE\tLAST FIRED\tNEXT")
		for _, j := range states {
			loc, err := time.LoadLocation(j.Zone)
			if err != nil {
				loc = time.UTC
			}
			fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Name, jobState(j), j.Schedule, j.Zone, fmtSlot(j.LastFired, loc), fmtSlot(j.Next, loc))
		}
		_ = tw.Flush()
	})
}

// jobState is "active", "paused (since, by, why)", "damaged" or "gap".
func jobState(j onetick.JobStatus) string {
	var parts []string
	if p := j.Paused; p != nil {
		s := "paused since " + p.Since.Format(time.RFC3339) + " by " + p.Who
		if p.Reason != "" {
			s += ": " + p.Reason
		}
		parts = append(parts, s)
	}
	if len(j.Damage) > 0 {
		parts = append(parts, "DAMAGED (see onetick status)")
	}
	if j.Gap > 0 {
		parts = append(parts, fmt.Sprintf("%d missed", j.Gap))
	}
	if len(parts) == 0 {
		return "active"
	}
	return strings.Join(parts, "; ")
}
