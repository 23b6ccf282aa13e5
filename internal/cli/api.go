package cli

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/stores"
	"github.com/onetick/onetick/internal/web"
	"github.com/onetick/onetick/worker"
)

// The HTTP API, on the replica's listener:
//
//	GET  /api/v1/jobs                    every job with its state
//	GET  /api/v1/controls                the control log, newest first
//	POST /api/v1/jobs/{job}/pause        {"reason": "...", "who": "..."}
//	POST /api/v1/jobs/{job}/resume       {"reason": "...", "who": "..."}
//	POST /api/v1/jobs/{job}/trigger      {"payload": {...}, "key": "..."}, or the Idempotency-Key header
//	POST /api/v1/jobs/{job}/backfill     {"from": RFC 3339, "to": RFC 3339, "max": N, "dry_run": bool, "again": bool}
//	GET  /api/v1/jobs/{job}/runs         the job's ledger records (runs.go)
//	GET  /api/v1/jobs/{job}/dead         the job's dead letters, ?after=&limit= (api_dead.go)
//	POST /api/v1/dead/{id}/replay        {"reason": "...", "who": "..."}
//	PUT  /api/v1/jobsets/{set}           a jobs file (YAML or JSON), ?dry_run=true
//	DELETE /api/v1/jobsets/{set}/jobs/{job}
//
// Every change needs "Authorization: Bearer <http.token>"; without a
// token in the configuration the API is read-only. Reads from a client
// that is not on loopback need the token too, when one is configured;
// without one, a listener that is not on loopback refuses them. The Host
// header must name this listener (see hostPolicy). A change from another
// site is refused, and a POST must declare Content-Type: application/json
// (csrf.go). A body is one JSON object (a jobs file for a set), at most its
// endpoint's limit.
// Errors are {"error": "..."} with 400 (bad input, nothing changed), 401,
// 403 (no token configured, a request from another site), 404 (unknown
// job), 408, 413 (body too large, nothing changed), 415 (a POST not
// declared application/json), 421 (Host) or 503 (the store).
//
// GET /jobs/{job} is the page of a job (package web), whose actions call
// the changes above with the token the operator types into it.
type api struct {
	// ops are the actions over the store itself: the jobs, the jobs
	// defined at run time (the fleet's), and with one shard everything.
	ops *onetick.Ops
	// shards, when set, are the actions on a job over its shard's view,
	// and the reads that merge the views (shards.go); nil: ops.
	shards *fleetOps
	http   config.HTTP
	log    *slog.Logger
	sched  *onetick.Scheduler
	file   *config.File   // the configuration: the base of job sets, the worker status
	store  *stores.Handle // the store: its worker store (nil: no worker status)
	// deadline is a job's deadline, for the job page (nil: none).
	deadline func(onetick.Job) onetick.Deadline
}

type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// statusError is a refusal with its own status code.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// fail maps an operation's error to a status code. Values quoted in the
// message are cut (clipQuoted).
func fail(w http.ResponseWriter, err error) {
	var in *onetick.InputError
	var se *statusError
	switch {
	case errors.As(err, &se):
		writeJSON(w, se.code, apiError{clipQuoted(se.msg)})
	case errors.As(err, &in):
		writeJSON(w, http.StatusBadRequest, apiError{clipQuoted(in.Msg)})
	case errors.Is(err, onetick.ErrUnknownJob):
		writeJSON(w, http.StatusNotFound, apiError{clipQuoted(err.Error())})
	default:
		writeJSON(w, http.StatusServiceUnavailable, apiError{clipQuoted(err.Error())})
	}
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme (matched in any case, RFC 9110 section 11.1).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// authorized reports whether r carries the configured token (compared in
// constant time).
func (a *api) authorized(r *http.Request) bool {
	if a.http.Token == "" {
		return false
	}
	got, ok := bearerToken(r.Header.Get("Authorization"))
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(a.http.Token)) == 1
}

