package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/onetick/onetick/worker"
)

// cmdDead lists the dead letters of the worker fleet, or replays one.
func cmdDead(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		return badInput("dead: want `dead list` or `dead replay ID`")
	}
	sub, args := args[0], args[1:]
	c := newControlCmd("dead "+sub, env)
	after := c.fs.String("after", "", "list: start after this dead-letter id")
	n := c.fs.Int("n", 100, "list: how many")
	pos, err := parseFlags(c.fs, args)
	if err != nil {
		return err
	}
	var id string
	if sub == "replay" {
		if len(pos) != 1 {
			return badInput("dead replay: want exactly one dead-letter ID (from `onetick dead list`), got %d arguments", len(pos))
		}
		id, pos = pos[0], nil
	}
	if *n < 1 || *n > 10000 {
		return badInput("-n: must be between 1 and 10000, got %d", *n)
	}
	f, _, h, err := c.sf.open(ctx, "dead "+sub, pos, env)
	if err != nil {
		return err
	}
	defer h.Close()
	store, err := workInspector(h, f.Worker.Group)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if sub == "replay" {
		dl, err := store.Replay(sctx, id)
		if errors.Is(err, worker.ErrDeadLetterNotFound) {
			return badInput("dead replay: no dead letter %q in group %q (see `onetick dead list`)", id, f.Worker.Group)
		}
		if err != nil {
			return err
		}
		return c.print(env.Stdout, dl, func() {
			fprintf(env.Stdout, "replayed %s: tick %s is back in %s as attempt 1 (same tick id)\n", dl.ID, dl.Tick, dl.Stream)
		})
	}
	dls, err := store.DeadLetters(sctx, *after, *n)
	if err != nil {
		return opErr(err)
	}
	if dls == nil {
		dls = []worker.DeadLetter{}
	}
	return c.print(env.Stdout, dls, func() {
		if len(dls) == 0 {
			fmt.Fprintln(env.Stdout, "no dead letters")
			return
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTICK\tAT\tATTEMPTS\tDELIVERIES\tERROR")
		for _, d := range dls {
			fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", d.ID, d.Tick, d.At.Format(time.RFC3339), d.Attempts, d.Deliveries, short(d.Error, 120))
		}
		_ = tw.Flush()
	})
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
