package web_test

import (
	"fmt"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/web"
)

// demoNow is the store's clock of the demo job page.
var demoNow = time.Date(2026, 12, 2, 16, 7, 30, 0, time.UTC)

func intp(n int) *int { return &n }

// demoJobPage is a realistic page of a job that syncs a CRM every 15
// minutes with a deadline: most slots ran on time, some started late
// (a backlog), two failed for good, an afternoon was paused, a stretch was
// missed while no replica led, one runs now, and an operator triggered
// one by hand.
func demoJobPage() *web.JobPage {
	sched, err := cron.Parse("*/15 * * * *", time.UTC)
	if err != nil {
		panic(err)
	}
	const job = "sync-crm"
	dl := onetick.Deadline{Start: 2 * time.Minute, Finish: 10 * time.Minute}
	var runs []onetick.Run
	var dead []web.DeadLetter
	epoch := onetick.Epoch(1796205600123)
	from := demoNow.Add(-web.StripWindow)
	var slots []onetick.Slot
	for t := sched.Next(from); !t.After(demoNow); t = sched.Next(t) {
		slots = append(slots, onetick.SlotOf(t))
	}
	last := slots[len(slots)-1]
	ok := func(rows int) string {
		return fmt.Sprintf("GET https://crm.internal/api/contacts?since=-15m\nfetched %s contacts\nupserted %d, unchanged 1,200", thousands(1200+rows), rows)
	}
	for i, s := range slots {
		t := s.Time()
		r := onetick.Run{Job: job, Slot: s, Tick: onetick.TickID(job, s), Updated: t}
		enq := onetick.RunEvent{What: onetick.EventEnqueued, At: t.Add(4 * time.Millisecond), Epoch: epoch, Replica: "onetick-0"}
		worker := "onetick-1"
		if i%3 == 0 {
			worker = "onetick-2"
		}
		started := func(at time.Duration, attempt int) onetick.RunEvent {
			return onetick.RunEvent{What: onetick.EventStarted, At: t.Add(at), Worker: worker, Attempt: attempt}
		}
		switch {
		case i >= 20 && i < 24: // no replica led: skipped, as older than grace
			if i == 20 {
				r.Fate, r.Reason, r.Through, r.Count = onetick.FateSkipped, onetick.SkipGrace, slots[23], 4
				r.Tick = fmt.Sprintf("%s:skipped:%d-%d", job, s, slots[23])
				r.Events = []onetick.RunEvent{{What: onetick.EventSkipped, At: slots[24].Time().Add(5 * time.Millisecond), Epoch: epoch - 1, Replica: "onetick-2"}}
				runs = append(runs, r)
			}
			continue
		case i >= 52 && i < 60: // paused for a CRM migration
			r.Fate = onetick.FatePaused
			r.Events = []onetick.RunEvent{{What: onetick.EventPaused, At: t.Add(3 * time.Millisecond), Epoch: epoch, Replica: "onetick-0"}}
		case i == 37 || i == 81: // failed for good
			r.Fate, r.Reason = onetick.FateDead, "command sync-crm exited with code 1"
			out := "GET https://crm.internal/api/contacts?since=-15m\nerror: the CRM answered 503 Service Unavailable (retry-after: 600)\n"
			r.Events = []onetick.RunEvent{enq, started(40*time.Millisecond, 1),
				{What: onetick.EventRetried, At: t.Add(2 * time.Second), Worker: worker, Attempt: 1, Detail: "command sync-crm exited with code 1",
					Result: onetick.Result{Exit: intp(1), Duration: 1900 * time.Millisecond, Output: out}},
				started(12*time.Second, 2),
				{What: onetick.EventDead, At: t.Add(14 * time.Second), Worker: worker, Attempt: 2, Detail: "command sync-crm exited with code 1",
					Result: onetick.Result{Exit: intp(1), Duration: 1800 * time.Millisecond, Output: out}}}
			dead = append(dead, web.DeadLetter{ID: fmt.Sprintf("%d-0", s), Tick: r.Tick, Slot: s, At: t.Add(14 * time.Second), Attempts: 2,
				Error: "command sync-crm exited with code 1; last stderr: \"error: the CRM answered 503 Service Unavailable (retry-after: 600)\""})
		case s == last: // runs now
			r.Fate = onetick.FateRunning
			r.Events = []onetick.RunEvent{enq, started(35*time.Millisecond, 1)}
		case i == 66 || i == 67 || i == 68 || i == 90: // a backlog: started late
			r.Fate = onetick.FateSucceeded
			r.Events = []onetick.RunEvent{enq, started(3*time.Minute+20*time.Second, 1),
				{What: onetick.EventSucceeded, At: t.Add(3*time.Minute + 26*time.Second), Worker: worker, Attempt: 1,
					Result: onetick.Result{Exit: intp(0), Duration: 6100 * time.Millisecond, Output: ok(140 + i)}}}
		default:
			r.Fate = onetick.FateSucceeded
			d := time.Duration(2900+37*(i%11)) * time.Millisecond
			r.Events = []onetick.RunEvent{enq, started(38*time.Millisecond, 1),
				{What: onetick.EventSucceeded, At: t.Add(38*time.Millisecond + d), Worker: worker, Attempt: 1,
					Result: onetick.Result{Exit: intp(0), Duration: d, Output: ok(20 + i%17)}}}
		}
		r.Updated = r.Events[len(r.Events)-1].At
		runs = append(runs, r)
	}
	// An operator's trigger: a full resync after the migration.
	tt := slots[88].Time().Add(6 * time.Minute)
	trig := onetick.Run{Job: job, Slot: onetick.SlotOf(tt), Tick: job + ":trigger:full-resync", Kind: onetick.KindTrigger,
		Fate: onetick.FateSucceeded, Events: []onetick.RunEvent{
			{What: onetick.EventEnqueued, At: tt, Replica: "ops (127.0.0.1:53122)"},
			{What: onetick.EventStarted, At: tt.Add(30 * time.Millisecond), Worker: "onetick-1", Attempt: 1},
			{What: onetick.EventSucceeded, At: tt.Add(41 * time.Second), Worker: "onetick-1", Attempt: 1,
				Result: onetick.Result{Exit: intp(0), Duration: 41 * time.Second, Output: "full resync\nfetched 48,210 contacts\nupserted 48,210, unchanged 0"}}}}
	trig.Updated = tt.Add(41 * time.Second)
	runs = append(runs, trig)
	// The ledger's order: newest slot first.
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	for i := 1; i < len(runs); i++ {
		for k := i; k > 0 && runs[k].Slot > runs[k-1].Slot; k-- {
			runs[k], runs[k-1] = runs[k-1], runs[k]
		}
	}
	next := onetick.SlotOf(sched.Next(demoNow))
	st := onetick.JobStatus{Name: job, Schedule: "*/15 * * * *", Zone: "UTC", Prefer: onetick.PreferMissed, LastFired: &last, Next: &next}
	p := &web.JobPage{
		Replica:   web.Replica{Name: "onetick-0", IsLeader: true},
		StoreTime: demoNow,
		Job:       st,
		Deadline:  dl,
		Ledger:    true,
		Strip:     web.BuildStrip(web.StripInput{Schedule: sched, Status: st, Runs: runs, Deadline: dl, Now: demoNow}),
		Runs:      runs[:12],
		MoreRuns:  true,
		Workers:   true,
		Dead:      dead,
		DeadTotal: len(dead),
		Changes:   true,
	}
	return p
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	if len(s) > 3 {
		return s[:len(s)-3] + "," + s[len(s)-3:]
	}
	return s
}
