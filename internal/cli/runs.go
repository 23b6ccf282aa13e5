package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

// The run ledger's commands: `runs` lists what became of a job's slots,
// `why` tells one slot's whole story (docs/ledger.md).

// ledgerCmd opens the ledger of job (its shard's, with shards) for a
// command about it, and the context its reads take (30 s at most); done
// closes both.
func ledgerCmd(ctx context.Context, c *controlCmd, env Env, job string) (onetick.Ledger, context.Context, func(), error) {
	_, _, h, err := c.sf.open(ctx, c.name, nil, env)
	if err != nil {
		return nil, nil, nil, err
	}
	lg, err := h.JobLedger(job)
	if err != nil {
		_ = h.Close()
		return nil, nil, nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	return lg, sctx, func() { cancel(); _ = h.Close() }, nil
}

// slotArg reads a slot given as an RFC 3339 time or as Unix milliseconds.
func slotArg(flag, v string) (onetick.Slot, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return onetick.Slot(n), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, badInput("%s: want an RFC 3339 time (like 2026-03-29T00:00:00Z) or Unix milliseconds, got %s", flag, onetick.Excerpt(v))
	}
	return onetick.SlotOf(t), nil
}

func cmdRuns(ctx context.Context, args []string, env Env) error {
	c := newControlCmd("runs", env)
	from := c.fs.String("from", "", "oldest slot (RFC 3339 or Unix ms); default: all kept")
	to := c.fs.String("to", "", "newest slot (RFC 3339 or Unix ms); default: all kept")
	fate := c.fs.String("fate", "", "only this fate: "+fateList())
	limit := c.fs.Int("limit", onetick.DefaultRunLimit, fmt.Sprintf("how many records, newest first (at most %d)", onetick.MaxRunLimit))
	after := c.fs.String("after", "", "continue a listing: the cursor printed after the last page")
	pos, err := parseFlags(c.fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("runs: want exactly one JOB, got %d arguments", len(pos))
	}
	q := onetick.RunQuery{Job: pos[0], Fate: onetick.Fate(*fate), After: *after, Limit: *limit}
	if *from != "" {
		if q.From, err = slotArg("--from", *from); err != nil {
			return err
		}
	}
	if *to != "" {
		if q.To, err = slotArg("--to", *to); err != nil {
			return err
		}
	}
	if q.Fate != "" && !slices.Contains(onetick.Fates, q.Fate) {
		return badInput("--fate: want one of %s, got %s", fateList(), onetick.Excerpt(*fate))
	}
	if *limit < 1 || *limit > onetick.MaxRunLimit {
		return badInput("--limit: must be between 1 and %d, got %d", onetick.MaxRunLimit, *limit)
	}
	lg, sctx, done, err := ledgerCmd(ctx, c, env, q.Job)
	if err != nil {
		return err
	}
	defer done()
	page, err := lg.Runs(sctx, q)
	if errors.Is(err, storekit.ErrBadCursor) {
		return badInput("--after: not a cursor printed by `onetick runs`: %s", onetick.Excerpt(*after))
	}
	if err != nil {
		return err
	}
	if page.Runs == nil {
		page.Runs = []onetick.Run{}
	}
	return c.print(env.Stdout, page, func() {
		if len(page.Runs) == 0 {
			fprintf(env.Stdout, "no runs of %s recorded%s\n", printable(q.Job), querySays(q))
			return
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SLOT\tFATE\tREASON\tATTEMPTS\tRESULT\tUPDATED\tTICK")
		for _, r := range page.Runs {
			fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", slotText(r), r.Fate, printable(short(r.Reason, 60)), attempts(r),
				lastResult(r), r.Updated.Format(time.RFC3339), printable(r.Tick))
		}
		_ = tw.Flush()
		if page.Next != "" {
			fprintf(env.Stdout, "more: onetick runs %s --after %s\n", printable(q.Job), page.Next)
		}
	})
}

func cmdWhy(ctx context.Context, args []string, env Env) error {
	c := newControlCmd("why", env)
	pos, err := parseFlags(c.fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return badInput("why: want JOB and SLOT (RFC 3339 or Unix ms) or a trigger's KEY, got %d arguments", len(pos))
	}
	job, arg := pos[0], pos[1]
	lg, sctx, done, err := ledgerCmd(ctx, c, env, job)
	if err != nil {
		return err
	}
	defer done()
	var runs []onetick.Run
	if s, serr := slotArg("SLOT", arg); serr == nil {
		// Every record that speaks of the slot: its own, a backfill of
		// it, a skipped range around it.
		page, err := lg.Runs(sctx, onetick.RunQuery{Job: job, From: s, To: s, Limit: onetick.MaxRunLimit})
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if r.Slot == s || (r.Count > 0 && r.Slot <= s && s <= r.Through) {
				runs = append(runs, r)
			}
		}
	} else {
		if err := onetick.ValidTriggerKey(arg); err != nil {
			return badInput("why: %s is neither a slot (RFC 3339 or Unix ms) nor a trigger key: %v", onetick.Excerpt(arg), err)
		}
		r, ok, err := lg.Run(sctx, job, onetick.TriggerID(job, arg))
		if err != nil {
			return err
		}
		if ok {
			runs = append(runs, r)
		}
	}
	if runs == nil {
		runs = []onetick.Run{}
	}
	return c.print(env.Stdout, runs, func() {
		if len(runs) == 0 {
			fprintf(env.Stdout, "no record of %s %s: not due, older than the ledger keeps, or before the store kept a ledger\n",
				printable(job), printable(arg))
			return
		}
		for i, r := range runs {
			if i > 0 {
				fmt.Fprintln(env.Stdout)
			}
			story(env.Stdout, r)
		}
	})
}

