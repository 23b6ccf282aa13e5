//go:build verify

package verify

// A damaged store under a running fleet: keys that an operator's mistake,
// a migration script or another application sharing the Redis leave
// behind, made while three replicas run, then repaired.

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// repairCmd runs `onetick repair` against the fleet's store.
func (f *Fleet) repairCmd(args ...string) (string, int) {
	f.t.Helper()
	cmd := exec.Command(binPath, append([]string{"repair", "--config", f.cfgPath, "--redis", f.Redis.URL()}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatal(err)
	}
	return string(out), code
}

// missedBetween counts a job's missing slots in [from, to].
func missedBetween(a *Analysis, from, to time.Time) int {
	n := 0
	for _, s := range a.Missed {
		if !s.Time().Before(from) && !s.Time().After(to) {
			n++
		}
	}
	return n
}

// TestDamagedStore: three replicas run the three jobs. (a) sec-missed's
// stream key is overwritten with a string and sec-dup's last-fired slot
// with garbage: the others never stop, the damaged ones are refused and
// named, and resume once repaired (by hand for the stream, with
// `onetick repair --apply` for the slot). (b) The lease is overwritten
// with garbage: the leader steps down, no replica leads (all unready,
// naming the key) until `onetick repair --apply`. (c) A history entry is
// garbage and the epoch counter is deleted, then the leader is killed: a
// standby takes over with a larger epoch. No tick is ever appended twice.
func TestDamagedStore(t *testing.T) {
	const scenario = "9. damaged store"
	Scenario(t, scenario)
	f := NewFleet(t, scenario, StartRedis(t))
	for i := 1; i <= 3; i++ {
		f.Start(fmt.Sprintf("r%d", i))
	}
	leader := f.WaitLeader(2 * ttl)
	Settle(3 * time.Second)
	ctx := context.Background()
	var notes []string

	// (a) Per-job damage.
	WaitPhase(500 * time.Millisecond)
	mark := leader.Mark()
	damagedAt := time.Now()
	stream := streamOf(jobMissed)
	if err := f.client.Rename(ctx, stream, stream+":aside").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Set(ctx, stream, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.client.HSet(ctx, prefix+":last", jobDup, "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	if !f.Await(5*time.Second, func() bool {
		n := 0
		for _, j := range []string{jobMissed, jobDup} {
			if _, ok := leader.FindLog(mark, func(l LogLine) bool {
				return strings.HasPrefix(l.Msg, "job's store state is damaged") && l.Str("job") == j
			}); ok {
				n++
			}
		}
		return n == 2
	}) {
		t.Fatal("the leader did not log both damaged jobs within 5s")
	}
	before := len(f.ReadStream(jobGrace))
	if !Poll(10*time.Second, 100*time.Millisecond, func() bool { return len(f.ReadStream(jobGrace)) >= before+5 }) {
		t.Fatal("sec-grace stopped firing while other jobs were damaged")
	}
	m := f.Scrape(leader)
	if v := m.Get("scheduler_broken_jobs"); v != 2 {
		t.Errorf("scheduler_broken_jobs %v on the leader, want 2", v)
	}
	if code, body, _ := leader.Get("/readyz"); code != 200 {
		t.Errorf("/readyz %d %q: broken jobs must not make the leader unready", code, body)
	}
	out, code := f.repairCmd("--apply")
	if code != 1 || !strings.Contains(out, "left alone: "+stream) || !strings.Contains(out, "moved "+prefix+":last field "+jobDup) {
		t.Errorf("repair --apply: code %d\n%s", code, out)
	}
	// The stream by hand, atomically: put the original back.
	if err := f.client.Eval(ctx, "redis.call('DEL', KEYS[1]); return redis.call('RENAME', KEYS[2], KEYS[1])",
		[]string{stream, stream + ":aside"}).Err(); err != nil {
		t.Fatal(err)
	}
	repairedAt := time.Now()
	if !f.Await(10*time.Second, func() bool {
		n := 0
		leader.FindLog(mark, func(l LogLine) bool {
			if strings.HasPrefix(l.Msg, "job's store state usable again") {
				n++
			}
			return false
		})
		return n == 2
	}) {
		t.Fatal("the damaged jobs did not resume within 10s of the repair")
	}
	notes = append(notes, fmt.Sprintf("(a) sec-missed's stream a string and sec-dup's last-fired slot garbage for %s; sec-grace fired on; `onetick repair --apply` moved the slot aside and left the stream (not onetick's) to the operator.",
		repairedAt.Sub(damagedAt).Round(100*time.Millisecond)))

	// (b) The lease overwritten while the leader holds it.
	Settle(2 * time.Second)
	WaitPhase(500 * time.Millisecond)
	oldEpoch := leader.Epoch()
	marks := f.Marks()
	leaseAt := time.Now()
	if err := f.client.Set(ctx, prefix+":leader", "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if !Poll(2*ttl, 100*time.Millisecond, func() bool {
		for _, r := range f.Live() {
			if code, body, err := r.Get("/readyz"); err != nil || code != 503 || !strings.Contains(body, prefix+":leader") {
				return false
			}
		}
		return true
	}) {
		t.Fatal("not every replica reported the damaged lease on /readyz within 2 ttl")
	}
	if ls, _ := f.Leaders(); len(ls) != 0 {
		t.Errorf("%d replicas report leading on a damaged lease", len(ls))
	}
	out, code = f.repairCmd("--apply")
	if code != 0 || !strings.Contains(out, "moved "+prefix+":leader") {
		t.Fatalf("repair --apply of the lease: code %d\n%s", code, out)
	}
	who, line, ok := f.AwaitBecameLeader(2*ttl, marks, nil, oldEpoch)
	if !ok {
		t.Fatal("no replica led after the lease was repaired")
	}
	leaderless := line.Time.Sub(leaseAt)
	if line.Int("epoch") <= oldEpoch {
		t.Errorf("epoch after the repair %d, want more than %d", line.Int("epoch"), oldEpoch)
	}
	leader = who
	notes = append(notes, fmt.Sprintf("(b) lease overwritten with garbage under a live leader: it stepped down at its next renewal, every replica answered /readyz 503 naming the key, `onetick repair --apply` moved it aside; a new leader %s after the damage (the repair was run as soon as all replicas reported it).",
		leaderless.Round(10*time.Millisecond)))

	// (c) A garbage history entry and a deleted epoch counter, then a crash.
	Settle(2 * time.Second)
	if err := f.client.LPush(ctx, prefix+":terms", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Del(ctx, prefix+":epoch").Err(); err != nil {
		t.Fatal(err)
	}
	oldEpoch = leader.Epoch()
	marks = f.Marks()
	WaitPhase(500 * time.Millisecond)
	f.Kill(leader)
	f.Start("r4")
	who, line, ok = f.AwaitBecameLeader(ttl+renew+5*time.Second, marks, leader, oldEpoch)
	if !ok {
		t.Fatal("no takeover after the kill with a damaged history and no epoch counter")
	}
	if line.Int("epoch") <= oldEpoch {
		t.Errorf("epoch after the takeover %d, want more than %d (never repeats)", line.Int("epoch"), oldEpoch)
	}
	if _, ok := who.FindLog(marks[who], MsgPrefix("store state damaged (auxiliary, skipped)")); !ok {
		t.Errorf("%s did not report the damaged history", who.Name)
	}
	notes = append(notes, fmt.Sprintf("(c) a garbage history entry and a deleted epoch counter, then kill -9 of the leader: %s took over with epoch %d > %d; the history damage was logged as auxiliary.",
		who.Name, line.Int("epoch"), oldEpoch))
	Settle(3 * time.Second)

	as := f.Snapshot()
	CheckInvariants(t, as, jobGrace, jobDup)
	f.CheckMissedCounters(as)
	gapA := missedBetween(as[jobMissed], damagedAt.Add(-interval), repairedAt.Add(interval))
	gapB := func(j string) int {
		return missedBetween(as[j], leaseAt.Add(-interval), leaseAt.Add(leaderless+interval))
	}
	notes = append(notes, fmt.Sprintf("Gaps: (a) sec-missed %d slots (counted as missed), sec-dup 0 (caught up), sec-grace 0; (b) sec-missed %d, sec-grace %d, sec-dup %d.",
		gapA, gapB(jobMissed), gapB(jobGrace), gapB(jobDup)))
	for _, r := range f.Live() {
		f.Stop(r)
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 3, Duplicates: TotalDuplicates(as), Missed: MissedSummary(as), Notes: notes})
}
