package web

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/onetick/onetick"
)

var (
	jobCSS = pageCSS + mustRead("assets/job.css")
	// The job page's script is the status page's refresh plus its actions.
	jobJS   = pageJS + mustRead("assets/job.js")
	jobTmpl = template.Must(template.New("job.html").Funcs(funcs).ParseFS(assets, "assets/job.html", "assets/page.html"))
	// As the status page's policy; the actions' fetch() goes to this
	// replica only (connect-src 'self'), and no form is ever sent anywhere.
	jobCSP = "default-src 'none'; " +
		"style-src 'unsafe-inline'; style-src-elem " + hash(jobCSS) + "; style-src-attr 'unsafe-inline'; " +
		"script-src " + hash(jobJS) + "; connect-src 'self'; img-src 'self'; " +
		"form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)

// RenderJob writes the page of a job as HTML.
func RenderJob(w io.Writer, p *JobPage) error {
	return jobTmpl.Execute(w, jobView{JobPage: p, CSS: template.CSS(jobCSS), JS: template.JS(jobJS)})
}

type jobView struct {
	*JobPage
	CSS template.CSS
	JS  template.JS
}

// RunRow is one record of the runs list.
type RunRow struct {
	onetick.Run
	// Attempts counts the attempts begun.
	Attempts int
	// Result is the newest outcome's result (exit code, HTTP status,
	// duration); HasResult says whether there is one.
	Result    onetick.Result
	HasResult bool
	// Output is the newest output kept, and the event it came with.
	Output   string
	OutputOf string
	// Late: a scheduled slot that missed the job's deadline.
	Late onetick.Verdict
}

// RunRows returns the runs list's rows.
func (p *JobPage) RunRows() []RunRow {
	rows := make([]RunRow, len(p.Runs))
	for i, r := range p.Runs {
		row := RunRow{Run: r}
		for k := len(r.Events) - 1; k >= 0; k-- {
			e := r.Events[k]
			if e.What == onetick.EventStarted {
				row.Attempts++
			}
			if !row.HasResult && (e.Exit != nil || e.Status != 0 || e.Duration != 0) {
				row.Result, row.HasResult = e.Result, true
			}
			if row.Output == "" && e.Output != "" {
				row.Output, row.OutputOf = e.Output, e.What
				if e.Attempt > 0 {
					row.OutputOf += ", attempt " + strconv.Itoa(e.Attempt)
				}
			}
		}
		if r.Kind == "" && r.Count == 0 && p.Deadline.Set() {
			row.Late = p.Deadline.Judge(r.Slot, r, true, p.StoreTime)
		}
		rows[i] = row
	}
	return rows
}

// Paused is the job's pause as the status page shows one.
func (p *JobPage) Paused() *Pause {
	if v := p.Job.Paused; v != nil {
		return &Pause{Since: v.Since, By: v.Who, Reason: v.Reason}
	}
	return nil
}

// fateClass is a fate's badge class.
func fateClass(f onetick.Fate) string {
	switch f {
	case onetick.FateSucceeded:
		return "ok"
	case onetick.FateDead, onetick.FateRetrying:
		return "fenced"
	case onetick.FateSkipped, onetick.FatePaused:
		return "paused"
	case onetick.FateRunning, onetick.FateEnqueued:
		return "released"
	}
	return ""
}

// JobHandler serves the page of the job named by the request's {job} path
// value: mount it at "/jobs/{job}". Methods other than GET and HEAD are
// 405 (the page's actions go to the API); an unknown job is 404.
func JobHandler(src JobSource, opts Options) http.Handler {
	opts = opts.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("job")
		if name == "" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the job page's actions go to the API (/api/v1/...)", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), opts.Timeout)
		defer cancel()
		p, err := src.JobPage(ctx, name)
		if errors.Is(err, onetick.ErrUnknownJob) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "no job "+onetick.Excerpt(name)+" (the list of jobs is at /)\n")
			return
		}
		if p == nil {
			p = &JobPage{Job: onetick.JobStatus{Name: name}, DeadTotal: -1}
		}
		code := http.StatusOK
		if err != nil {
			p.StoreError = err.Error()
			code = http.StatusServiceUnavailable
		}
		p.Refresh = refresh(r.URL.Query().Get("refresh"), opts.Refresh)
		var buf bytes.Buffer
		if err := RenderJob(&buf, p); err != nil {
			opts.Logger.Error("job page: render failed", "job", name, "err", err)
			http.Error(w, "job page: render failed", http.StatusInternalServerError)
			return
		}
		writeHTML(w, r, code, jobCSP, buf.Bytes())
	})
}

// writeHTML answers a page with the headers both pages send.
func writeHTML(w http.ResponseWriter, r *http.Request, code int, policy string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// deadlineText says a deadline in words.
func deadlineText(d onetick.Deadline) string {
	switch {
	case d.Start > 0 && d.Finish > 0:
		return "started within " + shortDuration(d.Start) + ", succeeded within " + shortDuration(d.Finish) + " of its slot"
	case d.Start > 0:
		return "started within " + shortDuration(d.Start) + " of its slot"
	case d.Finish > 0:
		return "succeeded within " + shortDuration(d.Finish) + " of its slot"
	}
	return ""
}

// exitText is an exit code, or "".
func exitText(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

// slotTime is a slot as a cell shows it, in the job's zone.
func slotTime(s onetick.Slot, zone string, now time.Time) *timeView { return slotView(&s, zone, now) }

// lastLine is the last line of an output that has text, for a one-line
// summary of it.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// shortDuration writes a configured duration as it is usually written:
// "90s", "2m", "1h30m" (Go's form without its zero units).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
