package storekit

import (
	"context"
	"fmt"

	"github.com/onetick/onetick"
)

// PauseCase is a pause or resume of a job after the actions Before
// (each ActionPause or ActionResume), and what it answers: the control
// log's detail, Changed, Paused and how many intervals the job keeps.
type PauseCase struct {
	Name      string
	Before    []string
	Action    string
	Detail    string
	Changed   bool
	Paused    bool
	Intervals int
}

// PauseCases returns the pause rules' table of cases.
func PauseCases() []PauseCase {
	var many []string
	for range MaxIntervals + 1 {
		many = append(many, ActionPause, ActionResume)
	}
	return []PauseCase{
		{Name: "pause", Action: ActionPause, Changed: true, Paused: true, Intervals: 1},
		{Name: "pause paused", Before: []string{ActionPause}, Action: ActionPause, Detail: AlreadyPaused, Paused: true, Intervals: 1},
		{Name: "resume", Before: []string{ActionPause}, Action: ActionResume, Changed: true, Intervals: 1},
		{Name: "resume never paused", Action: ActionResume, Detail: WasNotPaused},
		{Name: "resume resumed", Before: []string{ActionPause, ActionResume}, Action: ActionResume, Detail: WasNotPaused, Intervals: 1},
		{Name: "pause resumed", Before: []string{ActionPause, ActionResume}, Action: ActionPause, Changed: true, Paused: true, Intervals: 2},
		{Name: "pause beyond the most intervals", Before: many, Action: ActionPause, Changed: true, Paused: true, Intervals: MaxIntervals},
	}
}

// Check compares a store's answer to the case's pause or resume, and the
// newest record of its control log, with the case; the error says what
// differs.
func (pc PauseCase) Check(c onetick.JobControl, log onetick.ControlRecord) error {
	if c.Changed != pc.Changed || c.Paused != pc.Paused || len(c.Intervals) != pc.Intervals {
		return fmt.Errorf("changed %v, paused %v, %d intervals; want %v, %v, %d", c.Changed, c.Paused, len(c.Intervals),
			pc.Changed, pc.Paused, pc.Intervals)
	}
	if log.Action != pc.Action || log.Detail != pc.Detail {
		return fmt.Errorf("control log %s %q, want %s %q", log.Action, log.Detail, pc.Action, pc.Detail)
	}
	return nil
}

// Run runs the case's actions on job "j" of store ctl, Before by "bob",
// the case's own by a, calling between (if not nil) before each, and
// returns the answer to the last and the control log's newest record.
func (pc PauseCase) Run(ctx context.Context, ctl onetick.Controller, a onetick.Actor, between func()) (onetick.JobControl, onetick.ControlRecord, error) {
	do := func(action string, a onetick.Actor) (onetick.JobControl, error) {
		if between != nil {
			between()
		}
		if action == ActionPause {
			return ctl.Pause(ctx, "j", a)
		}
		return ctl.Resume(ctx, "j", a)
	}
	for _, x := range pc.Before {
		if _, err := do(x, onetick.Actor{Who: "bob"}); err != nil {
			return onetick.JobControl{}, onetick.ControlRecord{}, err
		}
	}
	c, err := do(pc.Action, a)
	if err != nil {
		return onetick.JobControl{}, onetick.ControlRecord{}, err
	}
	log, err := ctl.ControlLog(ctx, 1)
	if err != nil {
		return c, onetick.ControlRecord{}, err
	}
	if len(log) != 1 {
		return c, onetick.ControlRecord{}, fmt.Errorf("control log holds %d records after a %s", len(log), pc.Action)
	}
	return c, log[0], nil
}

// Verify runs the case on store ctl (see Run) and checks the answer, the
// control log and who it names.
func (pc PauseCase) Verify(ctx context.Context, ctl onetick.Controller, between func()) error {
	a := onetick.Actor{Who: "alice", Reason: "why"}
	c, log, err := pc.Run(ctx, ctl, a, between)
	if err != nil {
		return err
	}
	if log.Who != a.Who {
		return fmt.Errorf("control log names %q, want %q", log.Who, a.Who)
	}
	return pc.Check(c, log)
}
