package memory

import (
	"context"
	"fmt"
	"strconv"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/worker"
)

// Status implements worker.Inspector.
func (s *WorkerStore) Status(ctx context.Context, jobs []string) (worker.Status, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return worker.Status{}, err
	}
	defer s.b.mu.Unlock()
	st := worker.Status{StoreTime: now.UTC(), Jobs: make([]worker.JobStatus, len(jobs)), Dead: int64(len(g.dead))}
	inFlight := map[string]int{}
	for _, r := range g.running {
		if now.Before(r.expires) {
			inFlight[r.job]++
		}
	}
	for i, j := range jobs {
		js := worker.JobStatus{Job: j, InFlight: inFlight[j], Dead: g.deadCount[j]}
		if l, ok := g.last[j]; ok {
			js.LastOutcome, js.LastTick, js.LastAt = l.outcome, l.tick, l.at.UTC()
		}
		st.Jobs[i] = js
	}
	return st, nil
}

// DoneRecords implements worker.Inspector.
func (s *WorkerStore) DoneRecords(ctx context.Context, ticks []string) (map[string]worker.DoneRecord, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.b.mu.Unlock()
	out := map[string]worker.DoneRecord{}
	for _, t := range ticks {
		if r, ok := g.done[t]; ok && now.Before(r.expires) {
			out[t] = r.rec
		}
	}
	return out, nil
}

// DeadLetters implements worker.Inspector.
func (s *WorkerStore) DeadLetters(ctx context.Context, after string, n int) ([]worker.DeadLetter, error) {
	g, _, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer s.b.mu.Unlock()
	var out []worker.DeadLetter
	for _, dl := range g.dead {
		if len(out) >= n {
			break
		}
		if after == "" || seqOf(dl.ID) > seqOf(after) {
			out = append(out, dl)
		}
	}
	return out, nil
}

// Replay implements worker.Inspector.
func (s *WorkerStore) Replay(ctx context.Context, id string) (worker.DeadLetter, error) {
	g, now, err := s.lock(ctx)
	if err != nil {
		return worker.DeadLetter{}, err
	}
	defer s.b.mu.Unlock()
	for i, dl := range g.dead {
		if dl.ID != id {
			continue
		}
		d := worker.Delivery{Stream: dl.Stream, Job: dl.Job, Slot: dl.Slot, Tick: dl.Tick,
			Epoch: dl.Epoch, Replica: dl.Replica, Payload: dl.Payload}
		s.appendLocked(now, d, 1)
		s.b.noteLocked(now, storekit.RunOf(&d), onetick.RunEvent{What: onetick.EventReplayed})
		g.dead = append(g.dead[:i:i], g.dead[i+1:]...)
		g.deadCount[dl.Job]--
		return dl, nil
	}
	return worker.DeadLetter{}, fmt.Errorf("%w: %s", worker.ErrDeadLetterNotFound, id)
}

// AppendEntry appends r to a stream as a claim would, without the claim's
// checks (a duplicate of a tick, as after a store failover), and returns
// its entry id. It is a test hook.
func (b *Backend) AppendEntry(stream string, r onetick.TickRecord) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	r.ID = strconv.FormatInt(b.opts.Clock.Now().UnixMilli(), 10) + "-" + strconv.FormatInt(b.seq, 10)
	b.streams[stream] = append(b.streams[stream], r)
	b.wakeAppendedLocked()
	return r.ID
}
