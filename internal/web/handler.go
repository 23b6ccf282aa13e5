package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// DefaultRefresh is how often the page refreshes itself.
const DefaultRefresh = 5 * time.Second

// Refresh bounds for ?refresh=SECONDS.
const (
	minRefresh = time.Second
	maxRefresh = time.Hour
)

//go:embed assets
var assets embed.FS

var (
	pageCSS = mustRead("assets/page.css")
	pageJS  = mustRead("assets/page.js")
	tmpl    = template.Must(template.New("page.html").Funcs(funcs).ParseFS(assets, "assets/page.html"))
	// The policy allows the page's own inline style and script (by hash)
	// and nothing from anywhere else; style attributes carry the widths of
	// the timeline.
	csp = "default-src 'none'; " +
		"style-src 'unsafe-inline'; style-src-elem " + hash(pageCSS) + "; style-src-attr 'unsafe-inline'; " +
		"script-src " + hash(pageJS) + "; connect-src 'self'; img-src 'self'; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)

func mustRead(name string) string {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen at run time
	}
	return string(b)
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}

// Options configure the handler.
type Options struct {
	// Refresh is how often the page refreshes itself (default
	// DefaultRefresh); ?refresh=SECONDS overrides it per page.
	Refresh time.Duration
	// Timeout bounds one read of the source (default 5s).
	Timeout time.Duration
	// Logger receives render failures; nil discards them.
	Logger *slog.Logger
}

// Handler serves the page at "/" from src. Other paths are 404, methods
// other than GET and HEAD 405: the page changes nothing.
func Handler(src Source, opts Options) http.Handler {
	opts = opts.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the status page is read-only", http.StatusMethodNotAllowed)
			return
		}
		params := r.URL.Query()
		q := ParseQuery(params)
		ctx, cancel := context.WithTimeout(r.Context(), opts.Timeout)
		defer cancel()
		p, err := src.Page(ctx, q)
		if p == nil {
			p = &Page{Query: q}
		}
		code := http.StatusOK
		if err != nil {
			p.StoreError = err.Error()
			code = http.StatusServiceUnavailable
		}
		p.Refresh = refresh(params.Get("refresh"), opts.Refresh)
		if p.Query.Page < 1 {
			p.Query.Page = 1
		}
		var buf bytes.Buffer
		if err := Render(&buf, p); err != nil {
			opts.Logger.Error("status page: render failed", "err", err)
			http.Error(w, "status page: render failed", http.StatusInternalServerError)
			return
		}
		writeHTML(w, r, code, csp, buf.Bytes())
	})
}

func (o Options) withDefaults() Options {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func refresh(s string, def time.Duration) time.Duration {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	// Clamp the count before it becomes a Duration, which could overflow.
	return time.Duration(min(max(n, int(minRefresh/time.Second)), int(maxRefresh/time.Second))) * time.Second
}
