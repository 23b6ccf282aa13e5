//go:build verify && chaos

package verify

// The chaos run (issue 22): three onetick replicas with workers on one
// store, jobs of both preferences every second (some with `run:`
// commands, some triggered and backfilled while it runs), and a nemesis
// that draws faults at random intervals from a seeded math/rand. Every
// observation goes to a history file (internal/chaos) that a checker
// judges afterwards. Run it with `make chaos SEED=N DURATION=2m`.
//
// Settings (environment, set by the Makefile):
//
//	ONETICK_CHAOS_SEED      the seed (default: the time; printed, so a run can be repeated)
//	ONETICK_CHAOS_DURATION  how long the nemesis runs on each store (default 2m)
//	ONETICK_CHAOS_STORES    comma-separated stores (default: all that are wired)
//	ONETICK_CHAOS_HISTORY   directory for the histories (default: $TMPDIR/onetick-chaos-<seed>)
//
// The same seed draws the same fault schedule: the same kinds, in the same
// order, with the same intervals, durations, offsets and "leader or
// another replica" choices. What a fault hits at run time (which process
// leads, which run is in flight) depends on the run.

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/chaos"
)

// chaosStores are the stores a run visits, in order.
var chaosStores = []string{"redis", "postgres", "file"}

type chaosSettings struct {
	seed    int64
	dur     time.Duration
	stores  []string
	histDir string
}

func chaosSettingsFromEnv(t *testing.T) chaosSettings {
	t.Helper()
	s := chaosSettings{seed: time.Now().UnixNano() % 1e9, dur: 2 * time.Minute, stores: chaosStores}
	if v := os.Getenv("ONETICK_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("ONETICK_CHAOS_SEED: %q is not an integer", v)
		}
		s.seed = n
	}
	if v := os.Getenv("ONETICK_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("ONETICK_CHAOS_DURATION: %q is not a positive Go duration (like 2m)", v)
		}
		s.dur = d
	}
	if v := os.Getenv("ONETICK_CHAOS_STORES"); v != "" {
		s.stores = nil
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if _, ok := chaosStoreSetups[st]; !ok {
				known := make([]string, 0, len(chaosStoreSetups))
				for k := range chaosStoreSetups {
					known = append(known, k)
				}
				sort.Strings(known)
				t.Fatalf("ONETICK_CHAOS_STORES: unknown store %q (known: %s)", st, strings.Join(known, ", "))
			}
			s.stores = append(s.stores, st)
		}
	}
	s.histDir = os.Getenv("ONETICK_CHAOS_HISTORY")
	if s.histDir == "" {
		s.histDir = filepath.Join(os.TempDir(), fmt.Sprintf("onetick-chaos-%d", s.seed))
	}
	if err := os.MkdirAll(s.histDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

// storeSeed is the seed of one store's nemesis: the run's seed mixed with
// the store's name, so that a run of one store alone draws the same
// schedule as the same store in a run of all of them.
func storeSeed(seed int64, store string) int64 {
	h := fnv.New64a()
	h.Write([]byte(store))
	return seed ^ int64(h.Sum64()>>1)
}

// TestChaos runs the nemesis on every store in turn and writes a history
// per store.
func TestChaos(t *testing.T) {
	s := chaosSettingsFromEnv(t)
	t.Logf("chaos: seed %d, %s per store, stores %s, histories in %s (repeat with: make chaos SEED=%d DURATION=%s)",
		s.seed, s.dur, strings.Join(s.stores, ","), s.histDir, s.seed, s.dur)
	var summaries []string
	for _, store := range s.stores {
		t.Run(store, func(t *testing.T) {
			path := filepath.Join(s.histDir, store+".jsonl")
			sum := runChaos(t, store, storeSeed(s.seed, store), s.seed, s.dur, path)
			summaries = append(summaries, sum)
		})
	}
	fmt.Printf("\nchaos run, seed %d, %s per store (make chaos SEED=%d DURATION=%s):\n%s\n",
		s.seed, s.dur, s.seed, s.dur, strings.Join(summaries, "\n"))
}

// runChaos runs one store's chaos and returns its summary.
func runChaos(t *testing.T, store string, nemesisSeed, runSeed int64, dur time.Duration, path string) string {
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := chaos.NewWriter(file)
	var running *chaosRun // set below; the cleanup reads its replicas' logs
	// Runs last (cleanups run in reverse order): after the observers and
	// the fleet stopped, so a failed run's history is complete too.
	t.Cleanup(func() {
		// Every replica's log beside the history, for reading a
		// finding's window in full.
		if c := running; c != nil && c.f != nil {
			dir := strings.TrimSuffix(path, ".jsonl") + "-logs"
			if err := os.MkdirAll(dir, 0o755); err == nil {
				for _, r := range c.f.All() {
					_ = os.WriteFile(filepath.Join(dir, r.Name+".log"), []byte(rawLines(r.Lines())), 0o644)
				}
				t.Logf("replica logs: %s", dir)
			}
		}
		if err := h.Flush(); err != nil {
			t.Errorf("writing the history %s: %v", path, err)
		}
		file.Close()
		t.Logf("history: %s", path)
	})
	c := newChaosRun(t, store, h)
	running = c
	c.setup()
	// The fleet starts before the history opens (its first slot expected
	// depends on when it first leads); the run event is dated at the
	// setup, and the observers then read the logs and streams from their
	// beginning.
	c.startFleet()
	h.Add(chaos.Event{T: c.started, Kind: chaos.KindRun, Store: store, Seed: runSeed, Jobs: c.jobSpecs(), Bounds: &chaos.Bounds{
		MaxSkew: chaosMaxSkew, Settle: chaosSettle, AsyncLoss: c.asyncLoss, TickRetention: 3 * interval,
	}, Note: fmt.Sprintf("nemesis seed %d (the run's seed mixed with the store name), duration %s, %d replica(s)", nemesisSeed, dur, c.nReplicas)})
	c.startObservers()
	c.nemesis(nemesisSeed, dur)
	c.heal()
	// Let every store outcome settle (catch-ups, taken-over runs), then
	// read everything a last time.
	time.Sleep(chaosSettle)
	c.finish()
	sum := c.summary(path)
	t.Log(sum)
	verdict := checkHistory(t, h, path)
	return sum + "\n          checker: " + verdict
}

// checkHistory flushes the history, judges it with chaos.Check, prints
// the report and fails the test on a violation; it returns the verdict.
func checkHistory(t *testing.T, h *chaos.Writer, path string) string {
	if err := h.Flush(); err != nil {
		t.Fatalf("writing the history %s: %v", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := chaos.Read(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	rep := chaos.Check(events)
	if err := rep.Print(os.Stdout, chaos.PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	verdict := fmt.Sprintf("%d violations, %d documented cases", len(rep.Violations), len(rep.Documented))
	if !rep.OK() {
		t.Errorf("the checker finds %d violations in %s (go run ./internal/chaos/cmd/check -v %s)", len(rep.Violations), path, path)
	}
	return verdict
}
