package onetick_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
)

// every10 is a job of "*/10 * * * *" that must start within a minute of
// its slot and succeed within five.
func every10(t *testing.T, name string) onetick.Job {
	return dlJob(t, name, "*/10 * * * *", onetick.Deadline{Start: time.Minute, Finish: 5 * time.Minute})
}

func ms(d time.Duration) string { return strconv.FormatInt(int64(onetick.SlotOf(dlT0.Add(d))), 10) }

// A job turns late when a slot misses its start deadline, stays late
// (nothing more is sent) until a later slot meets both deadlines, and is
// announced once each way, to a receiver that checks the signature.
func TestDeadlineNotifiesStateChanges(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, e *dlEnv) {
		rcv, wh := newReceiver(t, e.clk)
		reg := prometheus.NewRegistry()
		w, m := e.watcher(wh, reg, every10(t, "report"))
		missedStart := m.DeadlineMissed.WithLabelValues(onetick.DeadlineStart)

		e.claim("report", 0)
		e.check(w)
		e.at(30 * time.Second)
		e.start("report")
		e.at(2 * time.Minute)
		e.finish("report")
		e.check(w)
		if st, ok := w.DeadlineState("report"); !ok || st.Late {
			t.Fatalf("a job that met both deadlines: %+v, %v", st, ok)
		}

		// 10:10 is claimed and never started.
		e.at(10 * time.Minute)
		e.claim("report", 10*time.Minute)
		e.check(w)
		e.at(11*time.Minute + time.Second)
		e.check(w)
		want := []notice{{ID: "report:start:late:" + ms(10*time.Minute), Job: "report", Status: "late", Deadline: "start",
			Slot: "2026-12-02T10:10:00.000Z", Due: "2026-12-02T10:11:00.000Z", SlotMS: int64(onetick.SlotOf(dlT0.Add(10 * time.Minute)))}}
		if got := rcv.notices(); len(got) != 1 || got[0] != want[0] {
			t.Fatalf("notices %+v, want %+v", got, want)
		}
		st, ok := w.DeadlineState("report")
		if !ok || !st.Late || st.Missed != onetick.DeadlineStart || st.Slot != onetick.SlotOf(dlT0.Add(10*time.Minute)) {
			t.Fatalf("state %+v, %v", st, ok)
		}
		if testutil.ToFloat64(missedStart) != 1 || testutil.ToFloat64(m.LateJobs) != 1 {
			t.Fatalf("missed %v, late jobs %v", testutil.ToFloat64(missedStart), testutil.ToFloat64(m.LateJobs))
		}
		if v := testutil.ToFloat64(m.JobDeadlineMissed.WithLabelValues("report", "start")); v != 1 {
			t.Fatalf("the job's own series: %v", v)
		}
		if n := e.logs.count("job is late", "job=report", "deadline=start"); n != 1 {
			t.Fatalf("%d log lines naming the late job", n)
		}

		// Still late: a second check, and the late run itself, send nothing.
		e.at(12 * time.Minute)
		e.check(w)
		e.start("report")
		e.finish("report")
		e.at(12*time.Minute + 30*time.Second)
		e.check(w)
		if got := rcv.notices(); len(got) != 1 {
			t.Fatalf("while still late: %+v", got)
		}
		if st, _ := w.DeadlineState("report"); !st.Late {
			t.Fatalf("a slot that started late stays late: %+v", st)
		}

		// 10:20 starts in time: recovered, announced once.
		e.at(20 * time.Minute)
		e.claim("report", 20*time.Minute)
		e.at(20*time.Minute + 10*time.Second)
		e.start("report")
		e.check(w)
		got := rcv.notices()
		if len(got) != 2 || got[1].ID != "report:start:ok:"+ms(20*time.Minute) || got[1].Status != "ok" || got[1].Takeover {
			t.Fatalf("after recovery: %+v", got)
		}
		e.at(21 * time.Minute)
		e.finish("report")
		e.check(w)
		if got := rcv.notices(); len(got) != 2 {
			t.Fatalf("a second check after recovery: %+v", got)
		}
		if testutil.ToFloat64(missedStart) != 1 || testutil.ToFloat64(m.LateJobs) != 0 {
			t.Fatalf("after recovery: missed %v, late jobs %v", testutil.ToFloat64(missedStart), testutil.ToFloat64(m.LateJobs))
		}
		if n := e.logs.count("meets its deadlines again", "job=report"); n != 1 {
			t.Fatalf("%d log lines of the recovery", n)
		}
		if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
			t.Fatalf("lint: %v %v", problems, err)
		}

		// A finish deadline missed: 10:30 starts in time, never succeeds.
		e.at(30 * time.Minute)
		e.claim("report", 30*time.Minute)
		e.start("report")
		e.at(35*time.Minute + time.Second)
		e.check(w)
		got = rcv.notices()
		if len(got) != 3 || got[2].ID != "report:finish:late:"+ms(30*time.Minute) {
			t.Fatalf("finish missed: %+v", got)
		}

		// A new leader finds the job late: it announces it once, marked
		// takeover, under the same id; it counts no new miss.
		w2, m2 := e.watcher(wh, nil, every10(t, "report"))
		e.at(36 * time.Minute)
		e.check(w2)
		e.check(w2)
		got = rcv.notices()
		if len(got) != 4 || got[3].ID != got[2].ID || !got[3].Takeover {
			t.Fatalf("takeover: %+v", got)
		}
		if v := testutil.ToFloat64(m2.DeadlineMissed.WithLabelValues(onetick.DeadlineFinish)); v != 0 {
			t.Fatalf("the new leader counted %v misses", v)
		}
		if testutil.ToFloat64(m2.LateJobs) != 1 {
			t.Fatal("the new leader's gauge")
		}
	})
}

