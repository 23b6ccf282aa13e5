// Package workertest is the conformance suite of worker stores: every
// backend's worker.Store runs it, with real workers on top, so that the
// rules in package worker's documentation hold on each of them. Ticks are
// produced through the backend's own claim (Acquire + Claim), so workers
// consume exactly what the scheduler writes.
//
// A backend package calls Exercise from its tests with a Harness. Backends
// whose store can be reached from another process (Redis) also provide a
// Command: the suite then runs part of the fleet as separate OS processes
// and kills them with SIGKILL. Such a backend's TestMain must call
// RunChildIfAsked first.
package workertest

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Harness adapts a backend to the suite.
type Harness struct {
	// New returns a fresh environment: a backend with empty state.
	New func(t *testing.T) Env
}

// Env is one backend instance under test.
type Env struct {
	// Backend is the backend; when it implements onetick.Ledger, the
	// suite checks what the worker stores write to the run ledger.
	Backend onetick.Backend
	// Store returns a worker store of the default group ("onetick") on
	// Backend, with its own connection where the backend has any, as a
	// separate worker process would have. The suite closes nothing: the
	// harness cleans up.
	Store func(t *testing.T) worker.Store
	// StoreOf is Store for another consumer group.
	StoreOf func(t *testing.T, group string) worker.Store
	// Append appends an entry to a stream exactly as the scheduler's claim
	// would (fields job, slot, tick, epoch, replica, payload): a duplicate
	// of a tick, as after a store failover.
	Append func(t *testing.T, stream string, r onetick.TickRecord)
	// Command, if set, returns a command that runs a worker in its own OS
	// process on this backend: the test binary re-executed, whose TestMain
	// calls RunChildIfAsked with a store of this backend. The suite adds
	// the worker's specification to its environment.
	Command func(t *testing.T) *exec.Cmd
}

// Exercise runs the whole suite.
func Exercise(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, env Env)
	}{
		{"StoreHeartbeatKeepsOwnership", testStoreHeartbeat},
		{"StoreFinishIsFenced", testStoreFinishFenced},
		{"StorePromoteConcurrently", testStorePromote},
		{"StoreGroupsAreSeparate", testStoreGroups},
		{"StoreDeadLettersAndReplay", testStoreDeadLetters},
		{"StoreLiveness", testStoreLiveness},
		{"StoreOrder", testStoreOrder},
		{"StoreVersionTravels", testStoreVersion},
		{"RunsOnce", testRunsOnce},
		{"KilledMidRun", testKilledMidRun},
		{"LongHandlerNotTakenOver", testLongHandler},
		{"OverlapSkip", testOverlapSkip},
		{"OverlapQueue", testOverlapQueue},
		{"MissedOverlapCounted", testMissedOverlapCounted},
		{"CatchUpInOrder", testCatchUpInOrder},
		{"DuplicateAcrossKill", testDuplicateAcrossKill},
		{"Retries", testRetries},
		{"PanicDeadLetter", testPanic},
		{"DeliveryLimit", testDeliveryLimit},
		{"Replay", testReplay},
		{"LostOwnershipCancels", testLostOwnership},
		{"ShutdownBound", testShutdown},
		{"SkippedDone", testSkippedDone},
		{"Ledger", testLedger},
		{"LedgerResults", testLedgerResults},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h.New(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var uniq atomic.Int64

// name returns a job name unique in this test binary, so that subtests
// never share a stream.
func name(base string) string { return base + "-" + strconv.FormatInt(uniq.Add(1), 10) }

func streamOf(job string) string { return "onetick:stream:" + job }

// producer claims ticks through the backend, as a leader would: one term
// per call, consecutive slots one second apart, in the past.
type producer struct {
	b    onetick.Backend
	mu   sync.Mutex
	next map[string]onetick.Slot
}

func newProducer(b onetick.Backend) *producer {
	return &producer{b: b, next: map[string]onetick.Slot{}}
}

// produce claims n ticks of job and returns their tick ids.
func (p *producer) produce(t *testing.T, job string, n int) []string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx := ctxT(t)
	g, err := p.b.Acquire(ctx, "producer", time.Minute)
	if err != nil {
		t.Fatalf("producer: acquire: %v", err)
	}
	defer func() {
		if err := p.b.Release(ctx, g.Lease); err != nil {
			t.Errorf("producer: release: %v", err)
		}
	}()
	s, ok := p.next[job]
	if !ok {
		s = onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Second))
	}
	ticks := make([]onetick.Tick, n)
	ids := make([]string, n)
	for i := range ticks {
		ticks[i] = onetick.Tick{Job: job, Slot: s, Stream: streamOf(job), Payload: `{"n":` + strconv.Itoa(i) + `}`,
			Retention: time.Minute}
		ids[i] = ticks[i].ID()
		s += 1000
	}
	p.next[job] = s
	res, err := p.b.Claim(ctx, g.Lease, ticks)
	if err != nil {
		t.Fatalf("producer: claim: %v", err)
	}
	for i, o := range res.Outcomes {
		if o != onetick.Claimed {
			t.Fatalf("producer: tick %s: %v", ids[i], o)
		}
	}
	return ids
}

// count returns how many events satisfy pred.
func count(evs []Event, pred func(Event) bool) int {
	n := 0
	for _, e := range evs {
		if pred(e) {
			n++
		}
	}
	return n
}

func starts(evs []Event, tick string) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == KindStart && e.Tick == tick {
			out = append(out, e)
		}
	}
	return out
}

// startsBy splits the starts of tick into those by member and the others.
func startsBy(evs []Event, tick, member string) (by, others []Event) {
	for _, e := range starts(evs, tick) {
		if e.Member == member {
			by = append(by, e)
		} else {
			others = append(others, e)
		}
	}
	return by, others
}

func doneRecords(t *testing.T, s worker.Store, ticks []string) map[string]worker.DoneRecord {
	t.Helper()
	recs, err := s.DoneRecords(ctxT(t), ticks)
	if err != nil {
		t.Fatalf("done records: %v", err)
	}
	return recs
}

func deadLetters(t *testing.T, s worker.Store) []worker.DeadLetter {
	t.Helper()
	dls, err := s.DeadLetters(ctxT(t), "", 1000)
	if err != nil {
		t.Fatalf("dead letters: %v", err)
	}
	return dls
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