// read guards a read (the status, the page, the API's GETs): the Host
// header; on a listener off loopback without a token, nothing; else open
// on loopback, and the token from elsewhere.
func (a *api) read(h http.HandlerFunc) http.HandlerFunc {
	hosts := newHostPolicy(a.http)
	return func(w http.ResponseWriter, r *http.Request) {
		if !hosts.check(w, r) {
			return
		}
		if a.http.OpenWithoutToken() {
			writeJSON(w, http.StatusForbidden, apiError{fmt.Sprintf("refused: this listener (%s) is not on loopback and the configuration sets no http.token, "+
				"so the status, the status page and the API's reads are served to no one; set http.token", a.http.Listen)})
			return
		}
		if a.http.Token != "" && !fromLoopback(r) && !a.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="onetick"`)
			writeJSON(w, http.StatusUnauthorized, apiError{"a bearer token is required from outside loopback (Authorization: Bearer <http.token>)"})
			return
		}
		h(w, r)
	}
}

// change guards a change: the Host header, a request from another site
// (csrf.go), always the token, and a POST's JSON Content-Type.
func (a *api) change(h http.HandlerFunc) http.HandlerFunc {
	hosts := newHostPolicy(a.http)
	return func(w http.ResponseWriter, r *http.Request) {
		if !hosts.check(w, r) || !guardChange(w, r) {
			return
		}
		if a.http.Token == "" {
			writeJSON(w, http.StatusForbidden, apiError{"changes are disabled: the configuration sets no http.token"})
			return
		}
		if !a.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="onetick"`)
			writeJSON(w, http.StatusUnauthorized, apiError{"a valid bearer token is required (Authorization: Bearer <http.token>)"})
			return
		}
		if !guardJSON(w, r) {
			return
		}
		h(w, r)
	}
}

func (a *api) register(mux *http.ServeMux) {
	if a.sched != nil {
		var views []onetick.Backend
		if a.store != nil && a.store.Shards() > 1 {
			views, _ = shardViews(a.store) // views of a store that shards: no error
		}
		page := web.Handler(&web.Store{Backend: a.ops.Backend, Views: views, AllJobs: a.ops.AllJobs, Annotate: a.annotate,
			Workers: a.file != nil && len(runJobs(a.file)) > 0,
			Replica: a.replica}, web.Options{Logger: a.log})
		mux.Handle("/", a.read(page.ServeHTTP))
	}
	mux.Handle("/jobs/{job}", a.read(a.jobPage().ServeHTTP))
	mux.HandleFunc("GET /status", a.read(a.status))
	mux.HandleFunc("GET /api/v1/jobs", a.read(a.jobs))
	mux.HandleFunc("GET /api/v1/controls", a.read(a.controls))
	mux.HandleFunc("GET /api/v1/jobs/{job}/runs", a.read(a.runs))
	mux.HandleFunc("POST /api/v1/jobs/{job}/pause", a.change(a.pause))
	mux.HandleFunc("POST /api/v1/jobs/{job}/resume", a.change(a.resume))
	mux.HandleFunc("POST /api/v1/jobs/{job}/trigger", a.change(a.trigger))
	mux.HandleFunc("POST /api/v1/jobs/{job}/backfill", a.change(a.backfill))
	mux.HandleFunc("GET /api/v1/jobs/{job}/dead", a.read(a.deadOfJob))
	mux.HandleFunc("POST /api/v1/dead/{id}/replay", a.change(a.replay))
	mux.HandleFunc("PUT /api/v1/jobsets/{set}", a.change(a.applySet))
	mux.HandleFunc("DELETE /api/v1/jobsets/{set}/jobs/{job}", a.change(a.removeFromSet))
}

// Request body limits, per endpoint. A larger body is refused with 413
// and changes nothing.
const (
	// controlBodyLimit: pause, resume and backfill.
	controlBodyLimit = 64 << 10
	// triggerBodyLimit: a trigger, whose payload alone may take
	// onetick.MaxPayload.
	triggerBodyLimit = onetick.MaxPayload + 64<<10
	// jobSetBodyLimit: a job set (PUT /api/v1/jobsets/{set}).
	jobSetBodyLimit = 64 << 20
)

// readBody reads r's whole body, refusing one past limit (413), one not
// received within the read timeout (408) and an empty one (400).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(r, limit)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return nil, tooLarge(r, limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &statusError{http.StatusRequestTimeout, "request body: not received within http.read_timeout; nothing was changed"}
	case err != nil:
		return nil, &statusError{http.StatusBadRequest, "request body: " + err.Error() + "; nothing was changed"}
	case len(bytes.TrimSpace(data)) == 0:
		return nil, &onetick.InputError{Msg: "request body: empty; nothing was changed"}
	}
	return data, nil
}

func tooLarge(r *http.Request, limit int64) error {
	return &statusError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body: larger than %s, the limit of %s; nothing was changed",
		sizeText(limit), r.Pattern)}
}

// sizeText writes a limit in KiB or MiB.
func sizeText(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// readJSON decodes a body that is exactly one JSON object into v, whose
// fields are all it may have.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	data, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if data = bytes.TrimSpace(data); data[0] != '{' {
		return &onetick.InputError{Msg: "request body: must be a JSON object ({} when no field applies); nothing was changed"}
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return &onetick.InputError{Msg: "request body: " + err.Error() + "; nothing was changed"}
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return &onetick.InputError{Msg: fmt.Sprintf("request body: more after the JSON object (at byte %d): send exactly one; nothing was changed", d.InputOffset())}
	}
	return nil
}