// A slot no leader fired (no record) is missed, once the ledger holds
// an older record of the job; a job new to the ledger is not judged on
// the slots before its first record.
func TestDeadlineUnfiredSlot(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, e *dlEnv) {
		rcv, wh := newReceiver(t, e.clk)
		w, _ := e.watcher(wh, nil, every10(t, "gap"), every10(t, "fresh"))
		e.at(15 * time.Minute) // fresh has never run: 10:00 and 10:10 are not its to miss
		e.check(w)
		if st, ok := w.DeadlineState("fresh"); !ok || st.Late {
			t.Fatalf("a job new to the ledger: %+v, %v", st, ok)
		}
		e.at(20 * time.Minute)
		e.claim("gap", 20*time.Minute)
		e.claim("fresh", 20*time.Minute)
		e.start("gap")
		e.start("fresh")
		e.finish("gap")
		e.finish("fresh")
		e.at(25 * time.Minute)
		e.check(w)
		if got := rcv.notices(); len(got) != 0 {
			t.Fatalf("notices %+v", got)
		}
		// 10:30 of gap fired by no one (a failover gap); fresh's is run.
		e.at(30 * time.Minute)
		e.claim("fresh", 30*time.Minute)
		e.start("fresh")
		e.at(31*time.Minute + time.Second)
		e.check(w)
		got := rcv.notices()
		if len(got) != 1 || got[0].ID != "gap:start:late:"+ms(30*time.Minute) {
			t.Fatalf("notices %+v", got)
		}
	})
}

// A notice the receiver refuses is sent again at the next check; one
// whose state changed back before it was delivered is not sent at all.
func TestDeadlineNotifyRetries(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, e *dlEnv) {
		rcv, wh := newReceiver(t, e.clk)
		w, _ := e.watcher(wh, nil, every10(t, "r"))
		e.claim("r", 0)
		e.start("r")
		e.finish("r")
		e.at(10 * time.Minute)
		e.claim("r", 10*time.Minute)
		rcv.setFail(true)
		e.at(11*time.Minute + time.Second)
		e.check(w)
		if n := e.logs.count("deadline notice not delivered", "job=r"); n != 1 {
			t.Fatalf("%d log lines of the failed notice", n)
		}
		rcv.setFail(false)
		e.at(11*time.Minute + 11*time.Second)
		e.check(w)
		e.check(w)
		if got := rcv.notices(); len(got) != 1 || got[0].Status != "late" {
			t.Fatalf("after the receiver came back: %+v", got)
		}
		// Recovered while the receiver is down, late again before it is
		// back: the receiver saw late, and nothing else is due.
		e.start("r")
		e.finish("r")
		e.at(20 * time.Minute)
		e.claim("r", 20*time.Minute)
		e.start("r")
		rcv.setFail(true)
		e.check(w)
		e.finish("r")
		e.at(30 * time.Minute)
		e.claim("r", 30*time.Minute)
		e.at(31*time.Minute + time.Second)
		rcv.setFail(false)
		e.check(w)
		if got := rcv.notices(); len(got) != 1 {
			t.Fatalf("a change undone before delivery was sent: %+v", got)
		}
	})
}

// Only a leader checks: a standby has no states and sends nothing; when
// it starts leading it announces the jobs already late, as takeover.
func TestDeadlineLeadership(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, e *dlEnv) {
		rcv, wh := newReceiver(t, e.clk)
		leading := false
		m, err := onetick.NewMetrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := onetick.NewDeadlineWatcher(onetick.DeadlineConfig{Ledger: e.b, Jobs: []onetick.Job{every10(t, "l")},
			Notifier: wh, Metrics: m, Clock: e.clk, Leading: func() bool { return leading }})
		if err != nil {
			t.Fatal(err)
		}
		e.claim("l", 0)
		e.at(10 * time.Minute)
		e.claim("l", 10*time.Minute)
		e.at(12 * time.Minute)
		e.check(w)
		if _, ok := w.DeadlineState("l"); ok || len(w.DeadlineStates()) != 0 || len(rcv.notices()) != 0 {
			t.Fatal("a standby judged")
		}
		leading = true
		e.check(w)
		got := rcv.notices()
		if len(got) != 1 || !got[0].Takeover || got[0].ID != "l:start:late:"+ms(10*time.Minute) {
			t.Fatalf("the new leader's notices: %+v", got)
		}
		if sts := w.DeadlineStates(); len(sts) != 1 || !sts[0].Late {
			t.Fatalf("states %+v", sts)
		}
		leading = false
		e.check(w)
		if len(w.DeadlineStates()) != 0 || testutil.ToFloat64(m.LateJobs) != 0 {
			t.Fatal("a replica that stopped leading kept its states")
		}
		leading = true
		e.check(w)
		if got := rcv.notices(); len(got) != 2 || !got[1].Takeover {
			t.Fatalf("leading again: %+v", got)
		}
	})
}

