package onetick

import (
	"context"
	"time"
)

// Status is what `onetick status` and the /status endpoint show: the
// current leader, the recent terms, and each job's position. It is read
// from the store, so any replica (or any machine with access to the store)
// sees the same thing.
type Status struct {
	StoreTime time.Time   `json:"store_time"`
	Leader    *LeaderView `json:"leader"`
	History   []Term      `json:"history"`
	Jobs      []JobStatus `json:"jobs"`
	// Damage lists every damaged piece of store state found (empty when
	// the store is healthy). Everything else in the status is what could
	// still be read.
	Damage []*DamageError `json:"damage"`
	// Controls are the most recent controls (pause, resume, trigger,
	// backfill), newest first.
	Controls []ControlRecord `json:"controls"`
	// Relays are the relays the jobs use, with their backlogs
	// (relaystatus.go).
	Relays []RelayStatus `json:"relays"`
	// Shards and Replicas are set with more than one shard
	// (ReadShardedStatus): each shard's lease and terms, in shard order,
	// and who leads which shard, by holder. Leader and History, one
	// lease's, are then empty. Absent with one shard.
	Shards   []ShardStatus   `json:"shards,omitempty"`
	Replicas []ReplicaShards `json:"replicas,omitempty"`
}

// LeaderView is the current lease.
type LeaderView struct {
	Holder  string  `json:"holder"`
	Epoch   Epoch   `json:"epoch"`
	TTLLeft float64 `json:"ttl_left_seconds"`
}

// JobStatus is one job's position in its schedule.
type JobStatus struct {
	Name      string `json:"name"`
	Schedule  string `json:"schedule"`
	Zone      string `json:"timezone"`
	Prefer    Prefer `json:"prefer"`
	LastFired *Slot  `json:"last_fired,omitempty"`
	Next      *Slot  `json:"next,omitempty"`
	// Gap counts slots after the last fired one that were due more than
	// GapTolerance ago and have not fired; GapFrom and GapTo bound them.
	Gap     int64 `json:"gap"`
	GapFrom *Slot `json:"gap_from,omitempty"`
	GapTo   *Slot `json:"gap_to,omitempty"`
	// Damage is damaged state of this job (its stream, its last-fired
	// slot): the store refuses its ticks until it is repaired.
	Damage []*DamageError `json:"damage,omitempty"`
	// Paused is set while the job is paused: since when, by whom, why.
	Paused *PauseView `json:"paused,omitempty"`
}

// PauseView is a paused job's pause.
type PauseView struct {
	Since  time.Time `json:"since"`
	Who    string    `json:"who"`
	Reason string    `json:"reason,omitempty"`
}

// GapTolerance is how late a slot may be before Status reports it as a gap:
// long enough for the leader to fire a slot that just came due.
const GapTolerance = 2 * time.Second

// describer is implemented by schedules that can name themselves and their
// zone (cron.Schedule does).
type describer interface {
	String() string
	Location() *time.Location
}

// ReadStatus reads the status of jobs from b, with up to history terms.
// Damaged state does not make it fail: it reads what it can and lists the
// damage in Status.Damage (and per job). It fails only when the store
// cannot be reached.
func ReadStatus(ctx context.Context, b Backend, jobs []Job, history int) (*Status, error) {
	now, err := b.Time(ctx)
	if err != nil {
		return nil, err
	}
	st := &Status{StoreTime: now.UTC(), Jobs: []JobStatus{}, Damage: []*DamageError{}}
	seen := map[[3]string]bool{}
	damaged := func(err error) error {
		ds := Damages(err)
		if ds == nil {
			return err
		}
		for _, d := range ds {
			if k := [3]string{d.Key, d.Field, d.Job}; !seen[k] {
				seen[k] = true
				st.Damage = append(st.Damage, d)
			}
		}
		return nil
	}
	info, err := b.Leader(ctx)
	if err = damaged(err); err != nil {
		return nil, err
	}
	if info.Held {
		st.Leader = &LeaderView{Holder: info.Lease.Holder, Epoch: info.Lease.Epoch, TTLLeft: info.TTL.Seconds()}
	}
	st.History, err = b.History(ctx, history)
	if err = damaged(err); err != nil {
		return nil, err
	}
	if st.History == nil {
		st.History = []Term{}
	}
	names := make([]string, len(jobs))
	streams := make(map[string]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
		streams[j.Name] = jobStream(j)
	}
	last, err := b.LastFired(ctx, names)
	if err = damaged(err); err != nil {
		return nil, err
	}
	ctl, _, err := b.Controls(ctx)
	if err = damaged(err); err != nil {
		return nil, err
	}
	if st.Controls, err = b.ControlLog(ctx, history); damaged(err) != nil {
		return nil, err
	}
	if st.Controls == nil {
		st.Controls = []ControlRecord{}
	}
	found, err := b.Inspect(ctx, streams)
	if err != nil {
		return nil, err
	}
	_ = damaged(DamageErrors(found))
	byJob := map[string][]*DamageError{}
	for _, d := range st.Damage {
		if d.Job != "" {
			byJob[d.Job] = append(byJob[d.Job], d)
		}
	}
	nowSlot := SlotOf(now)
	for _, j := range jobs {
		js := JobStatus{Name: j.Name, Prefer: j.Prefer, Zone: "UTC", Damage: byJob[j.Name]}
		if js.Prefer == "" {
			js.Prefer = PreferMissed
		}
		if d, ok := j.Schedule.(describer); ok {
			js.Schedule = d.String()
			js.Zone = d.Location().String()
		}
		from := nowSlot
		if l, ok := last[j.Name]; ok {
			js.LastFired = &l
			from = max(l, nowSlot)
			due := nowSlot - Slot(GapTolerance.Milliseconds())
			n := countSlots(j.Schedule, l, due, maxCount)
			if c, ok := ctl[j.Name]; ok && n > 0 {
				n -= pausedSlots(j.Schedule, c, l, due) // paused is not missed
			}
			if n > 0 {
				js.Gap = n
				first := nextSlot(j.Schedule, l)
				lastMissed := prevSlotBefore(j.Schedule, l, due+1)
				js.GapFrom, js.GapTo = &first, &lastMissed
			}
		}
		if n := nextSlot(j.Schedule, from); n != noSlot {
			js.Next = &n
		}
		if c, ok := ctl[j.Name]; ok && c.Paused {
			js.Paused = &PauseView{Since: c.Intervals[len(c.Intervals)-1].Since, Who: c.Actor.Who, Reason: c.Actor.Reason}
		}
		st.Jobs = append(st.Jobs, js)
	}
	st.Relays = readRelays(ctx, b, jobs)
	return st, nil
}

// DefaultStream is the stream of a job that names none.
func DefaultStream(job string) string { return "onetick:stream:" + job }

func jobStream(j Job) string {
	if j.Stream == "" {
		return DefaultStream(j.Name)
	}
	return j.Stream
}
