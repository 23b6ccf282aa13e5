package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/stores"
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
	found, owner, err := inspectShards(ctx, h, jobs)
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
		b := owner[d]
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

// inspectShards inspects the store with the streams of jobs and says
// which backend found each damage (the one to repair it through): with
// one shard the store; with more the store itself (the fleet's keys) and
// each shard's view with the streams of its jobs.
func inspectShards(ctx context.Context, h *stores.Handle, jobs []onetick.Job) ([]*onetick.DamageError, map[*onetick.DamageError]onetick.Backend, error) {
	n := h.Shards()
	streams := make([]map[string]string, n)
	for _, j := range jobs {
		sh := onetick.ShardOf(j.Name, n)
		if streams[sh] == nil {
			streams[sh] = map[string]string{}
		}
		streams[sh][j.Name] = j.Stream
		if j.Stream == "" {
			streams[sh][j.Name] = onetick.DefaultStream(j.Name)
		}
	}
	type source struct {
		b       onetick.Backend
		streams map[string]string
	}
	var srcs []source
	if n == 1 {
		srcs = []source{{h.Backend(), streams[0]}}
	} else {
		srcs = []source{{h.Backend(), nil}}
		for i := range n {
			v, err := h.View(i)
			if err != nil {
				return nil, nil, err
			}
			srcs = append(srcs, source{v, streams[i]})
		}
	}
	var found []*onetick.DamageError
	owner := map[*onetick.DamageError]onetick.Backend{}
	for i, s := range srcs {
		ds, err := s.b.Inspect(ctx, s.streams)
		if err != nil {
			if n > 1 && i > 0 {
				return nil, nil, fmt.Errorf("shard %d: %w", i-1, err)
			}
			return nil, nil, err
		}
		for _, d := range ds {
			owner[d] = s.b
		}
		found = append(found, ds...)
	}
	return found, owner, nil
}
