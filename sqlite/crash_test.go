package sqlite_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/sqlite"
)

// TestKillMidClaim kills a process claiming in a loop with SIGKILL at
// random moments, restarts it on the same file each time (the restarted
// process takes the dead one's lease at once, and its open accepts
// whatever the kill left in the log), and then checks
// the file: no tick is in a stream twice, every tick a claim answered
// Claimed before the kill is there, and no claim was left half written
// (each job's stream holds every slot from the first to its last-fired
// slot exactly once, each with its tick record).
func TestKillMidClaim(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "onetick.db")
	logPath := filepath.Join(dir, "claimed.log")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	// Rounds go on until several kills landed while a claim was under
	// way (after the claimer said "claiming", before "batch"), so that
	// the case this test is about has happened, whatever the timing.
	const minRounds, maxRounds, wantMidClaim = 5, 30, 3
	rounds, midClaim := 0, 0
	for ; rounds < maxRounds && (rounds < minRounds || midClaim < wantMidClaim); rounds++ {
		h := startHelper(t, "claimer", path, envLog+"="+logPath, envName+"=claimer-"+itoa(rounds))
		lastLine := ""
		for n := 1 + rng.IntN(3); n > 0; {
			if lastLine = h.line(); lastLine == "batch" {
				n--
			}
		}
		// Kill at a random moment of the next claims: most of the
		// claimer's time is spent inside one.
		time.Sleep(time.Duration(rng.IntN(10000)) * time.Microsecond)
		for _, l := range h.kill() {
			lastLine = l
		}
		if lastLine == "claiming" {
			midClaim++
		}
	}
	if midClaim < wantMidClaim {
		t.Fatalf("only %d of %d kills landed during a claim", midClaim, rounds)
	}

	claimed := readLog(t, logPath)
	if len(claimed) == 0 {
		t.Fatal("the claimers logged no claimed tick")
	}
	b, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatalf("reopen after %d kills: %v", rounds, err)
	}
	defer b.Close()
	ctx := context.Background()
	last, err := b.LastFired(ctx, crashJobs)
	if err != nil {
		t.Fatal(err)
	}
	inStream := map[string]bool{}
	total := 0
	for _, j := range crashJobs {
		recs, err := b.Stream(ctx, "crash:"+j)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if inStream[r.Tick] {
				t.Fatalf("tick %s is in the stream twice", r.Tick)
			}
			inStream[r.Tick] = true
			if want := crashBase() + onetick.Slot(i*crashStep); r.Slot != want || r.Job != j {
				t.Fatalf("job %s entry %d: slot %s, want %s: a claim was lost or half written", j, i, r.Slot, want)
			}
		}
		if n := len(recs); n == 0 || recs[n-1].Slot != last[j] {
			t.Fatalf("job %s: last-fired slot %s, stream ends at entry %d: the claim's writes disagree", j, last[j], n)
		}
		total += len(recs)
	}
	for id := range claimed {
		if !inStream[id] {
			t.Fatalf("tick %s was answered Claimed before a kill but is not in its stream", id)
		}
	}
	// Every entry has its tick record: a retry would be answered
	// duplicate, never appended again.
	l, err := b.Acquire(ctx, "checker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var again []onetick.Tick
	for id := range inStream {
		job, _, _ := strings.Cut(id, ":")
		tk := onetick.Tick{Job: job, Stream: "crash:" + job, Payload: "{}", Retention: time.Hour, OutOfOrder: true}
		tk.Slot = slotOf(t, id)
		again = append(again, tk)
	}
	res, err := b.Claim(ctx, l.Lease, again)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range res.Outcomes {
		if o != onetick.Duplicate {
			t.Fatalf("claim of %s again: %v, want duplicate (its record must exist)", again[i].ID(), o)
		}
	}
	t.Logf("%d kills (%d during a claim): %d ticks in the streams, %d of them logged as claimed before a kill",
		rounds, midClaim, total, len(claimed))
}

// readLog reads the claimers' log; a line cut short by a kill is left out.
func readLog(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	out := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if l != "" {
			out[l] = true
		}
	}
	return out
}

func slotOf(t *testing.T, id string) onetick.Slot {
	t.Helper()
	_, s, _ := strings.Cut(id, ":")
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("tick id %q", id)
		}
		n = n*10 + int64(c-'0')
	}
	return onetick.Slot(n)
}
