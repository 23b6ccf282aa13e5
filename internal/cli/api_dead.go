package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/worker"
)

// Dead letters over HTTP: a job's list, and a replay.

// Bounds of a job's dead-letter listing: the store lists the dead letters
// of every job, so a request reads at most deadScan of them, in pages of
// deadPage, and says where to go on (next) when it stopped before the end.
const (
	deadPage         = 1000
	deadScan         = 10_000
	defaultDeadLimit = 100
	maxDeadLimit     = 1000
)

// workStore is what the API reads of the workers (every shard's, merged:
// workInspector), or a 501.
func (a *api) workStore() (worker.Inspector, error) {
	if a.store == nil || a.file == nil {
		return nil, &statusError{http.StatusNotImplemented, "this replica has no worker store"}
	}
	ws, err := workInspector(a.store, a.file.Worker.Group)
	if err != nil {
		return nil, &statusError{http.StatusNotImplemented, err.Error()}
	}
	return ws, nil
}

// jobDeadLetters returns up to limit dead letters of job with ids after
// after, oldest first, reading at most deadScan; next continues the
// listing ("" at its end).
func jobDeadLetters(ctx context.Context, in worker.Inspector, job, after string, limit int) (out []worker.DeadLetter, next string, err error) {
	scanned := 0
	for {
		page, err := in.DeadLetters(ctx, after, deadPage)
		if err != nil {
			return nil, "", err
		}
		for _, d := range page {
			scanned++
			after = d.ID
			if d.Job == job {
				out = append(out, d)
				if len(out) == limit {
					return out, after, nil
				}
			}
		}
		if len(page) < deadPage {
			return out, "", nil
		}
		if scanned >= deadScan {
			return out, after, nil
		}
	}
}

// deadOfJob is GET /api/v1/jobs/{job}/dead?after=&limit=: the job's dead
// letters, oldest first.
func (a *api) deadOfJob(w http.ResponseWriter, r *http.Request) {
	ws, err := a.workStore()
	if err != nil {
		fail(w, err)
		return
	}
	limit := defaultDeadLimit
	if x := r.URL.Query().Get("limit"); x != "" {
		n, err := strconv.Atoi(x)
		if err != nil || n < 1 || n > maxDeadLimit {
			fail(w, &onetick.InputError{Msg: fmt.Sprintf("limit: want 1 .. %d, got %s", maxDeadLimit, onetick.Excerpt(x))})
			return
		}
		limit = n
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	dls, next, err := jobDeadLetters(ctx, ws, r.PathValue("job"), r.URL.Query().Get("after"), limit)
	if err != nil {
		fail(w, err)
		return
	}
	if dls == nil {
		dls = []worker.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, struct {
		Dead []worker.DeadLetter `json:"dead"`
		Next string              `json:"next,omitempty"`
	}{dls, next})
}

// replay is POST /api/v1/dead/{id}/replay with {"reason", "who"}: the
// dead letter's tick goes back to its stream (same tick id, attempt 1),
// as `onetick dead replay ID` does.
func (a *api) replay(w http.ResponseWriter, r *http.Request) {
	var b actorBody
	if err := readJSON(w, r, controlBodyLimit, &b); err != nil {
		fail(w, err)
		return
	}
	ws, err := a.workStore()
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	id := r.PathValue("id")
	dl, err := ws.Replay(ctx, id)
	if errors.Is(err, worker.ErrDeadLetterNotFound) {
		writeJSON(w, http.StatusNotFound, apiError{fmt.Sprintf("no dead letter %s in group %s (it may have been replayed already)",
			onetick.Excerpt(id), onetick.Excerpt(a.file.Worker.Group))})
		return
	}
	if err != nil {
		fail(w, err)
		return
	}
	act := a.actor(r, b)
	a.log.Info("dead letter replayed through the API", "job", dl.Job, "tick", dl.Tick, "dead_letter", dl.ID, "who", act.Who, "reason", act.Reason)
	writeJSON(w, http.StatusOK, dl)
}