// story prints one record: what it is, its fate, and its events.
func story(w io.Writer, r onetick.Run) {
	what := "slot " + slotText(r)
	switch {
	case r.Count > 0:
		what = fmt.Sprintf("slots %s .. %s (%d)", r.Slot.String(), r.Through.String(), r.Count)
	case r.Kind != "":
		what = r.Kind + " at " + r.Slot.String()
	}
	fprintf(w, "%s %s, tick %s\n", printable(r.Job), what, printable(r.Tick))
	fate := string(r.Fate)
	if r.Reason != "" {
		fate += ": " + printable(r.Reason)
	}
	fprintf(w, "fate: %s\n", fate)
	if r.Dropped > 0 {
		fprintf(w, "  (%d events after the first not kept)\n", r.Dropped)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range r.Events {
		var by []string
		if e.Epoch != 0 {
			by = append(by, fmt.Sprintf("epoch %d", e.Epoch))
		}
		if e.Replica != "" {
			by = append(by, "replica "+printable(e.Replica))
		}
		if e.Attempt != 0 {
			by = append(by, fmt.Sprintf("attempt %d", e.Attempt))
		}
		if e.Worker != "" {
			by = append(by, "worker "+printable(e.Worker))
		}
		if x := resultText(e.Result); x != "" {
			by = append(by, x)
		}
		if e.Duration > 0 {
			by = append(by, "took "+durationText(e.Duration))
		}
		detail := ""
		if e.Detail != "" {
			detail = ": " + printable(short(e.Detail, 200))
		}
		fprintf(tw, "  %s\t%s\t%s%s\n", e.At.Format("2006-01-02T15:04:05.000Z07:00"), e.What, strings.Join(by, ", "), detail)
	}
	_ = tw.Flush()
	outputs(w, r)
}

// slotText is a record's slot as a time, or a trigger's key.
func slotText(r onetick.Run) string {
	if r.Count > 0 {
		return fmt.Sprintf("%s..%s", r.Slot.String(), r.Through.String())
	}
	return r.Slot.String()
}

// attempts counts a record's started events.
func attempts(r onetick.Run) int {
	n := 0
	for _, e := range r.Events {
		if e.What == onetick.EventStarted {
			n++
		}
	}
	return n
}

func fateList() string {
	s := make([]string, len(onetick.Fates))
	for i, f := range onetick.Fates {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// querySays describes a query's bounds for "nothing found".
func querySays(q onetick.RunQuery) string {
	var s []string
	if q.Fate != "" {
		s = append(s, "with fate "+string(q.Fate))
	}
	if q.From != 0 {
		s = append(s, "from "+q.From.String())
	}
	if q.To != 0 {
		s = append(s, "to "+q.To.String())
	}
	if len(s) == 0 {
		return ""
	}
	return " " + strings.Join(s, " ")
}

// runs is GET /api/v1/jobs/{job}/runs?from=&to=&fate=&after=&limit=: a
// page of the job's ledger, newest slot first (from and to as RFC 3339 or
// Unix ms).
func (a *api) runs(w http.ResponseWriter, r *http.Request) {
	if a.store == nil {
		fail(w, &statusError{code: http.StatusNotImplemented, msg: "this replica has no store handle"})
		return
	}
	lg, err := a.store.JobLedger(r.PathValue("job"))
	if err != nil {
		fail(w, &statusError{code: http.StatusNotImplemented, msg: err.Error()})
		return
	}
	v := r.URL.Query()
	q := onetick.RunQuery{Job: r.PathValue("job"), Fate: onetick.Fate(v.Get("fate")), After: v.Get("after")}
	for _, b := range []struct {
		key string
		dst *onetick.Slot
	}{{"from", &q.From}, {"to", &q.To}} {
		if x := v.Get(b.key); x != "" {
			s, err := slotArg(b.key, x)
			if err != nil {
				fail(w, &onetick.InputError{Msg: err.Error()})
				return
			}
			*b.dst = s
		}
	}
	if q.Fate != "" && !slices.Contains(onetick.Fates, q.Fate) {
		fail(w, &onetick.InputError{Msg: "fate: want one of " + fateList() + ", got " + onetick.Excerpt(string(q.Fate))})
		return
	}
	if x := v.Get("limit"); x != "" {
		n, err := strconv.Atoi(x)
		if err != nil || n < 1 || n > onetick.MaxRunLimit {
			fail(w, &onetick.InputError{Msg: fmt.Sprintf("limit: want 1 .. %d, got %s", onetick.MaxRunLimit, onetick.Excerpt(x))})
			return
		}
		q.Limit = n
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	page, err := lg.Runs(ctx, q)
	if errors.Is(err, storekit.ErrBadCursor) {
		fail(w, &onetick.InputError{Msg: "after: not a cursor of this listing"})
		return
	}
	if err != nil {
		fail(w, err)
		return
	}
	if page.Runs == nil {
		page.Runs = []onetick.Run{}
	}
	writeJSON(w, http.StatusOK, page)
}