// clipQuoted cuts every Go-quoted value in msg as onetick.Excerpt does,
// and escapes control characters left outside quotes: whatever part of a
// request an error quotes (a JSON field name, a job name in the path), a
// client never gets 10 KB of it back, nor raw control bytes.
func clipQuoted(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); {
		c := msg[i]
		if c == '"' {
			if q, err := strconv.QuotedPrefix(msg[i:]); err == nil {
				if v, err := strconv.Unquote(q); err == nil {
					b.WriteString(onetick.Excerpt(v))
				} else {
					b.WriteString(q)
				}
				i += len(q)
				continue
			}
		}
		if c < ' ' && c != '\n' || c == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", c)
		} else {
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

func (a *api) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 10*time.Second)
}

type actorBody struct {
	Reason string `json:"reason"`
	Who    string `json:"who"`
}

func (a *api) actor(r *http.Request, b actorBody) onetick.Actor {
	who := b.Who
	if who == "" {
		who = "http"
	}
	return onetick.Actor{Who: who + " (" + r.RemoteAddr + ")", Reason: b.Reason}
}

func (a *api) pauseOrResume(w http.ResponseWriter, r *http.Request, pause bool) {
	var b actorBody
	if err := readJSON(w, r, controlBodyLimit, &b); err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	act := a.actor(r, b)
	ops := a.jobOps(r.PathValue("job"))
	op := ops.Resume
	if pause {
		op = ops.Pause
	}
	c, err := op(ctx, r.PathValue("job"), act)
	if err != nil {
		fail(w, err)
		return
	}
	what := "resumed"
	if pause {
		what = "paused"
	}
	a.log.Info("job "+what+" through the API", "job", r.PathValue("job"), "who", act.Who, "reason", act.Reason)
	writeJSON(w, http.StatusOK, c)
}

func (a *api) pause(w http.ResponseWriter, r *http.Request)  { a.pauseOrResume(w, r, true) }
func (a *api) resume(w http.ResponseWriter, r *http.Request) { a.pauseOrResume(w, r, false) }

