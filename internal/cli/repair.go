package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/onetick/onetick"
)

// cmdRepair lists damaged store state and, with --apply, moves what
// belongs to onetick aside (never a valid lease; a lease without expiry
// only after waiting one TTL to confirm that no live leader renews it).
func cmdRepair(ctx context.Context, args []string, env Env) error {
	fs := newFlags("repair", env)
	sf := addStoreFlags(fs)
	apply := fs.Bool("apply", false, "move the damaged state aside (without it: only list what would be done)")
	wait := fs.Duration("wait", 0, "how long to watch a lease without expiry before moving it aside (default: the lease ttl)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *wait < 0 {
		return badInput("--wait: must not be negative, got %s", *wait)
	}
	f, jobs, h, err := sf.open(ctx, "repair", pos, env)
	if err != nil {
		return err
	}
	if *wait == 0 {
		*wait = f.Lease.TTL.D()
	}
	defer h.Close()
	b := h.Backend()
	streams := make(map[string]string, len(jobs))
	for _, j := range jobs {
		streams[j.Name] = j.Stream
		if j.Stream == "" {
			streams[j.Name] = onetick.DefaultStream(j.Name)
		}
	}
	found, err := b.Inspect(ctx, streams)
	if err != nil {
		return fmt.Errorf("inspecting %s: %v", f.MaskedStore(), err)
	}
	out := env.Stdout
	if len(found) == 0 {
		fmt.Fprintln(out, "no damaged store state found")
		return nil
	}
	// The lease and the epoch first: they let the fleet elect again.
	rank := func(d *onetick.DamageError) int {
		switch {
		case !d.Repairable:
			return 3
		case d.Kind == onetick.DamageNoExpiry:
			return 2
		}
		return 0
	}
	sort.SliceStable(found, func(i, k int) bool { return rank(found[i]) < rank(found[k]) })
	printDamage(out, found)
	if !*apply {
		fmt.Fprintln(out, "\ndry run: nothing changed. With --apply, onetick moves each repairable piece to <prefix>:damaged:<store ms>:<key>, where you can inspect it.")
		return fmt.Errorf("%d damaged pieces of store state", len(found))
	}
	fmt.Fprintln(out)
	left := 0
	for _, d := range found {
		if !d.Repairable {
			fprintf(out, "left alone: %s (%s): not one of onetick's keys; delete or rename it, or give the job another stream\n", d.Key, d.Reason)
			left++
			continue
		}
		confirmed := false
		if d.Kind == onetick.DamageNoExpiry {
			fprintf(out, "watching %s for %s: a live leader would renew it...\n", d.Key, *wait)
			t := time.NewTimer(*wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			again, err := b.Inspect(ctx, nil)
			if err != nil {
				return err
			}
			confirmed = stillThere(again, d)
			if !confirmed {
				fprintf(out, "left alone: %s changed while watched (a live leader, or a repair): inspect again\n", d.Key)
				left++
				continue
			}
		}
		where, err := b.Repair(ctx, d, confirmed)
		if err != nil {
			if errors.Is(err, onetick.ErrNotRepairable) {
				left++
				fprintf(out, "left alone: %v\n", err)
				continue
			}
			return fmt.Errorf("repairing %s: %v", d.Key, err)
		}
		what := d.Key
		if d.Field != "" {
			what += " field " + d.Field
		}
		fprintf(out, "moved %s to %s\n", what, where)
	}
	if left > 0 {
		return fmt.Errorf("%d damaged pieces left for you to repair", left)
	}
	return nil
}

func stillThere(ds []*onetick.DamageError, d *onetick.DamageError) bool {
	for _, x := range ds {
		if x.Key == d.Key && x.Field == d.Field && x.Kind == d.Kind && x.Value == d.Value {
			return true
		}
	}
	return false
}