// Without a ledger the watcher says so once, and judges nothing.
func TestDeadlineNeedsLedger(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, e *dlEnv) {
		w, err := onetick.NewDeadlineWatcher(onetick.DeadlineConfig{Jobs: []onetick.Job{every10(t, "n")}, Clock: e.clk,
			Logger: slogTo(e.logs)})
		if err != nil {
			t.Fatal(err)
		}
		e.check(w)
		e.check(w)
		if n := e.logs.count("need the run ledger"); n != 1 {
			t.Fatalf("%d log lines", n)
		}
	})
}

// With the store's ledger off, the watcher says so once.
func TestDeadlineLedgerOff(t *testing.T) {
	logs := &logBuf{t: t}
	b := memory.New(memory.Options{Ledger: onetick.LedgerRetention{Off: true}})
	w, err := onetick.NewDeadlineWatcher(onetick.DeadlineConfig{Ledger: b, Jobs: []onetick.Job{every10(t, "n")}, Logger: slogTo(logs)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.count("need the run ledger"); n != 1 {
		t.Fatalf("%d log lines", n)
	}
}

// Run checks every CheckEvery by the clock it is given.
func TestDeadlineRun(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, e *dlEnv) {
		rcv, wh := newReceiver(t, e.clk)
		arrived := make(chan struct{}, 4)
		rcv.onNotice = func() { arrived <- struct{}{} }
		w, _ := e.watcher(wh, nil, every10(t, "run"))
		e.claim("run", 0)
		e.at(2 * time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		<-arrived // the first check: late
		if err := e.clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// Ticks of the clock below may start checks: the job is still
		// late in all of them until 10:10 starts.
		e.start("run")
		e.finish("run")
		e.at(10 * time.Minute)
		e.claim("run", 10*time.Minute)
		e.at(10*time.Minute + 10*time.Second)
		e.start("run")
		e.clk.Advance(onetick.DefaultDeadlineCheckEvery)
		<-arrived // the check after the tick: ok
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := rcv.notices()
		if len(got) != 2 || got[0].Status != "late" || got[1].Status != "ok" {
			t.Fatalf("notices %+v", got)
		}
	})
}

// fakeSource is a JobSource whose jobs the test sets.
type fakeSource struct {
	jobs    []onetick.Job
	version int64
}

func (s *fakeSource) Jobs(context.Context) ([]onetick.Job, int64, error) {
	return s.jobs, s.version, nil
}
func (s *fakeSource) Version(context.Context) (int64, error) { return s.version, nil }

// Jobs defined at run time are watched from their definition's time on,
// and forgotten (with their own series) when removed.
func TestDeadlineRunTimeJobs(t *testing.T) {
	eachLedgerStore(t, func(t *testing.T, e *dlEnv) {
		m, err := onetick.NewMetrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		dyn := every10(t, "dyn")
		dyn.Since = dlT0.Add(15 * time.Minute)
		src := &fakeSource{jobs: []onetick.Job{dyn, dlJob(t, "plain", "@hourly", onetick.Deadline{})}, version: 1}
		w, err := onetick.NewDeadlineWatcher(onetick.DeadlineConfig{Ledger: e.b, Source: src, Metrics: m, Clock: e.clk})
		if err != nil {
			t.Fatal(err)
		}
		// An older job of the same name left records; 10:10 was never
		// fired. Slots before the definition are not dyn's to miss.
		e.claim("dyn", 0)
		e.at(19 * time.Minute)
		e.check(w)
		if st, ok := w.DeadlineState("dyn"); !ok || st.Late {
			t.Fatalf("before its first slot: %+v, %v", st, ok)
		}
		if _, ok := w.DeadlineState("plain"); ok {
			t.Fatal("a job without a deadline is watched")
		}
		e.at(21 * time.Minute) // 10:20 never fired
		e.check(w)
		if st, _ := w.DeadlineState("dyn"); !st.Late || st.Slot != onetick.SlotOf(dlT0.Add(20*time.Minute)) {
			t.Fatalf("10:20 missed: %+v", st)
		}
		if v := testutil.ToFloat64(m.JobDeadlineMissed.WithLabelValues("dyn", "start")); v != 1 {
			t.Fatalf("dyn's series: %v", v)
		}
		src.jobs, src.version = nil, 2
		e.check(w)
		if _, ok := w.DeadlineState("dyn"); ok || testutil.ToFloat64(m.LateJobs) != 0 {
			t.Fatal("a removed job is still watched")
		}
		if n := testutil.CollectAndCount(m.JobDeadlineMissed); n != 0 {
			t.Fatalf("%d series of removed jobs", n)
		}
	})
}