func (a *api) trigger(w http.ResponseWriter, r *http.Request) {
	var b struct {
		actorBody
		Key     string          `json:"key"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := readJSON(w, r, triggerBodyLimit, &b); err != nil {
		fail(w, err)
		return
	}
	key := b.Key
	if h := r.Header.Get("Idempotency-Key"); h != "" {
		if key != "" && key != h {
			fail(w, &onetick.InputError{Msg: "the Idempotency-Key header and the body's key differ"})
			return
		}
		key = h
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	act := a.actor(r, b.actorBody)
	res, err := a.jobOps(r.PathValue("job")).Trigger(ctx, r.PathValue("job"), key, string(b.Payload), act)
	if err != nil {
		fail(w, err)
		return
	}
	a.log.Info("job triggered through the API", "job", r.PathValue("job"), "tick", res.Tick, "enqueued", res.Enqueued, "who", act.Who)
	writeJSON(w, http.StatusOK, res)
}

func (a *api) backfill(w http.ResponseWriter, r *http.Request) {
	var b struct {
		actorBody
		From   string `json:"from"`
		To     string `json:"to"`
		Max    int    `json:"max"`
		DryRun bool   `json:"dry_run"`
		Again  bool   `json:"again"`
	}
	if err := readJSON(w, r, controlBodyLimit, &b); err != nil {
		fail(w, err)
		return
	}
	from, err := parseTime("from", b.From)
	if err != nil {
		fail(w, err)
		return
	}
	to, err := parseTime("to", b.To)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	act := a.actor(r, b.actorBody)
	res, err := a.jobOps(r.PathValue("job")).Backfill(ctx, r.PathValue("job"), onetick.BackfillRequest{From: from, To: to, Max: b.Max, DryRun: b.DryRun, Again: b.Again}, act)
	if err != nil {
		fail(w, err)
		return
	}
	if !b.DryRun {
		a.log.Info("job backfilled through the API", "job", r.PathValue("job"), "slots", len(res.Slots), "enqueued", res.Enqueued, "who", act.Who)
	}
	writeJSON(w, http.StatusOK, res)
}

// parseTime parses an RFC 3339 time of a request.
func parseTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, &onetick.InputError{Msg: field + " is required (RFC 3339, like 2026-03-29T00:00:00Z)"}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &onetick.InputError{Msg: fmt.Sprintf("%s: not an RFC 3339 time (like 2026-03-29T00:00:00Z): %q", field, v)}
	}
	return t, nil
}

func (a *api) jobs(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	jobs, err := a.ops.AllJobs(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	states, err := a.fleet().JobStates(ctx, jobs)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, states)
}

func (a *api) controls(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	recs, err := a.fleet().ControlLog(ctx, 100)
	if err != nil && !errors.Is(err, onetick.ErrDamaged) {
		fail(w, err)
		return
	}
	if recs == nil {
		recs = []onetick.ControlRecord{}
	}
	writeJSON(w, http.StatusOK, recs)
}

// status is the JSON of `onetick status`, plus this replica's name,
// whether it leads, and the damage it ran into.
func (a *api) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	jobs, err := a.ops.AllJobs(ctx)
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	var st *onetick.Status
	if a.store != nil {
		st, err = readStatus(ctx, a.store, jobs, 20)
	} else {
		st, err = onetick.ReadStatus(ctx, a.ops.Backend, jobs, 20)
	}
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	var runs *worker.Status
	if a.file != nil && a.store != nil {
		runs = readRuns(ctx, a.file, a.store)
	}
	name, leading := replicaOf(a.sched)
	writeJSON(w, http.StatusOK, replicaStatus{Status: st, Runs: runs, Replica: name, IsLeader: leading, Problems: a.sched.Problems()})
}

// annotate fills the status page's rows with what the controls and the
// workers know: the pause, the last run, the dead letters.
func (a *api) annotate(ctx context.Context, rows []web.Job) error {
	var names []string
	for i := range rows {
		if p := rows[i].JobStatus.Paused; p != nil {
			rows[i].Paused = &web.Pause{Since: p.Since, By: p.Who, Reason: p.Reason}
		}
		names = append(names, rows[i].Name)
	}
	if a.file == nil || a.store == nil || len(runJobs(a.file)) == 0 {
		return nil
	}
	store, err := workInspector(a.store, a.file.Worker.Group)
	if err != nil {
		return nil
	}
	withRun := map[string]bool{}
	for _, j := range runJobs(a.file) {
		withRun[j.Name] = true
	}
	var asked []string
	for _, n := range names {
		if withRun[n] {
			asked = append(asked, n)
		}
	}
	if len(asked) == 0 {
		return nil
	}
	st, err := store.Status(ctx, asked)
	if err != nil {
		return err
	}
	byJob := map[string]worker.JobStatus{}
	for _, j := range st.Jobs {
		byJob[j.Job] = j
	}
	for i := range rows {
		j, ok := byJob[rows[i].Name]
		if !ok {
			continue
		}
		dead := j.Dead
		rows[i].DeadLetters = &dead
		if j.LastOutcome != "" {
			rows[i].LastRun = &web.Run{At: j.LastAt, OK: j.LastOutcome == worker.OutcomeSucceeded, Outcome: string(j.LastOutcome)}
		}
	}
	return nil
}

// applySet makes a set exactly the jobs of the YAML (or JSON) body, a
// configuration file's jobs section, checked as the file is;
// ?dry_run=true shows the difference only.
func (a *api) applySet(w http.ResponseWriter, r *http.Request) {
	js, ok := a.ops.Backend.(onetick.JobStore)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, apiError{"this backend keeps no jobs defined at run time"})
		return
	}
	data, err := readBody(w, r, jobSetBodyLimit)
	if err != nil {
		fail(w, err)
		return
	}
	f, err := config.ParseRequestJobs("request body", data, a.file)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{clipQuoted(err.Error())})
		return
	}
	var allow config.Allow
	if a.file != nil {
		allow = allowOf(a.file)
	}
	defs, err := jobDefs(f, a.ops.Jobs, allow)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{clipQuoted(err.Error())})
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	d, err := js.ApplyJobs(ctx, r.PathValue("set"), defs, r.URL.Query().Get("dry_run") == "true")
	if err != nil {
		fail(w, err)
		return
	}
	if !d.DryRun {
		a.log.Info("job set applied through the API", "set", r.PathValue("set"), "added", len(d.Added), "changed", len(d.Changed),
			"removed", len(d.Removed), "version", d.Version)
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *api) removeFromSet(w http.ResponseWriter, r *http.Request) {
	js, ok := a.ops.Backend.(onetick.JobStore)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, apiError{"this backend keeps no jobs defined at run time"})
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	d, err := js.RemoveJobs(ctx, r.PathValue("set"), []string{r.PathValue("job")})
	if err != nil {
		fail(w, err)
		return
	}
	if len(d.Removed) == 0 {
		writeJSON(w, http.StatusNotFound, apiError{fmt.Sprintf("no job %s in set %s", onetick.Excerpt(r.PathValue("job")), onetick.Excerpt(r.PathValue("set")))})
		return
	}
	writeJSON(w, http.StatusOK, d)
}
