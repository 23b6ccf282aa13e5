//go:build verify

package verify

import (
	"fmt"
	"testing"
	"time"
)

// TestClockSkew runs the leader with its clock ttl/2 ahead, then (a
// second fleet) ttl/2 behind the store's, and hands leadership over to a
// replica with a correct clock halfway. No entry may be appended before
// its slot (beyond the store's 100ms tolerance), none twice, none missed.
func TestClockSkew(t *testing.T) {
	const scenario = "7. clock skew ±ttl/2"
	Scenario(t, scenario)
	var handovers []time.Duration
	var notes []string
	total := map[string]*Analysis{}
	for _, off := range []time.Duration{ttl / 2, -ttl / 2} {
		t.Run(fmt.Sprintf("offset%+v", off), func(t *testing.T) {
			f := NewFleet(t, scenario, StartRedis(t))
			skewed := f.Start("skewed", WithEnv("ONETICK_TEST_CLOCK_OFFSET="+off.String()))
			if _, ok := skewed.FindLog(0, Msg("test build: replica clock is skewed")); !ok {
				t.Fatalf("the skewed replica did not report its clock offset (binary not built with -tags verify?)")
			}
			if l := f.WaitLeader(2 * ttl); l != skewed {
				t.Fatalf("%s leads, want the skewed replica (started first)", l.Name)
			}
			f.Start("ok-1")
			f.Start("ok-2")
			Settle(6 * time.Second)
			m := f.Scrape(skewed)
			measured := time.Duration(m.Get("scheduler_store_clock_offset_seconds") * float64(time.Second))
			// The replica measures store minus its own clock: about -off.
			if d := measured + off; d > 200*time.Millisecond || d < -200*time.Millisecond {
				t.Errorf("the skewed replica measures a store clock offset of %s, want about %s", measured, -off)
			}
			enqueued := 0.0
			for _, j := range allJobs {
				enqueued += m.Job("scheduler_job_ticks_enqueued_total", j)
			}
			_, refusedEarly := skewed.FindLog(0, MsgPrefix("store refused an early tick"))

			// Hand over to a replica with a correct clock.
			marks := f.Marks()
			WaitPhase(500 * time.Millisecond)
			termAt := f.Stop(skewed)
			who, line, ok := f.AwaitBecameLeader(2*ttl, marks, skewed, skewed.Epoch())
			if !ok {
				t.Fatal("nobody took over from the skewed leader")
			}
			handovers = append(handovers, line.Time.Sub(termAt))
			Settle(4 * time.Second)
			as := f.Snapshot()
			CheckInvariants(t, as, allJobs...)
			f.CheckMissedCounters(as)
			for _, j := range allJobs {
				if total[j] == nil {
					total[j] = &Analysis{Job: j}
				}
				total[j].Duplicates = append(total[j].Duplicates, as[j].Duplicates...)
				total[j].Missed = append(total[j].Missed, as[j].Missed...)
			}
			notes = append(notes, fmt.Sprintf("offset %+v: the skewed leader measured a store offset of %s and enqueued %v ticks (store refused early ticks: %v); earliest append relative to its slot %s; handed over to %s in %s.",
				off, fmtSignedDur(measured), enqueued, refusedEarly, fmtSignedDur(earliest(as)), who.Name, fmtDur(line.Time.Sub(termAt))))
		})
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 2, Duplicates: TotalDuplicates(total), Missed: MissedSummary(total),
		TimeLabel: "SIGTERM → became leader", Times: handovers, Notes: notes})
}

// earliest is the smallest (append time - slot) over every entry.
func earliest(as map[string]*Analysis) time.Duration {
	first := true
	var d time.Duration
	for _, a := range as {
		for _, e := range a.Entries {
			x := e.At.Sub(e.Slot.Time())
			if first || x < d {
				d, first = x, false
			}
		}
	}
	return d
}

func fmtSignedDur(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}
