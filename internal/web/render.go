package web

import (
	"fmt"
	"hash/fnv"
	"html/template"
	"io"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/onetick/onetick"
)

// Render writes the page as HTML.
func Render(w io.Writer, p *Page) error {
	return tmpl.Execute(w, view{Page: p, CSS: template.CSS(pageCSS), JS: template.JS(pageJS)})
}

// view is what the template executes on: the page and its inline assets
// (trusted: they are the embedded files the CSP hashes).
type view struct {
	*Page
	CSS template.CSS
	JS  template.JS
}

var funcs = template.FuncMap{
	"slot":   slotView,
	"utc":    utc,
	"dur":    humanDuration,
	"num":    thousands,
	"holder": holderClass,
	"rel":    relative,
	"secs":   func(d time.Duration) int { return int(d / time.Second) },
	"add":    func(a, b int) int { return a + b },
	"deref":  func(n *int64) int { return int(*n) },
	"shardList": func(ns []int) string {
		out := ""
		for i, n := range ns {
			if i > 0 {
				out += ", "
			}
			out += strconv.Itoa(n)
		}
		return out
	},
	// The job page's.
	"slotAt":   slotTime,
	"fate":     fateClass,
	"deadline": deadlineText,
	"exit":     exitText,
	"jobURL":   func(name string) string { return "jobs/" + url.PathEscape(name) },
	"pathEsc":  url.PathEscape,
	"toInt":    func(n int64) int { return int(n) },
	"lastLine": lastLine,
	"short":    shortDuration,
}

// termView is one leadership term as the timeline shows it.
type termView struct {
	onetick.Term
	Duration time.Duration
	// Ended is how the term ended: released, expired, fenced, current, or
	// open (no end recorded and not the current lease: it lapsed and
	// nobody has taken over yet).
	Ended string
	// Share is the term's part of the timeline's width, in percent.
	Share float64
}

// Timeline returns the terms oldest first, with their durations.
func (p *Page) Timeline() []termView {
	out := make([]termView, len(p.Terms))
	var total time.Duration
	for i, t := range p.Terms {
		v := termView{Term: t, Ended: string(t.Reason)}
		end := t.End
		if end.IsZero() {
			end = p.StoreTime
			switch {
			case p.current(t):
				v.Ended = "current"
			case v.Ended == "":
				v.Ended = "open"
			}
		}
		if !end.IsZero() && end.After(t.Start) {
			v.Duration = end.Sub(t.Start)
		}
		total += v.Duration
		out[len(p.Terms)-1-i] = v
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].Duration) * 100 / float64(total)
		}
	}
	return out
}

// Terms newest first, as the list shows them.
func (p *Page) TermList() []termView {
	tl := p.Timeline()
	for i, j := 0, len(tl)-1; i < j; i, j = i+1, j-1 {
		tl[i], tl[j] = tl[j], tl[i]
	}
	return tl
}

// LedShards counts the shards somebody leads.
func (p *Page) LedShards() int {
	n := 0
	for _, s := range p.Shards {
		if s.Leader != nil {
			n++
		}
	}
	return n
}

// UnledShards lists the shards nobody leads.
func (p *Page) UnledShards() []int {
	var out []int
	for _, s := range p.Shards {
		if s.Leader == nil {
			out = append(out, s.Shard)
		}
	}
	return out
}

// DamagedRows counts the rows of this page with damaged state.
func (p *Page) DamagedRows() int {
	n := 0
	for _, j := range p.Jobs {
		if len(j.Damage) > 0 {
			n++
		}
	}
	return n
}

// relayJobsShown is how many of a relay's jobs its row names.
const relayJobsShown = 5

// relayView is one row of the relays table.
type relayView struct {
	onetick.RelayStatus
	// Shown are the first jobs relayed to it; More counts the others.
	Shown []string
	More  int
	// Why says why the backlog is n/a, when it is.
	Why string
}

// RelayRows are the relays as the table shows them.
func (p *Page) RelayRows() []relayView {
	out := make([]relayView, len(p.Relays))
	for i, r := range p.Relays {
		v := relayView{RelayStatus: r, Shown: r.Jobs}
		if len(r.Jobs) > relayJobsShown {
			v.Shown, v.More = r.Jobs[:relayJobsShown], len(r.Jobs)-relayJobsShown
		}
		if r.Backlog == nil {
			v.Why = r.Error
			if v.Why == "" {
				v.Why = r.Note
			}
		}
		out[i] = v
	}
	return out
}

// timeView is a slot as a cell shows it.
type timeView struct {
	ISO   string // RFC 3339 UTC, for <time datetime>
	Local string // in the job's zone
	UTC   string // in UTC, when the zone is another one
	Rel   string // relative to the store's clock
}

var zones sync.Map // zone name -> *time.Location

func zone(name string) *time.Location {
	if name == "" || name == "UTC" {
		return time.UTC
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		l = time.UTC
	}
	zones.Store(name, l)
	return l
}

func slotView(s *onetick.Slot, zoneName string, now time.Time) *timeView {
	if s == nil {
		return nil
	}
	t := s.Time()
	v := &timeView{ISO: t.Format(time.RFC3339Nano), Rel: relative(t, now)}
	if loc := zone(zoneName); loc != time.UTC {
		lt := t.In(loc)
		v.Local = lt.Format("2006-01-02 15:04:05 MST")
		v.UTC = t.Format("15:04:05") + " UTC"
		if lt.YearDay() != t.YearDay() {
			v.UTC = t.Format("2006-01-02 15:04:05") + " UTC"
		}
	} else {
		v.Local = t.Format("2006-01-02 15:04:05") + " UTC"
	}
	return v
}

func utc(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// relative says "in 3s" or "4m 10s ago" from now.
func relative(t, now time.Time) string {
	if now.IsZero() || t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	switch {
	case d > 0:
		return "in " + humanDuration(d)
	case d > -time.Second:
		return "now"
	default:
		return humanDuration(-d) + " ago"
	}
}

// humanDuration keeps the two largest units: "3d 4h", "2h 05m", "4m 10s",
// "12.3s", "850ms".
func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + humanDuration(-d)
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %02dm", d/time.Hour, d%time.Hour/time.Minute)
	default:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	}
}

// thousands formats n with thousands separators: 100,000 reads at a glance.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// holderClass gives each replica one of eight colours, the same on every
// page and every replica.
func holderClass(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return "h" + strconv.Itoa(int(h.Sum32()%8))
}
