package cli

import (
	"context"
	"net/http"

	"github.com/onetick/onetick/internal/web"
)

// The page of one job (/jobs/{job}, package web): what the store, its
// ledger and its worker store know of the job, and the job's deadline.

// jobPage is the handler of /jobs/{job}.
func (a *api) jobPage() http.Handler {
	src := &web.JobStore{Backend: a.ops.Backend, AllJobs: a.ops.AllJobs, Deadline: a.deadline, Changes: a.http.Token != ""}
	if a.sched != nil {
		src.Replica = a.replica
	}
	if a.store != nil {
		src.Ledger = a.store.JobLedger
		if a.store.Shards() > 1 {
			src.For = a.store.ForJob
		}
		if _, err := a.workStore(); err == nil {
			src.Dead = a.pageDeadLetters
		}
	}
	return web.JobHandler(src, web.Options{Logger: a.log})
}

// pageDeadLetters lists a job's dead letters for its page, with their
// number from the worker store's status.
func (a *api) pageDeadLetters(ctx context.Context, job string, limit int) ([]web.DeadLetter, int, error) {
	ws, err := a.workStore()
	if err != nil {
		return nil, -1, err
	}
	total := -1
	if st, err := ws.Status(ctx, []string{job}); err == nil && len(st.Jobs) == 1 {
		total = int(st.Jobs[0].Dead)
	}
	dls, _, err := jobDeadLetters(ctx, ws, job, "", limit)
	if err != nil {
		return nil, total, err
	}
	out := make([]web.DeadLetter, len(dls))
	for i, d := range dls {
		out[i] = web.DeadLetter{ID: d.ID, Tick: d.Tick, Slot: d.Slot, At: d.At, Attempts: d.Attempts, Error: d.Error}
	}
	return out, total, nil
}
