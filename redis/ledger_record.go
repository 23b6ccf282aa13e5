package redis

import (
	"encoding/json"
	"time"

	"github.com/onetick/onetick"
)

// A record as the ledger hash keeps it: onetick.Run in JSON with short
// keys, times in store milliseconds, and without what the key or the
// events say already (the tick id is the hash field; Updated is the last
// event's time, as storekit.Note sets it). About a third smaller than
// onetick.Run's own JSON.
type storedRun struct {
	Job     string        `json:"j"`
	Slot    onetick.Slot  `json:"s"`
	Kind    string        `json:"k,omitempty"`
	Fate    onetick.Fate  `json:"f"`
	Reason  string        `json:"r,omitempty"`
	Through onetick.Slot  `json:"t,omitempty"`
	Count   int64         `json:"c,omitempty"`
	Dropped int           `json:"d,omitempty"`
	Events  []storedEvent `json:"e"`
}

type storedEvent struct {
	What     string        `json:"w"`
	At       int64         `json:"a"`
	Epoch    onetick.Epoch `json:"ep,omitempty"`
	Replica  string        `json:"rp,omitempty"`
	Worker   string        `json:"wk,omitempty"`
	Attempt  int           `json:"n,omitempty"`
	Detail   string        `json:"dt,omitempty"`
	Exit     *int          `json:"x,omitempty"`
	Status   int           `json:"st,omitempty"`
	Duration time.Duration `json:"du,omitempty"`
	Output   string        `json:"o,omitempty"`
}

// encodeRun is r as the ledger hash keeps it.
func encodeRun(r onetick.Run) (string, error) {
	s := storedRun{Job: r.Job, Slot: r.Slot, Kind: r.Kind, Fate: r.Fate, Reason: r.Reason, Through: r.Through,
		Count: r.Count, Dropped: r.Dropped, Events: make([]storedEvent, len(r.Events))}
	for i, e := range r.Events {
		s.Events[i] = storedEvent{What: e.What, At: e.At.UnixMilli(), Epoch: e.Epoch, Replica: e.Replica, Worker: e.Worker,
			Attempt: e.Attempt, Detail: e.Detail, Exit: e.Exit, Status: e.Status, Duration: e.Duration, Output: e.Output}
	}
	js, err := json.Marshal(s)
	return string(js), err
}

// decodeRun reads the record of tick back; false when it does not parse.
func decodeRun(tick, v string) (onetick.Run, bool) {
	var s storedRun
	if json.Unmarshal([]byte(v), &s) != nil || s.Job == "" || len(s.Events) == 0 {
		return onetick.Run{}, false
	}
	r := onetick.Run{Job: s.Job, Slot: s.Slot, Tick: tick, Kind: s.Kind, Fate: s.Fate, Reason: s.Reason, Through: s.Through,
		Count: s.Count, Dropped: s.Dropped, Events: make([]onetick.RunEvent, len(s.Events))}
	for i, e := range s.Events {
		r.Events[i] = onetick.RunEvent{What: e.What, At: msTime(e.At), Epoch: e.Epoch, Replica: e.Replica, Worker: e.Worker,
			Attempt: e.Attempt, Detail: e.Detail, Result: onetick.Result{Exit: e.Exit, Status: e.Status, Duration: e.Duration, Output: e.Output}}
	}
	r.Updated = r.Events[len(r.Events)-1].At
	return r, true
}
