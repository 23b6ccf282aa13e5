package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/sqlite"
)

// TestProcessesRaceForTheLease: three processes open one file and try to
// acquire the lease at the same moment. Exactly one leads; the others see
// it held by that one, and a claim made under the leader's epoch in
// another name is fenced. The file's own locking decides, across
// processes. While the winner lives nobody else acquires; once it has
// exited (without releasing, as in a crash), the lease is taken at once.
func TestProcessesRaceForTheLease(t *testing.T) {
	t.Parallel()
	b, path := open(t) // this process has the file open all along
	ctx := context.Background()
	var hs []*helper
	for _, n := range []string{"p0", "p1", "p2"} {
		h := startHelper(t, "racer", path, envName+"="+n)
		if l := h.line(); l != "ready" {
			t.Fatalf("racer %s: %q", n, l)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		h.send("go")
	}
	var results []raceResult
	for _, h := range hs {
		var r raceResult
		if err := json.Unmarshal([]byte(h.line()), &r); err != nil {
			t.Fatal(err)
		}
		if r.Error != "" {
			t.Fatalf("racer %s: %s", r.Name, r.Error)
		}
		results = append(results, r)
	}
	var winner *raceResult
	for i, r := range results {
		if r.Won {
			if winner != nil {
				t.Fatalf("two processes acquired the lease: %+v and %+v", *winner, r)
			}
			winner = &results[i]
		}
	}
	if winner == nil {
		t.Fatalf("no process acquired the lease: %+v", results)
	}
	for _, r := range results {
		if r.Won {
			continue
		}
		if r.Lease != winner.Lease {
			t.Errorf("racer %s saw the lease held by %+v, want the winner's %+v", r.Name, r.Lease, winner.Lease)
		}
		if !r.Fenced {
			t.Errorf("racer %s: a claim under the winner's epoch in its own name was not fenced", r.Name)
		}
	}
	// The winner lives: this process sees the lease held by it and
	// cannot acquire.
	info, err := b.Leader(ctx)
	if err != nil || !info.Held || info.Lease != winner.Lease {
		t.Fatalf("leader seen by this process: %+v, %v; want %+v", info, err, winner.Lease)
	}
	if _, err := b.Acquire(ctx, "late", time.Minute); !errors.Is(err, onetick.ErrLeaseHeld) {
		t.Fatalf("acquire while another process's lease lives: %v, want ErrLeaseHeld", err)
	}
	if s, err := b.Stream(ctx, "race"); err != nil || len(s) != 0 {
		t.Fatalf("the fenced claims appended %v (%v)", s, err)
	}
	// The racers exit without releasing: the winner's lease, a minute
	// long, stays in the file, and is taken over at once.
	for _, h := range hs {
		h.wait()
	}
	if info, err := b.Leader(ctx); err != nil || info.Lease != winner.Lease {
		t.Fatalf("leader after the racers exited: %+v, %v; want the winner's lease still in the file", info, err)
	}
	g, err := b.Acquire(ctx, "late", time.Minute)
	if err != nil || g.Lease.Epoch <= winner.Lease.Epoch {
		t.Fatalf("acquire once the winner's process is gone: %+v, %v; want a new term at once", g, err)
	}
}

// TestReadWhileAnotherProcessWrites: `onetick status` in another process
// reads the file while the daemon claims: every read succeeds, sees the
// daemon's lease, and sees the last-fired slot move forward.
func TestReadWhileAnotherProcessWrites(t *testing.T) {
	t.Parallel()
	b, path := open(t)
	ctx := context.Background()
	g, err := b.Acquire(ctx, "daemon", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r := startHelper(t, "reader", path)
	if l := r.line(); l != "ready" {
		t.Fatalf("reader: %q", l)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var claimed int
	go func() {
		defer wg.Done()
		s := onetick.Slot(1_600_000_000_000)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var batch []onetick.Tick
			for k := 0; k < 100; k++ {
				batch = append(batch, onetick.Tick{Job: "w", Slot: s, Stream: "w", Payload: "{}", Retention: time.Hour, MaxLen: 1000})
				s += 1000
			}
			if _, err := b.Claim(ctx, g.Lease, batch); err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			claimed += len(batch)
		}
	}()
	var prev onetick.Slot
	moved := 0
	for i := 0; i < 40; i++ {
		r.send("read")
		var rep readerReport
		if err := json.Unmarshal([]byte(r.line()), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Error != "" {
			t.Fatalf("read %d in another process while this one claims: %s", i, rep.Error)
		}
		if rep.Leader != g.Lease || rep.Terms != 1 {
			t.Fatalf("read %d: leader %+v, %d terms; want %+v, 1", i, rep.Leader, rep.Terms, g.Lease)
		}
		if rep.Last < prev {
			t.Fatalf("read %d: last-fired slot went back from %s to %s", i, prev, rep.Last)
		}
		if rep.Last > prev {
			moved++
		}
		prev = rep.Last
	}
	close(stop)
	wg.Wait()
	r.wait()
	if moved < 2 {
		t.Fatalf("the reader saw the last-fired slot move %d times in 40 reads while %d ticks were claimed", moved, claimed)
	}
	_ = sqlite.ErrClosed
}
