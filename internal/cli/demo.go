package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// cmdDemo runs three replicas in one process on the embedded backend with
// a 1-second job, stops the leader halfway, and shows that the standby took
// over and no tick was doubled or lost.
func cmdDemo(ctx context.Context, args []string, env Env) error {
	fs := newFlags("demo", env)
	seconds := fs.Int("seconds", 8, "how long the demo runs (at least 4)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *seconds < 4 || *seconds > 3600 {
		return badInput("--seconds: must be between 4 and 3600, got %d", *seconds)
	}
	out := env.Stdout
	sched, _ := cron.Parse("@every 1s", nil)
	mem := memory.New(memory.Options{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var (
		mu     sync.Mutex
		ticks  []onetick.TickRecord
		became = make(chan string, 16)
	)
	sink := onetick.SinkFunc(func(_ context.Context, recs []onetick.TickRecord) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			ticks = append(ticks, r)
			fmt.Fprintf(out, "tick  %s  slot %s  fired by %s (epoch %d)\n", r.Job, r.Slot.Time().Format("15:04:05"), r.Replica, r.Epoch)
		}
		return nil
	})
	type replica struct {
		s      *onetick.Scheduler
		cancel context.CancelFunc
		done   chan struct{}
	}
	reps := map[string]*replica{}
	fmt.Fprintln(out, "onetick demo: three replicas, one embedded store, a job every second (@every 1s)")
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		name := name
		s, err := onetick.New(onetick.Config{Backend: mem, Replica: name, Logger: quiet, Sink: sink,
			Lease: onetick.LeaseConfig{TTL: 3 * time.Second},
			Jobs:  []onetick.Job{{Name: "heartbeat", Schedule: sched, Stream: "demo"}},
			OnNewLeader: func(l onetick.Lease) {
				if l.Holder == name {
					fmt.Fprintf(out, "lead  %s became leader (epoch %d)\n", name, l.Epoch)
					became <- name
				}
			}})
		if err != nil {
			return err
		}
		rctx, cancel := context.WithCancel(ctx)
		r := &replica{s: s, cancel: cancel, done: make(chan struct{})}
		go func() { defer close(r.done); _ = s.Run(rctx) }()
		reps[name] = r
	}
	defer func() {
		for _, r := range reps {
			r.cancel()
			<-r.done
		}
	}()
	leader := <-became
	half := time.Duration(*seconds) * time.Second / 2
	select {
	case <-time.After(half):
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintf(out, "stop  stopping the leader %s (it releases the lease)\n", leader)
	start := time.Now()
	r := reps[leader]
	delete(reps, leader)
	r.cancel()
	<-r.done
	next := <-became
	fmt.Fprintf(out, "lead  handover from %s to %s took %s\n", leader, next, time.Since(start).Round(time.Millisecond))
	select {
	case <-time.After(half):
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, r := range reps {
		r.cancel()
		<-r.done
	}
	reps = nil

	mu.Lock()
	defer mu.Unlock()
	seen := map[onetick.Slot]int{}
	for _, t := range mem.Stream("demo") {
		seen[t.Slot]++
	}
	var dups, missed int
	for _, n := range seen {
		if n > 1 {
			dups += n - 1
		}
	}
	if len(ticks) > 0 {
		for s := ticks[0].Slot; s <= ticks[len(ticks)-1].Slot; s += 1000 {
			if seen[s] == 0 {
				missed++
			}
		}
	}
	fmt.Fprintf(out, "done  %d ticks, %d doubled, %d lost, across a leadership handover\n", len(ticks), dups, missed)
	if dups > 0 || missed > 0 {
		return fmt.Errorf("demo: %d ticks doubled and %d lost", dups, missed)
	}
	return nil
}
